// The weight set of a decoder, written once: the model's description holds WeightRefs
// (ModelWeightRefs, engine/model/weight_map.h), each backend holds the same structure over its
// own buffers and builds it with map_weights. Adding a weight means adding it here only.
#pragma once

#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/model/linear.h"

namespace lmx {

template <typename Buffer>
struct LayerWeights {
  Norm<Buffer> attn_norm;  // [hidden]; the layer's only norm when DecoderDesc::shared_block_norm
  Linear<Buffer> qkv;      // [q_size + 2 kv_size, hidden]: q rows, then k, then v
  Linear<Buffer> o;        // [hidden, q_size]
  Norm<Buffer> mlp_norm;   // [hidden], absent when shared_block_norm
  Linear<Buffer> up;       // gated: [2 * inter, hidden] (gate rows, then up rows); plain: [inter, hidden]
  Linear<Buffer> down;     // [hidden, inter]
};

template <typename Buffer>
struct ModelWeights {
  Buffer embed;             // [vocab, embed_dim]
  Buffer position_embed;    // [max_positions + position_offset, hidden], learned positions only
  Norm<Buffer> embed_norm;  // [hidden], DecoderDesc::embedding_norm
  Linear<Buffer> project_in;   // [hidden, embed_dim], when DecoderDesc::projects_embeddings()
  std::vector<LayerWeights<Buffer>> layers;
  Norm<Buffer> final_norm;     // [hidden], DecoderDesc::final_norm
  Linear<Buffer> project_out;  // [embed_dim, hidden], when DecoderDesc::projects_embeddings()
  // [vocab, embed_dim] (+ bias [vocab]); when tied its weight is left empty and `embed` serves.
  Linear<Buffer> lm_head;
  bool lm_head_tied = false;

  const Buffer& head_weight() const { return lm_head_tied ? embed : lm_head.weight; }
};

// What a weight is, for makers that treat kinds differently (random weights: norms around 1).
enum class WeightKind { Matrix, NormWeight, Bias };

// How messages name a projection: "project_in", "layer 3 qkv", "lm_head".
inline std::string linear_label(size_t layer, const char* role) {
  return "layer " + std::to_string(layer) + " " + role;
}

// map_weights' default finish: nothing.
struct KeepLinear {
  template <typename L, typename N>
  void operator()(L&, const std::string&, const N*) const {}
};

// Builds the same structure over other buffers: make(const From&, WeightKind) -> To is called
// once per weight in a fixed order (embedding first, layers in order, LM head last), also for
// absent ones (make returns an empty To for an empty From). finish(Linear<To>&, label) runs on
// each projection as soon as it is made (present or not), before the next weight is made: a
// backend quantizes there, so at most one projection is held in full precision at a time
// (a tied LM head's weight is empty there: it is the embedding). finish's third argument is the
// norm whose output the projection reads, already made: the layer's attn_norm for qkv, its
// mlp_norm for gate/up (attn_norm when the layer has one norm); null for the others.
template <typename To, typename From, typename Make, typename Finish = KeepLinear>
ModelWeights<To> map_weights(const ModelWeights<From>& w, Make&& make, Finish&& finish = {}) {
  const auto norm = [&](const Norm<From>& n) {
    return Norm<To>{make(n.weight, WeightKind::NormWeight), make(n.bias, WeightKind::Bias)};
  };
  const auto linear = [&](const Linear<From>& l, const std::string& label,
                          const Norm<To>* input_norm) {
    if constexpr (!kHoldsQuantized<To>) {
      if (l.quant.quantized())
        throw_error("{}: a quantized projection ([{}, {}], option.quantize={}) cannot be held by "
                    "this backend yet: int8 weights run on the CPU backend only until the CUDA "
                    "kernels land",
                    label, l.out, l.in, l.quant.method());
    }
    Linear<To> out;
    out.weight = make(l.weight, WeightKind::Matrix);
    out.bias = make(l.bias, WeightKind::Bias);
    out.out = l.out;
    out.in = l.in;
    out.shard = l.shard;
    out.quant = l.quant;
    finish(out, label, input_norm);
    return out;
  };
  ModelWeights<To> m;
  m.embed = make(w.embed, WeightKind::Matrix);
  m.position_embed = make(w.position_embed, WeightKind::Matrix);
  m.embed_norm = norm(w.embed_norm);
  m.project_in = linear(w.project_in, "project_in", nullptr);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights<From>& l = w.layers[i];
    LayerWeights<To>& layer = m.layers.emplace_back();
    layer.attn_norm = norm(l.attn_norm);
    layer.qkv = linear(l.qkv, linear_label(i, "qkv"), &layer.attn_norm);
    layer.o = linear(l.o, linear_label(i, "o"), nullptr);
    layer.mlp_norm = norm(l.mlp_norm);
    layer.up = linear(l.up, linear_label(i, "up"),
                      l.mlp_norm.weight.empty() ? &layer.attn_norm : &layer.mlp_norm);
    layer.down = linear(l.down, linear_label(i, "down"), nullptr);
  }
  m.final_norm = norm(w.final_norm);
  m.project_out = linear(w.project_out, "project_out", nullptr);
  m.lm_head = linear(w.lm_head, "lm_head", nullptr);
  m.lm_head_tied = w.lm_head_tied;
  return m;
}

}  // namespace lmx
