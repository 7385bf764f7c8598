#include "tests/support/fp8_checkpoint_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "kernels/kv_dtype.h"
#include "quant/fp8.h"

namespace lmx::testing {
namespace {

const std::vector<std::string> kProjections = {
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};

// f(name, tensor) for every decoder projection's weight of layers 0..layers-1.
template <typename F>
void for_each_projection(std::map<std::string, TensorSpec>& t, int layers, F&& f) {
  for (int l = 0; l < layers; ++l)
    for (const std::string& p : kProjections) {
      const std::string name = llama_projection(l, p) + ".weight";
      f(name, t.at(name));
    }
}

// w's values replaced by E4M3 codes.
void store_codes(TensorSpec& w, std::vector<uint8_t> codes) {
  w.dtype = "F8_E4M3";
  w.values.clear();
  w.bytes = std::move(codes);
}

}  // namespace

std::string llama_projection(int layer, const std::string& p) {
  return "model.layers." + std::to_string(layer) + "." + p;
}

nlohmann::json block_fp8_config() {
  return {{"quant_method", "fp8"},
          {"fmt", "e4m3"},
          {"activation_scheme", "dynamic"},
          {"weight_block_size", {kFp8Block, kFp8Block}},
          {"modules_to_not_convert", {"lm_head"}}};
}

nlohmann::json compressed_tensors_config(const char* strategy) {
  const nlohmann::json weights = {{"num_bits", 8}, {"type", "float"}, {"strategy", strategy},
                                  {"symmetric", true}, {"dynamic", false}};
  const nlohmann::json inputs = {{"num_bits", 8}, {"type", "float"}, {"strategy", "token"},
                                 {"symmetric", true}, {"dynamic", true}};
  return {{"quant_method", "compressed-tensors"},
          {"format", "float-quantized"},
          {"ignore", {"lm_head"}},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}}, {"weights", weights}, {"input_activations", inputs}}}}}};
}

void equalize_row_maxima(std::map<std::string, TensorSpec>& t, int layers, int64_t columns) {
  for_each_projection(t, layers, [&](const std::string&, TensorSpec& w) {
    float peak = 0;
    for (float v : w.values) peak = std::max(peak, std::fabs(v));
    const int64_t rows = w.shape[0], in = w.shape[1], every = columns > 0 ? columns : in;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < in; c += every)
        w.values[size_t(r * in + c + r % std::min(every, in - c))] = 1.5f * peak;
  });
}

std::map<std::string, TensorSpec> fp8_tensors(std::map<std::string, TensorSpec> t, int layers,
                                              bool per_tensor) {
  for_each_projection(t, layers, [&](const std::string& name, TensorSpec& w) {
    const int64_t rows = w.shape[0], in = w.shape[1];
    std::vector<uint8_t> codes(size_t(rows * in));
    std::vector<float> scales(static_cast<size_t>(rows));
    quant::cpu::quantize_rows_e4m3(name.c_str(), w.values.data(), rows, in, codes.data(),
                                   scales.data());
    TensorSpec s;
    if (per_tensor) {
      for (float v : scales)
        if (v != scales[0]) throw std::logic_error(name + ": rows with different scales");
      s.shape = {1};
      s.values = {scales[0]};
    } else {
      s.shape = {rows, 1};
      s.values = scales;
    }
    store_codes(w, std::move(codes));
    t[name + "_scale"] = s;
  });
  return t;
}

std::map<std::string, TensorSpec> fp8_block_tensors(std::map<std::string, TensorSpec> t,
                                                    int layers) {
  for_each_projection(t, layers, [&](const std::string& name, TensorSpec& w) {
    const int64_t rows = w.shape[0], in = w.shape[1], B = kFp8Block;
    const int64_t block_rows = (rows + B - 1) / B, block_cols = (in + B - 1) / B;
    std::vector<uint8_t> codes(size_t(rows * in));
    TensorSpec s{"F32", {block_rows, block_cols}, {}, {}};
    for (int64_t bo = 0; bo < block_rows; ++bo)
      for (int64_t bk = 0; bk < block_cols; ++bk) {
        const int64_t r0 = bo * B, r1 = std::min(rows, r0 + B), c0 = bk * B,
                      c1 = std::min(in, c0 + B);
        float amax = 0.0f;
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c)
            amax = std::max(amax, std::fabs(w.values[size_t(r * in + c)]));
        const float scale = amax / quant::kE4m3Max;
        s.values.push_back(scale);
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c)
            codes[size_t(r * in + c)] =
                scale > 0.0f ? kernels::cpu::encode_e4m3(w.values[size_t(r * in + c)] / scale) : 0;
      }
    store_codes(w, std::move(codes));
    t[name + "_scale_inv"] = s;
  });
  return t;
}

void vary_block_magnitudes(std::map<std::string, TensorSpec>& tensors) {
  const float factors[] = {0.25f, 1.0f, 4.0f, 0.5f};
  for (auto& [name, t] : tensors) {
    if (t.shape.size() != 2 || name.find("layers") == std::string::npos) continue;
    const int64_t in = t.shape[1];
    for (size_t i = 0; i < t.values.size(); ++i)
      t.values[i] *=
          factors[size_t(int64_t(i) / in / kFp8Block + 3 * (int64_t(i) % in / kFp8Block)) % 4];
  }
}

std::map<std::string, TensorSpec> dequantized_block_tensors(std::map<std::string, TensorSpec> t) {
  std::vector<std::string> scales;
  for (auto& [name, w] : t) {
    if (w.dtype != "F8_E4M3") continue;
    const TensorSpec& s = t.at(name + "_scale_inv");
    const int64_t in = w.shape[1], cols = s.shape[1];
    w.values.resize(w.bytes.size());
    for (size_t i = 0; i < w.bytes.size(); ++i)
      w.values[i] =
          kernels::cpu::decode_e4m3(w.bytes[i]) *
          s.values[size_t(int64_t(i) / in / kFp8Block * cols + int64_t(i) % in / kFp8Block)];
    w.dtype = "F32";
    w.bytes.clear();
    scales.push_back(name + "_scale_inv");
  }
  for (const std::string& name : scales) t.erase(name);
  return t;
}

}  // namespace lmx::testing
