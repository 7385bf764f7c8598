// Hopper's warpgroup tensor-core product (wgmma, sm_90a) on operands in shared memory (A also
// from registers: wgmma_rs_k16), for the W8A16 GEMM at 64 and more rows (byte_weight_wgmma.cu),
// the W8A8 GEMM (w8a8_wgmma.cu) and the prefill attention (attention_prefill_wgmma.cu). A
// warpgroup (4 consecutive warps, 128 threads) multiplies A [64 x 16] by B [16 x N] into fp32
// registers (int8: A [64 x 32], int32), asynchronously:
//   fence(); wgmma_k16<T, N>(d, a, b) ...; commit(); ... wait<n>()
// Both operands are K-major tiles of T (each row's k contiguous) in the 128-byte swizzle: a row
// of 64 T (128 bytes) at row x 128, its 16-byte chunk c stored at chunk c ^ (row % 8); a tile's
// base is 1024-byte aligned (the swizzle is computed from the address). sw128_desc(tile) describes
// rows 0.. of such a tile; + 2 (32 bytes) to the descriptor moves it 16 k along the rows.
// Accumulators (PTX ISA, "wgmma-64N16 D"): warp w of the group, lane (g = lane / 4, t = lane %
// 4): d[4j + e] = D[16w + g + 8 (e / 2)][8j + 2t + e % 2], j = 0 .. N / 8 - 1.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace lmx::kernels::cuda::wgmma {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LMX_WGMMA_AVAILABLE 1
#else
#define LMX_WGMMA_AVAILABLE 0
#endif

// The descriptor of a K-major, 128-byte-swizzled tile at `tile` (shared memory, 1024-aligned):
// start address / 16 (bits 0-13), leading byte offset 1 (unused in this layout, bits 16-29),
// stride byte offset 1024 / 16 between 8-row groups (bits 32-45), swizzle 128 B (bits 62-63 = 1).
__device__ __forceinline__ uint64_t sw128_desc(const void* tile) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}

