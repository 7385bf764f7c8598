#include "engine/backend/cuda/device_weights.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "engine/backend/cuda/random_fill.h"
#include "engine/core/error.h"
#include "engine/model/quantization.h"
#include "kernels/elementwise.h"
#include "kernels/fp8_linear.h"
#include "kernels/linear.h"
#include "kernels/quantize.h"
#include "kernels/row_dots.h"
#include "kernels/w8a8.h"
#include "quant/w8a8.h"

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
    const bool fold = load.fold_norms && input_norm && !input_norm->weight.empty();
    if (fold && load.layer_norms) fold_norm_bias(L, input_norm->bias, label);
    if (fold)
      k::scale_columns<T>(L.weight.get(), input_norm->weight.get(), int(L.out), int(L.in), nullptr);
    if (L.quant.smooth && !L.quant.quantized())
      throw_error("{}: smoothing without quantization is a CPU reference test only", label);
    if (L.quant.quantized()) {
      quantize(L, L.weight.get(), label);
      const size_t freed = L.weight.bytes();
      L.weight = DeviceBuffer<T>();
      count(0, freed);
    }
    if (fold && load.layer_norms) keep_row_sums(L);
  }

  // A LayerNorm's bias beta into the projection's: b + W beta (fp32, rounded once to T; a bias is
  // made where the projection had none). Before W's columns are scaled by the norm's weight.
  void fold_norm_bias(DeviceLinear<T>& L, const DeviceBuffer<T>& beta, const std::string& label) {
    if (beta.empty()) return;  // a LayerNorm without bias
    if (int64_t(beta.size()) != L.in)
      throw_error("{}: a norm bias of {} for {} input columns", label, beta.size(), L.in);
    DeviceBuffer<float> product(size_t(L.out));
    k::row_dots<T>(linear_view(L), beta.get(), product.get(), nullptr);
    std::vector<float> sum(size_t(L.out));
    LMX_CUDA_CHECK(cudaMemcpy(sum.data(), product.get(), product.bytes(), cudaMemcpyDeviceToHost));
    const bool had_bias = L.has_bias();
    std::vector<T> bias(size_t(L.out));
    if (had_bias)
      LMX_CUDA_CHECK(cudaMemcpy(bias.data(), L.bias.get(), L.bias.bytes(), cudaMemcpyDeviceToHost));
    for (size_t n = 0; n < bias.size(); ++n)
      bias[n] = T((had_bias ? float(bias[n]) : 0.0f) + sum[n]);
    if (!had_bias) {
      L.bias = DeviceBuffer<T>(size_t(L.out));
      count(L.bias.bytes());
    }
    LMX_CUDA_CHECK(cudaMemcpy(L.bias.get(), bias.data(), L.bias.bytes(), cudaMemcpyHostToDevice));
  }

  // The row sums of the folded weight as the kernels multiply it (NormFoldStorage).
  void keep_row_sums(DeviceLinear<T>& L) {
    L.norm_fold.row_sums = DeviceBuffer<float>(size_t(L.out));
    count(L.norm_fold.row_sums.bytes());
    k::row_dots<T>(linear_view(L), nullptr, L.norm_fold.row_sums.get(), nullptr);
    LMX_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    LMX_CUDA_CHECK(cudaGetLastError());
  }

  // L.q = dynamic_int8(weight [L.out, L.in]), W8A8's int8 of weight diag(s), or fp8's E4M3.
  void quantize(DeviceLinear<T>& L, const T* weight, const std::string& label) {
    DeviceBuffer<float> smooth;  // s [in], applied by the quantizer
    const bool fp8 = L.quant.kind == QuantKind::Fp8;
    if (L.quant.kind == QuantKind::W8A8) {
      if (L.in > quant::kW8A8MaxIn)
        throw_error("{}: {} input columns do not fit W8A8's int8 GEMM (at most {})", label, L.in,
                    quant::kW8A8MaxIn);
      if (L.quant.smooth) smooth = smoothing(L, label);
    } else if (!fp8 && L.quant.kind != QuantKind::W8A16PerChannel &&
               L.quant.kind != QuantKind::W8A16Grouped) {
      throw_error("{}: option.quantize={} has no CUDA kernels yet; use option.device=cpu", label,
                  L.quant.method());
    }
    // Grouped scales (dynamic_int8 with a group size; a block-scaled fp8 checkpoint's, by row):
    // the kernels take groups of a multiple of 64 input columns (gemm.h, byte_weight_gemm.h) in
    // 16-bit activations (fp32: grouped int8 is expanded for cuBLAS; block-scaled fp8 is
    // refused); the int8 quantizer takes each group as a row of its own.
    const int64_t group = L.quant.group_for(L.in);
    const bool grouped = group != L.in;
    if (grouped && !kernels::scale_groups_supported(int(group), int(L.in)))
      throw_error(
          "{}: option.quantize_group_size={} on {} input columns: on cuda the group size "
          "must be a multiple of {} that divides every projection's input size",
          label, group, L.in, kernels::kScaleGroupStep);
    if (grouped && fp8 && std::is_same_v<T, float>)
      throw_error(
          "{}: a block-scaled fp8 checkpoint runs on cuda in fp16 or bf16 (option.dtype): "
          "its kernels read the codes with 16-bit activations",
          label);
    if (grouped && fp8 && !L.quant.checkpoint_scales)
      throw_error("{}: internal: grouped fp8 scales come only from a checkpoint", label);
    // fp8: fp8_padded(out) rows of fp8_padded(in) codes (the FP8 GEMM's N and K), zero codes and
    // scales past `out` and `in`; W8A8: rows of w8a8_padded(in) codes (the int8 GEMM's K).
    const bool w8a8 = L.quant.kind == QuantKind::W8A8;
    const size_t rows = fp8 ? size_t(k::fp8_padded(int(L.out))) : size_t(L.out);
    const size_t row = fp8    ? size_t(k::fp8_padded(int(L.in)))
                       : w8a8 ? size_t(k::w8a8_padded(int(L.in)))
                              : size_t(L.in);
    L.q.values = DeviceBuffer<int8_t>(rows * row);
    L.q.scales = DeviceBuffer<float>(rows * size_t(L.in / group));
    count(L.q.values.bytes() + L.q.scales.bytes());
    if (fp8) {
      LMX_CUDA_CHECK(cudaMemset(L.q.values.get(), 0, L.q.values.bytes()));
      LMX_CUDA_CHECK(cudaMemset(L.q.scales.get(), 0, L.q.scales.bytes()));
      auto* codes = reinterpret_cast<uint8_t*>(L.q.values.get());
      if (const auto& given = L.quant.checkpoint_scales) {  // the checkpoint's codes, as stored
        // [out, in / group]: one a row, or a block-scaled checkpoint's by row and column group.
        if (int64_t(given->size()) != L.out * (L.in / group))
          throw_error("{}: {} fp8 scales for {} rows of {} column groups", label, given->size(),
                      L.out, L.in / group);
        k::encode_rows_e4m3<T>(weight, codes, int(L.out), int(L.in), int(row), nullptr);
        LMX_CUDA_CHECK(cudaMemcpy(L.q.scales.get(), given->data(), given->size() * sizeof(float),
                                  cudaMemcpyHostToDevice));
      } else {
        k::quantize_rows_e4m3<T>(weight, codes, L.q.scales.get(), int(L.out), int(L.in), int(row),
                                 nullptr);
      }
    } else if (grouped) {  // [out, in] as [out x in / group, group]: a scale a row of it
      k::quantize_rows_int8<T>(weight, nullptr, L.q.values.get(), L.q.scales.get(),
                               int(L.out * (L.in / group)), int(group), nullptr);
    } else {
      k::quantize_rows_int8<T>(weight, smooth.empty() ? nullptr : smooth.get(), L.q.values.get(),
                               L.q.scales.get(), int(L.out), int(L.in), int(row), nullptr);
    }
    LMX_CUDA_CHECK(cudaStreamSynchronize(nullptr));  // before the T weight is freed
    LMX_CUDA_CHECK(cudaGetLastError());
  }

  // s [in] on the device; with smoothing not folded into a norm, L.q.inv_smooth = 1/s as well
  // (the reciprocals computed as the CPU backend's are).
  DeviceBuffer<float> smoothing(DeviceLinear<T>& L, const std::string& label) {
    const std::vector<float>& s = *L.quant.smooth;
    if (int64_t(s.size()) != L.in)
      throw_error("{}: {} smoothing factors for {} input columns", label, s.size(), L.in);
    DeviceBuffer<float> d = upload_floats(s);
    if (!L.quant.smooth_in_norm) {
      std::vector<float> inv(s.size());
      for (size_t j = 0; j < s.size(); ++j) inv[j] = 1.0f / s[j];
      L.q.inv_smooth = upload_floats(inv);
      count(L.q.inv_smooth.bytes());
    }
    return d;
  }

  static DeviceBuffer<float> upload_floats(const std::vector<float>& v) {
    DeviceBuffer<float> d(v.size());
    LMX_CUDA_CHECK(cudaMemcpy(d.get(), v.data(), d.bytes(), cudaMemcpyHostToDevice));
    return d;
  }

  // smoothquant's 1/s into the norms that produce the smoothed inputs, in fp32 on the host (the
  // norms are [hidden]): weight and bias divided by s, rounded once to T.
  void fold_smoothing_into_norms(bool shared_block_norm) {
    const auto divide = [](DeviceBuffer<T>& b, const std::vector<float>& s) {
      if (b.empty()) return;
      std::vector<T> host(b.size());
      LMX_CUDA_CHECK(cudaMemcpy(host.data(), b.get(), b.bytes(), cudaMemcpyDeviceToHost));
      for (size_t j = 0; j < host.size(); ++j) host[j] = T(float(host[j]) / s[j]);
      LMX_CUDA_CHECK(cudaMemcpy(b.get(), host.data(), b.bytes(), cudaMemcpyHostToDevice));
    };
    for_each_smoothed_norm(w, shared_block_norm, [&](DeviceNorm<T>& n, const std::vector<float>& s) {
      if (n.weight.size() != s.size())
        throw_error("smoothquant: {} smoothing factors for a norm of {}", s.size(), n.weight.size());
      divide(n.weight, s);
      divide(n.bias, s);
    });
  }

  // A tied LM head that dynamic_int8 marks: int8 of the embedding, which stays in T for lookups.
  void tied_head() {
    if (w.lm_head_tied && w.lm_head.quant.quantized())
      quantize(w.lm_head, w.embed.get(), "lm_head (tied to the embedding)");
  }
};

