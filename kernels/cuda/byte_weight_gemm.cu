// ByteWeightGemm (kernels/byte_weight_gemm.h): the plan of a call (which kernel, which tile, how
// many splits of K) and its launch. The kernels: byte_weight_mma.cu (mma.sync) and
// byte_weight_wgmma.cu (Hopper's wgmma); what they share: byte_weight_gemm.cuh.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/byte_weight_gemm.h"
#include "kernels/gpu_properties.h"
#include "kernels/cuda/byte_weight_gemm.cuh"
#include "kernels/cuda/kv_types.cuh"

namespace lmx::kernels::cuda {

ByteWeightGemm::ByteWeightGemm(const Options& options)
    : options_(options), partial_floats_(options.workspace_bytes / sizeof(float)) {
  options_.blocks_per_sm = std::max(1, options_.blocks_per_sm);
  if (options_.splits < 0 || options_.splits > byte_gemm::kMaxSplits)
    throw std::invalid_argument("byte-weight GEMM: splits must be 0 (planned) to " +
                                std::to_string(byte_gemm::kMaxSplits) + " (got " +
                                std::to_string(options_.splits) + ")");
  options_.max_tile_rows = std::max(1, options_.max_tile_rows);
  const byte_gemm::WgmmaShape forced{options_.wgmma_rows_m, options_.wgmma_rows_n};
  if ((forced.rows_m != 0 || forced.rows_n != 0) && !byte_gemm::wgmma_shape_exists(forced))
    throw std::invalid_argument(
        "byte-weight GEMM: no wgmma tile of " + std::to_string(forced.rows_m) + " x " +
        std::to_string(forced.rows_n) + " x rows by weight rows (64 x 128 or 128 x 128)");
  const GpuProperties& gpu = current_gpu();
  sms_ = gpu.sms;
  hopper_ = gpu.hopper();
  cudaError_t e = cudaSuccess;
  if (partial_floats_ > 0) e = cudaMalloc(&partials_, partial_floats_ * sizeof(float));
  if (e == cudaSuccess) e = cudaMalloc(&counters_, byte_gemm::kMaxSplitTiles * sizeof(int));
  if (e == cudaSuccess) e = cudaMemset(counters_, 0, byte_gemm::kMaxSplitTiles * sizeof(int));
  if (e != cudaSuccess) {
    cudaFree(partials_);
    cudaFree(counters_);
    throw std::runtime_error(std::string("byte-weight GEMM: workspace: ") + cudaGetErrorString(e));
  }
}

ByteWeightGemm::~ByteWeightGemm() {
  cudaFree(partials_);
  cudaFree(counters_);
}

namespace {

// Stages each split of K covers, at least: mma.sync 4 (of 64 or 128 k), wgmma 8 (of 128 k).
// Measured (H100, Llama-2-7B shapes, int8, bench/RESULTS.md, with add_splits' batched loads): o
// (32 stages) at 64 / 128 rows 24.9 / 31.5 us unsplit, 17.3 / 22.4 split 4 ways (8 stages each);
// down (86 stages) 57.0 / 73.0 unsplit, 29.5 / 36.8 split 4 ways, 38.7 / 52.3 split 8 ways (two
// waves of blocks); at 256 rows (64 tiles) split 2 ways o 31.2 -> 27.0, down 73.8 -> 49.5.
constexpr int kMinStagesPerSplit = 4;
constexpr int kWgmmaMinStagesPerSplit = 8;

// The wgmma kernel's tile for an M x N call, or 0 x 0 for the mma.sync kernel: on Hopper, from
// options.wgmma_min_rows rows, scales one a row; 64 x rows by 128 weight rows up to 64 rows, 128
// x 128 past them (a 128-row tile reads each weight once for twice the rows; its spare rows are
// zeros the TMA fills).
byte_gemm::WgmmaShape wgmma_shape(const ByteWeightGemm::Options& o, bool hopper, int M,
                                  bool grouped) {
  if (!hopper || grouped || M < o.wgmma_min_rows) return {};
  if (o.wgmma_rows_m != 0) return {o.wgmma_rows_m, o.wgmma_rows_n};
  return {M <= 64 ? 64 : 128, 128};
}

}  // namespace

ByteWeightGemm::Plan ByteWeightGemm::plan(int M, int N, int K, bool grouped) const {
  Plan p;
  int stages = 0;
  if (const auto shape = wgmma_shape(options_, hopper_, M, grouped); shape.rows_m != 0) {
    p.wgmma = true;
    p.rows_per_tile = shape.rows_m;
    p.weight_rows_per_tile = shape.rows_n;
    stages = (K + byte_gemm::kWgmmaStageK - 1) / byte_gemm::kWgmmaStageK;
  } else {
    const byte_gemm::MmaTile tile = byte_gemm::mma_tile(M, options_.max_tile_rows);
    p.rows_per_tile = tile.rows_m;
    p.weight_rows_per_tile = tile.rows_n;
    stages = (K + tile.stage_k - 1) / tile.stage_k;
  }
  p.tiles_m = (M + p.rows_per_tile - 1) / p.rows_per_tile;
  p.tiles_n = (N + p.weight_rows_per_tile - 1) / p.weight_rows_per_tile;
  // Few tiles split K until the grid has blocks_per_sm blocks an SM (wgmma: one); or
  // options.splits. Never more than the workspace holds, nor more tiles than it counts.
  int splits = 1;
  if (p.tiles() <= byte_gemm::kMaxSplitTiles) {
    if (options_.splits > 0) {
      splits = options_.splits;
    } else {
      const int blocks_per_sm = p.wgmma ? 1 : options_.blocks_per_sm;
      const int target = std::max(1, sms_) * blocks_per_sm;
      const int min_stages = p.wgmma ? kWgmmaMinStagesPerSplit : kMinStagesPerSplit;
      splits = std::min({target / std::max(1, p.tiles()), byte_gemm::kMaxSplits,
                         stages / min_stages});
    }
    while (splits > 1 && size_t(splits) * size_t(M) * size_t(N) > partial_floats_) --splits;
    splits = std::max(1, splits);
  }
  // No empty split: as many as the stages a split covers need.
  p.stages_per_split = (stages + splits - 1) / splits;
  p.splits = (stages + p.stages_per_split - 1) / p.stages_per_split;
  return p;
}

template <typename T, typename Out>
void ByteWeightGemm::run(const T* x, const LinearWeights<T>& w, Out* y, int M,
                         cudaStream_t stream) {
  if (!w.quantized())
    throw std::invalid_argument("byte-weight GEMM: the weights are in T, not bytes (run linear)");
  if (w.bias)
    throw std::invalid_argument(
        "byte-weight GEMM: adds no bias (pass w.without_bias() and add it in a fused op)");
  if (!supported(w.in) || !w.q_scale)
    throw std::invalid_argument(
        "byte-weight GEMM: needs K % 16 == 0 and scales (K = " + std::to_string(w.in) + ")");
  if (w.grouped() && !scale_groups_supported(w.group, w.in))
    throw std::invalid_argument("byte-weight GEMM: scales grouped by " + std::to_string(w.group) +
                                " of K = " + std::to_string(w.in) +
                                ": needs groups of a multiple of " +
                                std::to_string(kScaleGroupStep) + " that divide K");
  if (M <= 0 || w.out <= 0) return;
  const Plan p = plan(M, w.out, w.in, w.grouped());
  const byte_gemm::Args<T, Out> args{x,
                                     reinterpret_cast<const uint8_t*>(w.q),
                                     w.q_scale,
                                     y,
                                     M,
                                     w.out,
                                     w.in,
                                     w.grouped() ? w.group : 0,
                                     p.tiles_m,
                                     p.tiles_n,
                                     p.splits,
                                     p.stages_per_split,
                                     partials_,
                                     counters_,
                                     options_.rotate_k};
  if (p.wgmma) {
    const byte_gemm::WgmmaShape shape{p.rows_per_tile, p.weight_rows_per_tile};
    if (w.fp8()) return byte_gemm::launch_wgmma<T, KvFp8, Out>(args, shape, stream);
    return byte_gemm::launch_wgmma<T, int8_t, Out>(args, shape, stream);
  }
  if (w.fp8()) return byte_gemm::launch_mma<T, KvFp8, Out>(args, options_.max_tile_rows, stream);
  byte_gemm::launch_mma<T, int8_t, Out>(args, options_.max_tile_rows, stream);
}

#define LMX_INSTANTIATE(T)                                                                    \
  template void ByteWeightGemm::run<T, T>(const T*, const LinearWeights<T>&, T*, int,         \
                                          cudaStream_t);                                      \
  template void ByteWeightGemm::run<T, float>(const T*, const LinearWeights<T>&, float*, int, \
                                              cudaStream_t);
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