// The descriptor of an N-major B operand in the 128-byte swizzle (the `tnsp-b` products): B's k
// rows are 128-byte rows of 64 n each, laid out as a K-major tile's rows are (chunk c of row k at
// chunk c ^ (k % 8)), 8-row groups 1024 bytes apart (stride byte offset); the next 64 n are a tile
// `block_bytes` further on (leading byte offset). + 128 to the descriptor moves it 16 k (rows).
__device__ __forceinline__ uint64_t sw128_n_major_desc(const void* tile, uint32_t block_bytes) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t((block_bytes & 0x3FFFF) >> 4) << 16) |
         (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

// The products' body where the device code is built for a GPU without wgmma: the host launches
// them on compute capability 9.x only.
template <typename... Operands>
__device__ __forceinline__ void unavailable(const Operands&...) {
  __trap();
}

// Orders this thread's earlier register and shared-memory accesses before the wgmma that follow.
__device__ __forceinline__ void fence() {
#if LMX_WGMMA_AVAILABLE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void commit() {
#if LMX_WGMMA_AVAILABLE
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N of this warpgroup's committed groups are still running.
template <int N>
__device__ __forceinline__ void wait() {
#if LMX_WGMMA_AVAILABLE
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Makes this thread's generic-proxy writes to shared memory (st.shared, cp.async) visible to the
// async proxy that wgmma reads operands through; a barrier after it publishes them to the block.
__device__ __forceinline__ void fence_shared_for_async() {
#if LMX_WGMMA_AVAILABLE
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Keeps the compiler from moving accesses of an accumulator across the asynchronous product.
template <int R>
__device__ __forceinline__ void fence_registers(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <typename I, int R, typename = std::enable_if_t<std::is_integral_v<I> && sizeof(I) == 4>>
__device__ __forceinline__ void fence_registers(I (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// Operand lists of the three shapes: registers %0 .. %(N/2 - 1) are d, then a, b and scale-d.
#define LMX_WGMMA_R0_31                                                  \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15" \
  ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define LMX_WGMMA_R32_63                                                             \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" \
  ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define LMX_WGMMA_R64_127                                                                        \
  ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"             \
  ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"             \
  ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111" \
  ", %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, " \
  "%127"
#define LMX_WGMMA_D8(i)                                                                       \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define LMX_WGMMA_D32(i) \
  LMX_WGMMA_D8(i), LMX_WGMMA_D8(i + 8), LMX_WGMMA_D8(i + 16), LMX_WGMMA_D8(i + 24)
#define LMX_WGMMA_N64_REGS        \
  LMX_WGMMA_R0_31                 \
  "}, %32, %33, p, 1, 1, 0, 0;\n" \
  "}\n"
#define LMX_WGMMA_N64_SCALE_D "%34"
#define LMX_WGMMA_N64_D LMX_WGMMA_D32(0)
#define LMX_WGMMA_N128_REGS           \
  LMX_WGMMA_R0_31 LMX_WGMMA_R32_63    \
      "}, %64, %65, p, 1, 1, 0, 0;\n" \
      "}\n"
#define LMX_WGMMA_N128_SCALE_D "%66"
#define LMX_WGMMA_N128_D LMX_WGMMA_D32(0), LMX_WGMMA_D32(32)
#define LMX_WGMMA_N256_REGS                          \
  LMX_WGMMA_R0_31 LMX_WGMMA_R32_63 LMX_WGMMA_R64_127 \
      "}, %128, %129, p, 1, 1, 0, 0;\n"              \
      "}\n"
#define LMX_WGMMA_N256_SCALE_D "%130"
#define LMX_WGMMA_N256_D LMX_WGMMA_D32(0), LMX_WGMMA_D32(32), LMX_WGMMA_D32(64), LMX_WGMMA_D32(96)

#define LMX_WGMMA_ASM(shape_types, regs, scale_d, d_operands)                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " scale_d                      \
               ", 0;\n"                                                         \
               "wgmma.mma_async.sync.aligned." shape_types " {" regs:d_operands \
               : "l"(a), "l"(b), "r"(1))

// d += A · B: a and b are sw128_desc descriptors of the k-step's A (64 rows) and B (N rows).
template <typename T, int N>
__device__ __forceinline__ void wgmma_k16(float (&d)[N / 2], uint64_t a, uint64_t b) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>);
  static_assert(N == 64 || N == 128 || N == 256);
#if LMX_WGMMA_AVAILABLE
  constexpr bool kHalf = std::is_same_v<T, __half>;
#define LMX_WGMMA_N(n)                                                                            \
  if constexpr (kHalf)                                                                            \
    LMX_WGMMA_ASM("m64n" #n "k16.f32.f16.f16", LMX_WGMMA_N##n##_REGS, LMX_WGMMA_N##n##_SCALE_D,   \
                  LMX_WGMMA_N##n##_D);                                                            \
  else                                                                                            \
    LMX_WGMMA_ASM("m64n" #n "k16.f32.bf16.bf16", LMX_WGMMA_N##n##_REGS, LMX_WGMMA_N##n##_SCALE_D, \
                  LMX_WGMMA_N##n##_D)
  if constexpr (N == 64) {
    LMX_WGMMA_N(64);
  } else if constexpr (N == 128) {
    LMX_WGMMA_N(128);
  } else {
    LMX_WGMMA_N(256);
  }
#undef LMX_WGMMA_N
#else
  unavailable(d, a, b);
#endif
}

// d += A · B with A in registers (the weights of the W8A16 GEMM, widened on their way from shared
// memory; the softmax's P of the prefill attention): a is this thread's share of A [64 x 16], per
// warp as mma.m16n8k16's A fragment (warp w of the group holds rows 16w .. 16w + 15; a[0]: row g,
// k 2t and 2t + 1; a[1]: row g + 8, the same k; a[2], a[3]: rows g and g + 8, k 2t + 8 and
// 2t + 9), b the descriptor of B's N rows: sw128_desc (K-major), or with N_MAJOR_B
// sw128_n_major_desc. The product reads a asynchronously: the registers keep their values until a
// wait retires it.
#define LMX_WGMMA_RS_N64                                                            \
  LMX_WGMMA_R0_31 "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"               \
      : LMX_WGMMA_D32(0)                                                            \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1), "n"(int(N_MAJOR_B))
#define LMX_WGMMA_RS_N128                                                             \
  LMX_WGMMA_R0_31 LMX_WGMMA_R32_63 "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n" \
      : LMX_WGMMA_D32(0), LMX_WGMMA_D32(32)                                           \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1), "n"(int(N_MAJOR_B))
template <typename T, int N, bool N_MAJOR_B = false>
__device__ __forceinline__ void wgmma_rs_k16(float (&d)[N / 2], const uint32_t (&a)[4],
                                             uint64_t b) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>);
  static_assert(N == 64 || N == 128);
#if LMX_WGMMA_AVAILABLE
  constexpr bool kHalf = std::is_same_v<T, __half>;
  if constexpr (N == 64 && kHalf)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" LMX_WGMMA_RS_N64);
  else if constexpr (N == 64)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" LMX_WGMMA_RS_N64);
  else if constexpr (kHalf)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" LMX_WGMMA_RS_N128);
  else
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" LMX_WGMMA_RS_N128);
#else
  unavailable(d, a, b);
#endif
}
#undef LMX_WGMMA_RS_N128

// d += A · B on int8 codes, exact int32 sums: a and b are sw128_desc descriptors of the k-step's
// 32 bytes of A (64 rows) and B (N rows); + 2 to a descriptor moves it 32 k along the rows.
#define LMX_WGMMA_I8(i)                                                                       \
  "+r"(d[i]), "+r"(d[i + 1]), "+r"(d[i + 2]), "+r"(d[i + 3]), "+r"(d[i + 4]), "+r"(d[i + 5]), \
      "+r"(d[i + 6]), "+r"(d[i + 7])
#define LMX_WGMMA_I32(i) \
  LMX_WGMMA_I8(i), LMX_WGMMA_I8(i + 8), LMX_WGMMA_I8(i + 16), LMX_WGMMA_I8(i + 24)
template <int N>
__device__ __forceinline__ void wgmma_s8_k32(int (&d)[N / 2], uint64_t a, uint64_t b) {
  static_assert(N == 128 || N == 256);
#if LMX_WGMMA_AVAILABLE
  if constexpr (N == 128)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {" LMX_WGMMA_R0_31 LMX_WGMMA_R32_63
        "}, %64, %65, p;\n}\n"
        : LMX_WGMMA_I32(0), LMX_WGMMA_I32(32)
        : "l"(a), "l"(b), "r"(1));
  else
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {" LMX_WGMMA_R0_31 LMX_WGMMA_R32_63
            LMX_WGMMA_R64_127 "}, %128, %129, p;\n}\n"
        : LMX_WGMMA_I32(0), LMX_WGMMA_I32(32), LMX_WGMMA_I32(64), LMX_WGMMA_I32(96)
        : "l"(a), "l"(b), "r"(1));
#else
  unavailable(d, a, b);
#endif
}
#undef LMX_WGMMA_I8
#undef LMX_WGMMA_I32

#undef LMX_WGMMA_ASM
#undef LMX_WGMMA_R0_31
#undef LMX_WGMMA_R32_63
#undef LMX_WGMMA_R64_127
#undef LMX_WGMMA_D8
#undef LMX_WGMMA_D32
#undef LMX_WGMMA_N64_REGS
#undef LMX_WGMMA_N64_SCALE_D
#undef LMX_WGMMA_N64_D
#undef LMX_WGMMA_N128_REGS
#undef LMX_WGMMA_N128_SCALE_D
#undef LMX_WGMMA_N128_D
#undef LMX_WGMMA_N256_REGS
#undef LMX_WGMMA_N256_SCALE_D
#undef LMX_WGMMA_N256_D

}  // namespace lmx::kernels::cuda::wgmma
