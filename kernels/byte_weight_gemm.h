// W8A16 GEMM on tensor cores for one-byte weights with 16-bit activations:
//   y [M, N] = x [M, K] · dequant(w)^T,  dequant(w)[n, k] = value(w.q[n, k]) * w.q_scale[n]
// (or, with grouped scales, * w.q_scale[n, k / w.group]: each group's products are summed in
// fp32, scaled, and added)
// w: LinearWeights::quantized(): dynamic_int8's int8 values or fp8's E4M3 codes [N = w.out,
// K = w.in], one fp32 scale an output row; T = __half or __nv_bfloat16; Out = T or float (the LM
// head's logits). The bytes go from memory to shared memory as bytes and are widened to T in
// registers on their way into the tensor cores (exact, kernels/cuda/byte_weights.cuh): no T copy
// of the weights exists in memory, and the weight stream is half of fp16's. fp32 accumulation;
// the row scale multiplies the fp32 sum once, then one rounding to Out. No bias (the fused
// elementwise ops add it; a view with one is refused).
//
// For the rows the decode GEMV does not take (kernels/gemm.h: skinny_linear, up to 8): decode
// batches and prefill. Few tiles (small M, small N) split K over several blocks (sums through an
// fp32 workspace, the last block of a tile adds them in a fixed order, so results do not depend
// on timing) so that the weight stream covers the GPU. Two kernels: mma.sync
// (kernels/cuda/byte_weight_mma.cu, every GPU, grouped scales, up to 64 x rows a tile) and, on
// Hopper from 24 x rows, wgmma (kernels/cuda/byte_weight_wgmma.cu: TMA copies, each weight
// widened once a block for 64 or 128 x rows instead of once a warp and 8 x rows).
//
// One object per stream (its workspace is reused call after call, in stream order). run
// allocates nothing and never synchronizes: graph-capturable. Needs K % 16 == 0, 16-byte aligned
// x and w.q (cudaMalloc's rows of K % 16 == 0 bytes are).
#pragma once

#include <cstddef>

#include "kernels/linear.h"
#include "kernels/stream.h"

namespace lmx::kernels::cuda {

class ByteWeightGemm {
 public:
  struct Options {
    // The split-K workspace (fp32 partial sums; a call whose splits would not fit takes fewer).
    // Few tiles split K until the grid has `blocks_per_sm` blocks an SM (of the blocks an SM
    // holds). One measured fastest (H100, Llama-2-7B shapes at 32 and 128 rows: more splits add
    // the fix-up's reads and its serial tail; bench/RESULTS.md).
    size_t workspace_bytes = 16u << 20;
    int blocks_per_sm = 1;
    // Blocks a tile's K is split over, for benchmarks and tests: 0, as planned; 1 (never) to 8,
    // that many (fewer where K has fewer stages or the workspace is too small; plan() says).
    int splits = 0;
    // mma.sync kernel: x rows a tile, the smallest of 8, 16, 32 and 64 that holds M, at most
    // `max_tile_rows` (more rows take several tiles).
    int max_tile_rows = 64;
    // From this many x rows on, on a Hopper GPU and for scales one a row, the wgmma kernel
    // (kernels/cuda/byte_weight_wgmma.cu; one block an SM; few tiles split K:
    // byte_weight_gemm.cu); a value past any M keeps the mma.sync kernel. 24: its 64-row tile,
    // mostly zeros, streams the weights faster than mma.sync's 32-row one from 24 rows, not at
    // 9-16 (H100, Llama-2-7B shapes, bench/RESULTS.md).
    int wgmma_min_rows = 24;
    // The wgmma kernel's tile, x rows by weight rows (64 x 128 or 128 x 128), for benchmarks and
    // tests; 0 x 0: chosen by M. Off Hopper the plan stays mma.sync (plan().wgmma says which
    // ran).
    int wgmma_rows_m = 0, wgmma_rows_n = 0;
    // Each block walks its share of K from its own stage (byte_weight_gemm.cuh, rotation_start),
    // so that blocks running together do not all read the same k of the shared x rows at once.
    bool rotate_k = true;
  };
  // Allocates the workspace on the current device.
  ByteWeightGemm() : ByteWeightGemm(Options{}) {}
  explicit ByteWeightGemm(const Options& options);
  ~ByteWeightGemm();
  ByteWeightGemm(const ByteWeightGemm&) = delete;
  ByteWeightGemm& operator=(const ByteWeightGemm&) = delete;

  // Grouped scales (w.grouped()) besides: as kernels/linear.h's scale_groups_supported allows.
  static bool supported(int K) { return K > 0 && K % 16 == 0; }

  template <typename T, typename Out>
  void run(const T* x, const LinearWeights<T>& w, Out* y, int M, cudaStream_t stream);

  // How a call of this shape runs (run launches it; tests and benchmarks print it): the kernel,
  // x rows and weight rows a tile, tiles along M and N, and the blocks a tile (K split in runs of
  // stages_per_split stages).
  struct Plan {
    bool wgmma = false;
    int rows_per_tile = 0, weight_rows_per_tile = 0;
    int tiles_m = 0, tiles_n = 0, splits = 1, stages_per_split = 0;
    int tiles() const { return tiles_m * tiles_n; }
  };
  Plan plan(int M, int N, int K, bool grouped = false) const;

 private:
  Options options_;
  float* partials_ = nullptr;  // [splits][M][N] fp32
  int* counters_ = nullptr;    // [kMaxSplitTiles]: blocks of a tile done; 0 between calls
  size_t partial_floats_ = 0;
  int sms_ = 0;
  bool hopper_ = false;  // compute capability 9.x: the wgmma kernel runs
};

}  // namespace lmx::kernels::cuda
