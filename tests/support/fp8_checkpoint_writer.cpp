#include "tests/support/fp8_checkpoint_writer.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "quant/fp8.h"

namespace lmx::testing {
namespace {

const std::vector<std::string> kProjections = {
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};

}  // namespace

std::string llama_projection(int layer, const std::string& p) {
  return "model.layers." + std::to_string(layer) + "." + p;
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

void equalize_row_maxima(std::map<std::string, TensorSpec>& t, int layers) {
  for (int l = 0; l < layers; ++l)
    for (const std::string& p : kProjections) {
      TensorSpec& w = t[llama_projection(l, p) + ".weight"];
      float peak = 0;
      for (float v : w.values) peak = std::max(peak, std::fabs(v));
      const int64_t rows = w.shape[0], in = w.shape[1];
      for (int64_t r = 0; r < rows; ++r) w.values[size_t(r * in + r % in)] = 1.5f * peak;
    }
}

std::map<std::string, TensorSpec> fp8_tensors(std::map<std::string, TensorSpec> t, int layers,
                                              bool per_tensor) {
  for (int l = 0; l < layers; ++l)
    for (const std::string& p : kProjections) {
      const std::string name = llama_projection(l, p) + ".weight";
      TensorSpec& w = t[name];
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
      w.dtype = "F8_E4M3";
      w.values.clear();
      w.bytes = codes;
      t[name + "_scale"] = s;
    }
  return t;
}

}  // namespace lmx::testing
