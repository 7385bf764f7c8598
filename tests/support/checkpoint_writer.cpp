#include "tests/support/checkpoint_writer.h"

#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

namespace lmx::testing {

namespace fs = std::filesystem;

std::string safetensors_bytes(const std::map<std::string, TensorSpec>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string data;
  for (const auto& [name, t] : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    const size_t elem = t.dtype == "F32" ? 4 : (t.dtype == "F16" || t.dtype == "BF16") ? 2 : 1;
    const size_t begin = data.size();
    std::string bytes(size_t(n) * elem, '\0');
    if (t.dtype == "F32" && !t.values.empty()) std::memcpy(bytes.data(), t.values.data(), bytes.size());
    if (elem == 1 && !t.bytes.empty()) {
      if (t.bytes.size() != bytes.size())
        throw std::invalid_argument("tensor '" + name + "': " + std::to_string(t.bytes.size()) +
                                    " bytes for " + std::to_string(bytes.size()));
      std::memcpy(bytes.data(), t.bytes.data(), bytes.size());
    }
    data += bytes;
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  const std::string h = header.dump();
  const uint64_t len = h.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &len, 8);
  return out + h + data;
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

TempDir::TempDir() {
  static std::mt19937_64 rng(std::random_device{}());
  path_ = fs::temp_directory_path() / ("lmx-test-" + std::to_string(rng()));
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

nlohmann::json tiny_llama_config() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"hidden_size", 16},
          {"num_hidden_layers", 1},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"intermediate_size", 24},
          {"vocab_size", 32},
          {"max_position_embeddings", 64},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 10000.0},
          {"tie_word_embeddings", false},
          {"eos_token_id", 2},
          {"bos_token_id", 1}};
}

std::map<std::string, TensorSpec> tiny_llama_tensors(const nlohmann::json& c) {
  const int64_t H = c["hidden_size"], L = c["num_hidden_layers"], nh = c["num_attention_heads"];
  const int64_t nkv = c["num_key_value_heads"], I = c["intermediate_size"], V = c["vocab_size"];
  const int64_t hd = H / nh;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.2f);
  auto make = [&](std::vector<int64_t> shape, float offset = 0.0f) {
    TensorSpec t;
    t.shape = shape;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    for (int64_t i = 0; i < n; ++i) t.values.push_back(offset + normal(rng));
    return t;
  };
  std::map<std::string, TensorSpec> t;
  t["model.embed_tokens.weight"] = make({V, H});
  t["model.norm.weight"] = make({H}, 1.0f);
  t["lm_head.weight"] = make({V, H});
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t[p + "input_layernorm.weight"] = make({H}, 1.0f);
    t[p + "post_attention_layernorm.weight"] = make({H}, 1.0f);
    t[p + "self_attn.q_proj.weight"] = make({nh * hd, H});
    t[p + "self_attn.k_proj.weight"] = make({nkv * hd, H});
    t[p + "self_attn.v_proj.weight"] = make({nkv * hd, H});
    t[p + "self_attn.o_proj.weight"] = make({H, nh * hd});
    t[p + "mlp.gate_proj.weight"] = make({I, H});
    t[p + "mlp.up_proj.weight"] = make({I, H});
    t[p + "mlp.down_proj.weight"] = make({H, I});
  }
  return t;
}

}  // namespace lmx::testing