// A weight to the GPU in chunks of rows through one bounded host buffer: as stored when the
// checkpoint holds T (a copy), else converted through fp32 and rounded to T on the host. A rank's
// host memory for its weights is this buffer, whatever the model's size.
template <typename T>
class ChunkedUpload {
 public:
  void operator()(const WeightRef& ref, T* dst) {
    const int64_t rows = ref.shape[0], cols = ref.shape.size() == 2 ? ref.shape[1] : 1;
    const int64_t chunk = std::max<int64_t>(1, kChunkBytes / (cols * int64_t(sizeof(float))));
    for (int64_t begin = 0; begin < rows; begin += chunk) {
      const int64_t end = std::min(rows, begin + chunk);
      const size_t n = size_t(end - begin) * size_t(cols);
      host_.resize(n);
      if (!copy_rows_as_stored(ref, stored_dtype(), begin, end,
                               reinterpret_cast<std::byte*>(host_.data()))) {
        f32_.resize(n);
        materialize_rows_f32(ref, begin, end, f32_.data());
        std::copy(f32_.begin(), f32_.end(), host_.begin());  // round to T on the host
      }
      LMX_CUDA_CHECK(cudaMemcpy(dst + size_t(begin) * size_t(cols), host_.data(), n * sizeof(T),
                                cudaMemcpyHostToDevice));
    }
  }

 private:
  static constexpr int64_t kChunkBytes = 32ll << 20;  // of fp32: 8 Mi values a chunk
  static constexpr DType stored_dtype() {
    if constexpr (std::is_same_v<T, __half>) return DType::F16;
    if constexpr (std::is_same_v<T, __nv_bfloat16>) return DType::BF16;
    return DType::F32;
  }
  std::vector<float> f32_;
  std::vector<T> host_;
};

}  // namespace

template <typename T>
DeviceWeights<T> upload_weights(const ModelWeightRefs& refs, const WeightLoad& load) {
  DeviceWeights<T> w;
  Finisher<T> finish{load, w};
  ChunkedUpload<T> upload;
  static_cast<ModelWeights<DeviceBuffer<T>>&>(w) = map_weights<DeviceBuffer<T>>(
      refs,
      [&](const WeightRef& ref, WeightKind) {
        if (!ref.present()) return DeviceBuffer<T>();
        DeviceBuffer<T> buf(size_t(ref.numel()));
        upload(ref, buf.get());
        finish.count(buf.bytes());
        return buf;
      },
      finish);
  finish.tied_head();
  finish.fold_smoothing_into_norms(load.shared_block_norm);
  w.norms_folded = load.fold_norms;
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
  finish.fold_smoothing_into_norms(load.shared_block_norm);
  w.norms_folded = load.fold_norms;
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
