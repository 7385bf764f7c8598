#include "engine/backend/cuda/device_weights.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "engine/backend/cuda/random_fill.h"
#include "engine/core/error.h"
#include "kernels/elementwise.h"
#include "kernels/quantize.h"

namespace lmx {
namespace {

namespace k = kernels::cuda;

// The finishing of each projection (device_weights.h), with the bytes held counted.
template <typename T>
struct Finisher {
  const WeightLoad& load;
  DeviceWeights<T>& w;

  void count(size_t add, size_t drop = 0) {
    w.bytes += add;
    w.peak_bytes = std::max(w.peak_bytes, w.bytes);
    w.bytes -= drop;
  }

  void operator()(DeviceLinear<T>& L, const std::string& label, const DeviceNorm<T>* input_norm) {
    if (L.weight.empty()) return;  // absent, or a tied LM head (quantized in tied_head)
    if (load.fold_norms && input_norm && !input_norm->weight.empty())
      k::scale_columns<T>(L.weight.get(), input_norm->weight.get(), int(L.out), int(L.in), nullptr);
    if (!L.quant.quantized()) return;
    quantize(L, L.weight.get(), label);
    const size_t freed = L.weight.bytes();
    L.weight = DeviceBuffer<T>();
    count(0, freed);
  }

  // L.q = dynamic_int8(weight [L.out, L.in]).
  void quantize(DeviceLinear<T>& L, const T* weight, const std::string& label) {
    if (L.quant.kind != QuantKind::W8A16PerChannel)
      throw_error("{}: option.quantize={}{} has no CUDA kernels yet; on cuda dynamic_int8 is per "
                  "output channel (leave option.quantize_group_size unset), or use option.device=cpu",
                  label, L.quant.method(),
                  L.quant.kind == QuantKind::W8A16Grouped
                      ? " with option.quantize_group_size=" + std::to_string(L.quant.group)
                      : std::string());
    L.q.values = DeviceBuffer<int8_t>(size_t(L.out) * size_t(L.in));
    L.q.scales = DeviceBuffer<float>(size_t(L.out));
    count(L.q.values.bytes() + L.q.scales.bytes());
    k::quantize_rows_int8<T>(weight, L.q.values.get(), L.q.scales.get(), int(L.out), int(L.in),
                             nullptr);
    LMX_CUDA_CHECK(cudaStreamSynchronize(nullptr));  // before the T weight is freed
    LMX_CUDA_CHECK(cudaGetLastError());
  }

  // A tied LM head that dynamic_int8 marks: int8 of the embedding, which stays in T for lookups.
  void tied_head() {
    if (w.lm_head_tied && w.lm_head.quant.quantized())
      quantize(w.lm_head, w.embed.get(), "lm_head (tied to the embedding)");
  }
};

}  // namespace

template <typename T>
DeviceWeights<T> upload_weights(const ModelWeightRefs& refs, const WeightLoad& load) {
  DeviceWeights<T> w;
  Finisher<T> finish{load, w};
  std::vector<float> f32;
  std::vector<T> host;
  static_cast<ModelWeights<DeviceBuffer<T>>&>(w) = map_weights<DeviceBuffer<T>>(
      refs,
      [&](const WeightRef& ref, WeightKind) {
        if (!ref.present()) return DeviceBuffer<T>();
        f32.resize(size_t(ref.numel()));
        materialize_f32(ref, f32.data());
        host.assign(f32.begin(), f32.end());  // round to T on the host
        DeviceBuffer<T> buf(host.size());
        LMX_CUDA_CHECK(cudaMemcpy(buf.get(), host.data(), buf.bytes(), cudaMemcpyHostToDevice));
        finish.count(buf.bytes());
        return buf;
      },
      finish);
  finish.tied_head();
  LMX_CUDA_CHECK(cudaDeviceSynchronize());  // the folds, before the backend's own stream reads
  return w;
}

template <typename T>
DeviceWeights<T> random_weights(const ModelWeightRefs& refs, uint64_t seed, const WeightLoad& load,
                                float std) {
  DeviceWeights<T> w;
  Finisher<T> finish{load, w};
  uint64_t stream = seed;
  static_cast<ModelWeights<DeviceBuffer<T>>&>(w) = map_weights<DeviceBuffer<T>>(
      refs,
      [&](const WeightRef& ref, WeightKind kind) {
        if (!ref.present()) return DeviceBuffer<T>();
        DeviceBuffer<T> buf(size_t(ref.numel()));
        cuda_init::fill_random<T>(buf.get(), buf.size(), ++stream,
                                  kind == WeightKind::NormWeight ? 1.0f : 0.0f, std);
        LMX_CUDA_CHECK(cudaGetLastError());
        finish.count(buf.bytes());
        return buf;
      },
      finish);
  finish.tied_head();
  LMX_CUDA_CHECK(cudaDeviceSynchronize());
  return w;
}

#define LMX_INSTANTIATE(T)                                                                  \
  template DeviceWeights<T> upload_weights<T>(const ModelWeightRefs&, const WeightLoad&);   \
  template DeviceWeights<T> random_weights<T>(const ModelWeightRefs&, uint64_t,             \
                                              const WeightLoad&, float);
LMX_INSTANTIATE(float)
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx
