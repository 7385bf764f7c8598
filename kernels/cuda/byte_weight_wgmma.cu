// W8A16 GEMM on Hopper's TMA and warpgroup tensor cores (kernels/byte_weight_gemm.h, from 64 x
// rows):
//   y [M, N] = x [M, K] · dequant(w)^T, one-byte weights (int8 or E4M3, a scale a row), T x.
//
// The weights are wgmma's A operand, from registers; x is its B operand, from shared memory
// (y^T = W · x^T, as in the mma.sync kernel and the decode GEMV): a weight byte goes from memory
// to shared memory to a register once, is widened there (exact, byte_weights.cuh) and multiplies
// every x row of the tile. Nothing widened is written back to shared memory.
//
// A block computes a [kRowsN = 128 weight rows x kRowsM x rows] tile of y over its split's share
// of K, in stages of 128 k, with two roles:
// - one producer thread (the last warp) keeps a ring of kStages slots filled through the TMA
//   (tma.cuh): a stage's 128 weight rows (128 bytes each) and its x rows (two boxes of 64 T)
//   land 128-byte swizzled; zeros past M, N and K;
// - two consumer warpgroups, each 64 of the weight rows: for each stage a thread reads its bytes
//   of A's fragments (rows g and g + 8 of its warp's 16, k 2t, 2t + 1, 2t + 8, 2t + 9 of each
//   16: one 4-byte load of int8 rows, stored in that order, kernels/int8_layout.h; two and a
//   byte permute of E4M3 rows), widens them into registers, and
//   issues 8 wgmma of k 16 (64 weight rows x kRowsM x rows, fp32 sums). A stage's fragments are
//   widened while the stage before is multiplied (two register sets); a slot goes back to the
//   producer once both warpgroups' products of it are done.
// The end of a tile: unsplit, the row scales multiply the sums in registers and
// byte_weight_gemm.cuh stores them; split, byte_weight_gemm.cuh's (the sums through the
// workspace, scaled once added).
// Not taken here: grouped scales (the wgmma sums run over the whole K; the mma.sync kernel
// scales each 64-k group's sums).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cuda/byte_weight_gemm.cuh"
#include "kernels/cuda/byte_weights.cuh"
#include "kernels/cuda/kv_types.cuh"
#include "kernels/cuda/tma.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace lmx::kernels::cuda::byte_gemm {
namespace {

constexpr int kRowsN = 128;                // weight rows a tile: two warpgroups of wgmma's 64
constexpr int kConsumers = 256;            // threads of the two consumer warpgroups
constexpr int kThreads = kConsumers + 32;  // and the producer's warp
constexpr int kSteps = kWgmmaStageK / 16;  // wgmma k-steps a stage
constexpr int kWBytes = kRowsN * kWgmmaStageK;  // a stage of weights: [128 rows][128 bytes]
static_assert(kWgmmaStageK == 128, "a stage is one 128-byte swizzled row of weight bytes");

// A block of kRowsM x rows (wgmma's N) a tile and a ring of kStages stages.
template <int RowsM, int Stages>
struct Config {
  static constexpr int kRowsM = RowsM, kStages = Stages;
  static constexpr int kXBoxBytes = RowsM * 128;  // 64 k of the x rows: [kRowsM][64] T
  static constexpr int kXBytes = 2 * kXBoxBytes;  // a stage's 128 k
  // [kStages][x] [kStages][weights], 1024-aligned at run time (the slack).
  static constexpr int kSmem = Stages * (kXBytes + kWBytes) + 1024;
  static_assert(kSmem <= 227 * 1024);
};

// A consumer thread's A fragments of one stage: [k-step][wgmma_rs_k16's a].
using Fragments = uint32_t[kSteps][4];

template <typename C, typename T, typename W, typename Out>
__global__ void __launch_bounds__(kThreads, 1)
    byte_weight_wgmma_kernel(const __grid_constant__ CUtensorMap x_map,
                             const __grid_constant__ CUtensorMap w_map, const Args<T, Out> a) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t full[C::kStages], empty[C::kStages];
  unsigned char* const x_slots = tma::align_1024(smem_raw);
  unsigned char* const w_slots = x_slots + C::kStages * C::kXBytes;
  int tile_m, tile_n;
  tile_of(blockIdx.x, a.tiles_m, a.tiles_n, tile_m, tile_n);
  const int n0 = tile_n * kRowsN, m0 = tile_m * C::kRowsM;
  const int split = blockIdx.y;
  const int all_stages = (a.K + kWgmmaStageK - 1) / kWgmmaStageK;
  const int first_stage = split * a.stages_per_split;
  const int stages = min(all_stages, first_stage + a.stages_per_split) - first_stage;

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::kStages; ++s) {
      tma::barrier_init(&full[s], 1);   // the producer's arrival (+ the slot's bytes)
      tma::barrier_init(&empty[s], 2);  // both consumer warpgroups, done with the slot
    }
    tma::fence_barrier_init();
  }
  __syncthreads();

  const bool consumer = threadIdx.x < kConsumers;
  float acc[C::kRowsM / 2] = {};
  if (!consumer) {
    if (threadIdx.x == kConsumers) {  // one thread issues every copy
      const int start = rotation_start(a.rotate, stages);
      for (int s = 0; s < stages; ++s) {
        const int slot = s % C::kStages;
        // The slot's previous stage (s - kStages) has been multiplied.
        if (s >= C::kStages) tma::wait(&empty[slot], (s / C::kStages - 1) & 1);
        const int k = (first_stage + rotated(s, stages, start)) * kWgmmaStageK;
        unsigned char* const xs = x_slots + slot * C::kXBytes;
        tma::arrive_expect_tx(&full[slot], C::kXBytes + kWBytes);
        // x's map counts bytes: 2 a k.
        tma::load_2d(xs, &x_map, 2 * k, m0, &full[slot]);
        tma::load_2d(xs + C::kXBoxBytes, &x_map, 2 * k + 128, m0, &full[slot]);
        tma::load_2d(w_slots + slot * kWBytes, &w_map, k, n0, &full[slot]);
      }
    }
  } else {
    const int group = threadIdx.x / 128, warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const bool leader = threadIdx.x % 128 == 0;  // releases the group's slots
    // The thread's weight rows of a stage: r and r + 8, both at swizzle row g (r % 8 == g). Of
    // each 16-byte chunk (16 k) it needs k 2t, 2t + 1, 2t + 8, 2t + 9: int8 rows hold them as
    // one 4-byte word, at 4t (kernels/int8_layout.h); E4M3 rows (column order) in the halves t % 2
    // of the words at 4 (t / 2) and 8 + 4 (t / 2).
    constexpr bool kInt8Layout = std::is_same_v<W, int8_t>;
    const int r = 64 * group + 16 * warp + g;
    const int w_offset = r * 128 + (kInt8Layout ? 4 * t : 4 * (t / 2));
    const uint32_t halves = t % 2 ? 0x7632u : 0x5410u;
    auto fragment_word = [&](const unsigned char* p) {
      const uint32_t lo = *reinterpret_cast<const uint32_t*>(p);
      if constexpr (kInt8Layout) return lo;
      else return __byte_perm(lo, *reinterpret_cast<const uint32_t*>(p + 8), halves);
    };
    auto widen_stage = [&](int slot, Fragments& f) {
      const unsigned char* const w = w_slots + slot * kWBytes + w_offset;
#pragma unroll
      for (int k = 0; k < kSteps; ++k)
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // rows r and r + 8
          const uint2 v = widen_bytes4<T, W>(fragment_word(w + h * 8 * 128 + ((k ^ g) << 4)));
          f[k][h] = v.x;      // k 2t, 2t + 1
          f[k][2 + h] = v.y;  // k 2t + 8, 2t + 9
        }
    };
    Fragments frags[2];
    wgmma::fence_registers(acc);
    // Stage s: multiply it with frags[B] (widened the step before), then, once stage s - 1's
    // products are done (its slot goes back, its fragments frags[B ^ 1] are free), widen s + 1.
    auto step = [&](auto buffer, int s) {
      constexpr int B = decltype(buffer)::value;
      const int slot = s % C::kStages;
      const unsigned char* const xs = x_slots + slot * C::kXBytes;
      wgmma::fence();
#pragma unroll
      for (int k = 0; k < kSteps; ++k)  // + 2: 32 bytes (16 k) on in a box
        wgmma::wgmma_rs_k16<T, C::kRowsM>(
            acc, frags[B][k], wgmma::sw128_desc(xs + k / 4 * C::kXBoxBytes) + 2 * (k % 4));
      wgmma::commit();
      wgmma::wait<1>();
#pragma unroll
      for (int k = 0; k < kSteps; ++k)  // read by stage s - 1's products, now done
        wgmma::fence_registers(frags[B ^ 1][k]);
      if (s > 0 && leader) tma::arrive(&empty[(s - 1) % C::kStages]);
      if (s + 1 < stages) {
        const int next = (s + 1) % C::kStages;
        tma::wait(&full[next], ((s + 1) / C::kStages) & 1);
        widen_stage(next, frags[B ^ 1]);
      }
    };
    if (stages > 0) {
      tma::wait(&full[0], 0);
      widen_stage(0, frags[0]);
    }
    for (int s = 0; s < stages; s += 2) {
      step(std::integral_constant<int, 0>{}, s);
      if (s + 1 < stages) step(std::integral_constant<int, 1>{}, s + 1);
    }
    wgmma::wait<0>();
    wgmma::fence_registers(acc);
  }

  // acc[4j + e]: y[m][n] with n the thread's weight row (+ 8 for e >= 2), m x row 8j + 2t (+ 1
  // for odd e). for_each(f): f(m, n, float& v) for each of them inside [M, N] (none for the
  // producer's warp, which only takes part in finish_tile's barriers).
  const int n_first = n0 + (threadIdx.x / 32) * 16 + threadIdx.x % 32 / 4;
  const int m_first = m0 + 2 * (threadIdx.x % 4);
  auto for_each = [&](auto&& f) {
    if (!consumer) return;
#pragma unroll
    for (int j = 0; j < C::kRowsM / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = m_first + 8 * j + (e & 1), n = n_first + (e >> 1) * 8;
        if (m < a.M && n < a.N) f(m, n, acc[4 * j + e]);
      }
  };
  const Tile tile{m0, C::kRowsM, n0, kRowsN};
  if (a.splits > 1) return finish_tile<false>(a, split, tile, for_each);
  // Unsplit: the row scales multiply the sums in registers (the thread's two rows, clamped to N:
  // no branch around the loads), then the store.
  if (consumer) {
    const float scale[2] = {__ldg(a.scale + min(n_first, a.N - 1)),
                            __ldg(a.scale + min(n_first + 8, a.N - 1))};
#pragma unroll
    for (int i = 0; i < C::kRowsM / 2; ++i) acc[i] *= scale[(i % 4) >> 1];  // i = 4j + e
  }
  finish_tile<true>(a, split, tile, for_each);
}

