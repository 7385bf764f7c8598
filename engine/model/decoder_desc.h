// The engine's description of a decoder-only transformer. Every architecture family fills this
// from its config.json (see engine/model/architectures/); the backends run any DecoderDesc, so a
// new family is a small mapping file, not a new forward pass.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lmx {

enum class NormKind { RmsNorm, LayerNorm };
enum class PositionKind { Rotary, LearnedAbsolute };
enum class MlpKind {
  Gated,  // down(act(gate(x)) * up(x))   (Llama, Mistral, Qwen2)
  Plain,  // down(act(up(x)))             (GPT-2)
};
enum class Activation { Silu, GeluTanh, GeluExact, Relu };
enum class RopeScalingKind { None, Linear, Llama3 };

struct RopeDesc {
  float theta = 10000.0f;
  int rotary_dim = 0;  // leading dims of each head that rotate (partial rotary when < head_dim)
  RopeScalingKind scaling = RopeScalingKind::None;
  float factor = 1.0f;            // linear and llama3
  float low_freq_factor = 1.0f;   // llama3
  float high_freq_factor = 4.0f;  // llama3
  int original_max_position = 8192;  // llama3
};

struct DecoderDesc {
  std::string architecture;  // HF class name, e.g. "LlamaForCausalLM"
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;  // == num_heads: MHA; 1: MQA; otherwise GQA
  int head_dim = 0;
  int intermediate_size = 0;
  int max_position_embeddings = 0;

  NormKind norm = NormKind::RmsNorm;
  float norm_eps = 1e-6f;
  PositionKind positions = PositionKind::Rotary;
  RopeDesc rope;
  MlpKind mlp = MlpKind::Gated;
  Activation activation = Activation::Silu;

  bool qkv_bias = false;
  bool o_bias = false;
  bool mlp_bias = false;  // up/gate and down projections
  bool tie_word_embeddings = false;
  // Per layer: 0 = full causal attention, W > 0 = a query at position i sees keys j with i - j < W.
  std::vector<int> sliding_window;

  std::optional<int> bos_token_id;
  std::vector<int> eos_token_ids;

  int q_size() const { return num_heads * head_dim; }      // rows of the q projection
  int kv_size() const { return num_kv_heads * head_dim; }  // rows of each of k and v
  int qkv_size() const { return q_size() + 2 * kv_size(); }
  float attention_scale() const;  // head_dim^-0.5
};

}  // namespace lmx
