#include "engine/model/kv_scales.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/model/model.h"

namespace lmx {
namespace {

// The layer's attention module prefix: o_weight's pattern less its last two dotted parts
// ("model.layers.{}.self_attn.o_proj.weight" -> "model.layers.{}.self_attn.").
std::string attention_prefix(const TensorNames& names, int layer) {
  const std::string o = fmt::format(fmt::runtime(names.o_weight), layer);
  const size_t last = o.rfind('.');
  const size_t module =
      last == std::string::npos || last == 0 ? std::string::npos : o.rfind('.', last - 1);
  if (module == std::string::npos)
    throw_error("cannot tell the attention module of layer {} from its output projection '{}'",
                layer, o);
  return o.substr(0, module + 1);
}

class ScaleReader {
 public:
  ScaleReader(const Checkpoint& ckpt, const TensorNames& names) : ckpt_(ckpt), names_(names) {}

  const TensorView* find(const std::string& name) const {
    if (const TensorView* t = ckpt_.find(name)) return t;
    const std::string& prefix = names_.optional_prefix;
    if (!prefix.empty() && name.starts_with(prefix)) return ckpt_.find(name.substr(prefix.size()));
    return nullptr;
  }

  // The one positive finite number `t` holds.
  float value(const TensorView& t) const {
    if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16)
      throw_error("KV cache scale '{}' in {} has dtype {}, expected F32, F16 or BF16", t.name,
                  ckpt_.dir().string(), dtype_name(t.dtype));
    if (t.numel() != 1 || t.shape.size() > 2)
      throw_error(
          "KV cache scale '{}' in {} has shape {}, expected one number ([], [1] or [1, 1]): "
          "per-layer scales only",
          t.name, ckpt_.dir().string(), shape_str(t.shape));
    float v = 0.0f;
    convert_to_f32(t.dtype, t.data.data(), 1, &v);
    check_kv_scale(v, fmt::format("KV cache scale '{}' in {}", t.name, ckpt_.dir().string()));
    return v;
  }

  // Layer l's scales, or nullopt when it has none.
  std::optional<kernels::KvScale> layer(int l) const {
    const std::string a = attention_prefix(names_, l);
    const std::pair<std::string, std::string> pairs[] = {
        {a + "k_scale", a + "v_scale"},
        {a + "k_proj.k_scale", a + "v_proj.v_scale"},
        {a + "k_proj.output_scale", a + "v_proj.output_scale"}};
    for (const auto& [kname, vname] : pairs) {
      const TensorView* k = find(kname);
      const TensorView* v = find(vname);
      if (!k && !v) continue;
      if (!k || !v)
        throw_error("the checkpoint at {} has '{}' but not '{}': K and V scales come in pairs",
                    ckpt_.dir().string(), k ? kname : vname, k ? vname : kname);
      return kernels::KvScale{value(*k), value(*v)};
    }
    if (const TensorView* kv = find(a + "kv_scale")) {
      const float s = value(*kv);
      return kernels::KvScale{s, s};
    }
    return std::nullopt;
  }

 private:
  const Checkpoint& ckpt_;
  const TensorNames& names_;
};

}  // namespace

void check_kv_scale(double scale, const std::string& what) {
  if (!(scale > 0.0) || !std::isfinite(scale) || !std::isfinite(float(scale)) ||
      float(scale) <= 0.0f)
    throw_error("{} is {}: a KV cache scale must be a positive finite fp32 number", what, scale);
}

std::optional<std::vector<kernels::KvScale>> read_checkpoint_kv_scales(const Checkpoint& checkpoint,
                                                                       const DecoderDesc& desc,
                                                                       const TensorNames& names) {
  const ScaleReader reader(checkpoint, names);
  std::vector<kernels::KvScale> scales;
  int missing = -1;  // a layer without scales
  for (int l = 0; l < desc.num_layers; ++l) {
    if (const auto s = reader.layer(l))
      scales.push_back(*s);
    else if (missing < 0)
      missing = l;
  }
  if (scales.empty()) return std::nullopt;
  if (missing >= 0)
    throw_error(
        "the checkpoint at {} has KV cache scales for {} of {} layers; layer {} has none "
        "(expected '{}k_scale' and '{}v_scale')",
        checkpoint.dir().string(), scales.size(), desc.num_layers, missing,
        attention_prefix(names, missing), attention_prefix(names, missing));
  return scales;
}

std::vector<kernels::KvScale> layer_kv_scales(const LoadedModel& model, kernels::KvDtype dtype) {
  const size_t layers = size_t(model.desc.num_layers);
  if (dtype != kernels::KvDtype::fp8_e4m3 || model.kv_scales.empty())
    return std::vector<kernels::KvScale>(layers);
  if (model.kv_scales.size() != layers)
    throw_error("{} KV cache scales for a model of {} layers", model.kv_scales.size(), layers);
  return model.kv_scales;
}

std::string describe_kv_scales(const std::vector<kernels::KvScale>& scales) {
  if (scales.empty()) return "none";
  auto range = [&](float kernels::KvScale::*field) {
    const auto [lo, hi] = std::minmax_element(
        scales.begin(), scales.end(),
        [&](const kernels::KvScale& a, const kernels::KvScale& b) { return a.*field < b.*field; });
    return (*lo).*field == (*hi).*field ? fmt::format("{:g}", (*lo).*field)
                                        : fmt::format("{:g}..{:g}", (*lo).*field, (*hi).*field);
  };
  return fmt::format("k {}, v {} over {} layers", range(&kernels::KvScale::k),
                     range(&kernels::KvScale::v), scales.size());
}

}  // namespace lmx