template <typename C, typename T, typename W, typename Out>
void launch(const Args<T, Out>& args, cudaStream_t stream) {
  // x as a byte matrix [M, 2K]; a box is 128 bytes (64 k) of kRowsM rows.
  const CUtensorMap x_map = tma::byte_matrix_map(args.x, args.M, 2 * args.K, C::kRowsM);
  const CUtensorMap w_map = tma::byte_matrix_map(args.q, args.N, args.K, kRowsN);
  launch_tiles(byte_weight_wgmma_kernel<C, T, W, Out>, kThreads, C::kSmem, args, stream, x_map,
               w_map);
}

// The shapes (x rows x weight rows): 64 x 128 and 128 x 128, one block an SM.
using Rows64 = Config<64, 6>;
using Rows128 = Config<128, 4>;

// f(the Config of tile `shape`); false, f not called, when there is no such tile.
template <typename F>
bool with_shape(WgmmaShape shape, F&& f) {
  if (shape.rows_n != kRowsN) return false;
  if (shape.rows_m == 64) return f(Rows64{}), true;
  if (shape.rows_m == 128) return f(Rows128{}), true;
  return false;
}

[[noreturn]] void no_such_tile(WgmmaShape shape) {
  throw std::invalid_argument("byte-weight GEMM: no wgmma tile of " + std::to_string(shape.rows_m) +
                              " x " + std::to_string(shape.rows_n));
}

}  // namespace

bool wgmma_shape_exists(WgmmaShape shape) {
  return with_shape(shape, [](auto) {});
}

template <typename T, typename W, typename Out>
void launch_wgmma(const Args<T, Out>& args, WgmmaShape shape, cudaStream_t stream) {
  if (!with_shape(shape, [&](auto c) { launch<decltype(c), T, W, Out>(args, stream); }))
    no_such_tile(shape);
}

LMX_BYTE_GEMM_INSTANTIATE(launch_wgmma, WgmmaShape)

}  // namespace lmx::kernels::cuda::byte_gemm
