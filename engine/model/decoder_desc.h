// The engine's description of a decoder-only transformer. Every architecture family fills this
// from its config.json (see engine/model/architectures/); each backend interprets it once (its
// layer program), so a new family is a small mapping file, not a new forward pass. The layer
// program and its variants are written down in docs/model-layer.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lmx {

enum class NormKind { RmsNorm, LayerNorm };
enum class PositionKind {
  Rotary,           // rotary on q and k (RopeDesc)
  LearnedAbsolute,  // a learned table added to the token embedding (row = position + offset)
  Alibi,            // a per-head linear bias on the attention scores (Bloom)
};
enum class MlpKind {
  Gated,  // down(act(gate(x)) * up(x))   (Llama, Mistral, Qwen2)
  Plain,  // down(act(up(x)))             (GPT-2, GPT-J, GPT-NeoX, GPT-Neo, OPT, Bloom)
};
enum class Activation { Silu, GeluTanh, GeluExact, Relu };
enum class RopeScalingKind { None, Linear, Llama3 };

// Where a layer's norms sit relative to its two blocks (attention, MLP) and the residual stream x.
//   Pre:  h = norm(x); x = x + block(h)              (Llama, GPT-2, ...; a final norm follows)
//   Post: x = norm(x + block(x))                     (OPT with do_layer_norm_before=false)
enum class NormPlacement { Pre, Post };

struct RopeDesc {
  float theta = 10000.0f;
  int rotary_dim = 0;  // leading dims of each head that rotate (partial rotary when < head_dim)
  // GPT-J pairs dims (2i, 2i + 1) ("rotate every two") where the engine pairs (i, i + r/2)
  // ("rotate half"). The loader permutes the q and k rows of such checkpoints once, which turns
  // one into the other (q.k is unchanged by a permutation applied to both), so kernels see one
  // convention.
  bool interleaved = false;
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
  // Width of the token embedding and of the LM head's input. OPT's word_embed_proj_dim may
  // differ from hidden_size; a project_in / project_out pair then maps between them.
  int embed_dim = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;  // == num_heads: MHA; 1: MQA; otherwise GQA
  int head_dim = 0;
  int intermediate_size = 0;
  int max_position_embeddings = 0;

  NormKind norm = NormKind::RmsNorm;
  float norm_eps = 1e-6f;
  NormPlacement norm_placement = NormPlacement::Pre;
  // Pre-norm only. Parallel: x = x + attn(norm1(x)) + mlp(norm2(x)) (GPT-NeoX
  // use_parallel_residual); with shared_block_norm the MLP reads norm1's output too and the layer
  // has one norm (GPT-J).
  bool parallel_residual = false;
  bool shared_block_norm = false;
  // Pre-norm, sequential: each block's residual is its norm's output instead of x,
  // x = norm(x) + block(norm(x)) (Bloom's apply_residual_connection_post_layernorm).
  bool residual_from_norm = false;
  bool embedding_norm = false;  // a norm right after the token embedding (Bloom)
  bool final_norm = true;       // a norm before the LM head (OPT post-norm has none)

  PositionKind positions = PositionKind::Rotary;
  int position_offset = 0;  // learned positions: table row of position p is p + offset (OPT: 2)
  RopeDesc rope;
  MlpKind mlp = MlpKind::Gated;
  Activation activation = Activation::Silu;

  bool qkv_bias = false;
  bool o_bias = false;
  bool mlp_bias = false;  // up/gate and down projections
  bool lm_head_bias = false;  // GPT-J
  bool tie_word_embeddings = false;
  bool scale_attention = true;  // scores scaled by head_dim^-0.5; GPT-Neo does not scale
  // Per layer: 0 = full causal attention, W > 0 = a query at position i sees keys j with i - j < W.
  std::vector<int> sliding_window;

  std::optional<int> bos_token_id;
  std::vector<int> eos_token_ids;

  int q_size() const { return num_heads * head_dim; }      // rows of the q projection
  int kv_size() const { return num_kv_heads * head_dim; }  // rows of each of k and v
  int qkv_size() const { return q_size() + 2 * kv_size(); }
  int up_rows() const { return mlp == MlpKind::Gated ? 2 * intermediate_size : intermediate_size; }
  bool projects_embeddings() const { return embed_dim != hidden_size; }
  // Whether the layer has a second norm (before the MLP, or after it when post-norm).
  bool has_mlp_norm() const { return !shared_block_norm; }
  float attention_scale() const;  // head_dim^-0.5, or 1 without scaling
};

}  // namespace lmx
