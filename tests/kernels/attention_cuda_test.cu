// CUDA paged attention (decode split-K and prefill flash-attention) vs the CPU reference
// kernels::cpu::paged_attention, on one ragged batch of sequences of lengths 1, 7, 83, 1000 and
// 4100 with scrambled block tables, at several head layouts (MHA 32/32, GQA 32/8, 16/4, 12/2,
// MQA 8/1, 32/1, and groups of 1-2 for the decode kernel's per-warp variant), head_dim
// 64/80/96/128/256 (256: GPT-J 16/16, Gemma 8/1 and 16/8), window 0, 4096 and 7, in fp16 and bf16;
// plus the benchmark's MHA decode shapes (batch 1 x 512, 1 x 8192, 32 x 512: the split plans of the
// cluster-merged kernel), also at head_dim 256.
// Inputs are rounded to the dtype first, so the reference sees exactly what the GPU sees.
// The same decode and prefill cases also run over fp8 (E4M3) caches: the cache values are E4M3
// values (exact in fp16 and bf16), so the tolerances stay those of T.
// ALiBi (Bloom's slopes, also for head counts that are not a power of two) runs through every
// kernel (decode: per-warp / cluster and workspace-merged variants; prefill: 64- and 128-row
// tiles; generic), with GQA / MHA, windows, both cache dtypes and batches of 1, 7 and 83 tokens.
// The bias is computed in fp32 on both sides (the GPU in the log2 domain), an error far below the
// output rounding, so the tolerances stay the same.
// Tolerances: every (token, head) output within 8 unit roundoffs relative L2 (Tol::per_head
// says why), and the whole output within fp16 3e-3, bf16 1e-2 relative L2. Output rounding alone is
// ~3e-4 / 2.3e-3 rms relative (half an ulp of 11 / 8 bits, uniform); the prefill kernel also
// rounds P (in [0, 1]) to the dtype before the PV product, adding about as much again.
// Outputs are poisoned with NaN first: every element must be written.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/attention.h"
#include "tests/kernels/cuda_test_util.h"

namespace lmx {
namespace {

// value: relative L2 over the whole output (see the top). per_head: relative L2 of one (token,
// head) output of D values, 8 u (u = 2^-11 fp16, 2^-8 bf16, the unit roundoff). The error sources
// of one head: (1) the output's rounding to T, at most u relative per element, so at most u in L2
// (the decode and generic kernels keep everything else in fp32: scores, softmax, sums, split
// merges, ~1e-6 relative; the cache values are exact in T); (2) in the prefill kernel and the
// tensor-core decode kernel (groups of 3-16), P (in [0, 1]) rounded to T before P V: error sum_i
// p_i d_i v_i with |d_i| <= u. With V's elements independent of the scores and zero-mean (uniform
// [-2, 2]), E|error|^2 = (u^2 / 3) sum_i p_i^2 |v_i|^2 while E|o|^2 = sum_i p_i^2 |v_i|^2: an rms
// ratio of u / sqrt(3), ~0.8 u with (1). The ratio of two sums of D squares varies from head to
// head: for the prefill shapes here (D >= 64) the worst of ~10^4 heads a check stays within ~2x the
// rms (|o|^2 below a quarter of its mean is a chi-square(64) tail of ~1e-9). So ~2 u at most; 8 u
// leaves a margin of 4, and a head that reads a wrong key, position, block or scale is off by O(1).
// (Measured before this check, as the global error: fp16 prefill 2.3e-4 = 0.47 u, bf16 1.9e-3 =
// 0.49 u; docs/attention.md.)
template <typename T>
struct Tol;
template <>
struct Tol<__half> {
  static constexpr double value = 3e-3;
  static constexpr double per_head = 8.0 / 2048;  // 8 * 2^-11 = 3.9e-3
};
template <>
struct Tol<__nv_bfloat16> {
  static constexpr double value = 1e-2;
  static constexpr double per_head = 8.0 / 256;  // 8 * 2^-8 = 3.1e-2
};

struct Shape {
  int heads, kv_heads, head_dim, window;
  bool alibi = false;   // Bloom's slopes for `heads` (bloom_alibi_slopes)
  int block_size = 16;  // keys a cache block
};

std::string name(const Shape& s) {
  return std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) + " heads, d" +
         std::to_string(s.head_dim) + ", window " + std::to_string(s.window) +
         (s.alibi ? ", alibi" : "") +
         (s.block_size != 16 ? ", blocks of " + std::to_string(s.block_size) : "");
}

// Bloom's ALiBi slopes (Hugging Face build_alibi_tensor) for n heads: p = the largest power of two
// <= n; slopes[i] = base^(i + 1) for i < p, base = 2^(-2^-(log2(p) - 3)); heads past p take the
// odd powers of extra_base = 2^(-2^-(log2(2p) - 3)). E.g. 6 heads: 1/4, 1/16, 1/64, 1/256, 1/2,
// 1/8.
std::vector<float> bloom_alibi_slopes(int n) {
  const int p = 1 << int(std::floor(std::log2(double(n))));
  const double base = std::pow(2.0, -std::pow(2.0, -(std::log2(double(p)) - 3)));
  const double extra_base = std::pow(2.0, -std::pow(2.0, -(std::log2(2.0 * p) - 3)));
  std::vector<float> slopes;
  for (int i = 0; i < p; ++i) slopes.push_back(float(std::pow(base, i + 1)));
  for (int j = 0; j < n - p; ++j) slopes.push_back(float(std::pow(extra_base, 2 * j + 1)));
  return slopes;
}

template <typename T>
std::vector<T> to_dtype(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = T(v[i]);
  return out;
}

const std::vector<int> kLens{1, 7, 83, 1000, 4100};

// n values of T, left uninitialized until written (a std::vector would zero them first, on one
// thread).
template <typename T>
struct HostArray {
  std::unique_ptr<T[]> p;
  size_t n = 0;
  void allocate(size_t count) {
    p.reset(new T[count]);
    n = count;
  }
  T* data() { return p.get(); }
  const T* data() const { return p.get(); }
  size_t size() const { return n; }
};

// One ragged batch over a shared paged cache of C.
template <typename C>
struct Scenario {
  std::vector<int> lens;
  kernels::PagedKvLayout layout{};
  int num_blocks = 0;
  std::vector<int32_t> tables;        // [seqs, max_blocks], unused entries -1
  HostArray<float> k_cache, v_cache;  // the cache's values (exact in C) for the reference
  HostArray<C> k_c, v_c;              // the same values in C, for the device

  void build(const Shape& s, std::mt19937& rng) {
    const int kBlockSize = s.block_size;
    int max_blocks = 0;
    for (int len : lens) {
      max_blocks = std::max(max_blocks, (len + kBlockSize - 1) / kBlockSize);
      num_blocks += (len + kBlockSize - 1) / kBlockSize;
    }
    num_blocks += 37;  // unused blocks in between
    layout = {kBlockSize, s.kv_heads, s.head_dim, max_blocks + 3};
    std::vector<int32_t> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);  // scrambled block tables
    tables.assign(lens.size() * layout.max_blocks_per_seq, -1);
    size_t next = 0;
    for (size_t i = 0; i < lens.size(); ++i)
      for (int b = 0; b < (lens[i] + kBlockSize - 1) / kBlockSize; ++b)
        tables[i * layout.max_blocks_per_seq + b] = perm[next++];
    // Values uniform in [-2, 2) rounded to C. Cost: the 386 checks (both types) fill ~5.8e9
    // cache values in all (e.g. 32 x 512 tokens of 32 x 128 heads: 139M); drawn one by one with
    // std::uniform_real_distribution and converted to C twice on the host (the value, then the
    // upload) that took 30-50 ns a value, minutes in all. Here: a table of 2^16 evenly spaced
    // levels converted once, 16-bit draws from SplitMix streams, the cache split over the host's
    // cores (uninitialized arrays, so each thread also takes its own page faults): ~1 ns a value.
    const size_t n = size_t(num_blocks) * kBlockSize * s.kv_heads * s.head_dim;
    static const std::pair<std::vector<C>, std::vector<float>> kLevels = [] {
      std::vector<C> c(size_t(1) << 16);
      std::vector<float> f(c.size());
      for (size_t i = 0; i < c.size(); ++i) {
        c[i] = C(-2.0f + 4.0f * (float(i) + 0.5f) / float(c.size()));
        f[i] = float(c[i]);
      }
      return std::pair{c, f};
    }();
    const std::vector<C>& levels = kLevels.first;
    const std::vector<float>& level_values = kLevels.second;
    const unsigned workers = std::clamp(std::thread::hardware_concurrency(), 1u, 32u);
    const size_t per = (n / workers + 4) / 4 * 4;
    for (const auto& [values_, codes_] : {std::pair{&k_cache, &k_c}, std::pair{&v_cache, &v_c}}) {
      HostArray<float>* values = values_;
      HostArray<C>* codes = codes_;
      values->allocate(n);
      codes->allocate(n);
      uint64_t seed = uint64_t(rng()) << 32;
      seed |= rng();
      std::vector<std::thread> pool;
      for (size_t begin = 0; begin < n; begin += per)
        pool.emplace_back([&, values, codes, begin] {
          test::SplitMix64 g(seed + 0x632be59bd9b4e019ull * (begin / per + 1));
          uint64_t r = 0;
          for (size_t i = begin; i < std::min(n, begin + per); ++i, r >>= 16) {
            if ((i - begin) % 4 == 0) r = g.next();
            values->data()[i] = level_values[r & 0xffff];
            codes->data()[i] = levels[r & 0xffff];
          }
        });
      for (std::thread& t : pool) t.join();
    }
  }
};

// Batch: tokens (seq, pos); chunks cu_q when it is a list of per-sequence chunks.
struct Batch {
  std::vector<int32_t> seq, pos, cu_q;
  int max_q_len = 0;
  void add_chunk(int s, int begin, int end) {
    if (cu_q.empty()) cu_q.push_back(0);
    for (int p = begin; p < end; ++p) {
      seq.push_back(s);
      pos.push_back(p);
    }
    cu_q.push_back(int32_t(seq.size()));
    max_q_len = std::max(max_q_len, end - begin);
  }
  int tokens() const { return int(seq.size()); }
};

// kPrefill: the prefill kernel paged_attention_prefill picks (on Hopper with a 16-bit cache and
// head_dim 64 / 128 the wgmma one); kPrefillMmaSync: the mma.sync kernel for every case.
enum class Kernel { kDecode, kDecodeShortMaxContext, kPrefill, kPrefillMmaSync, kGeneric };

// Sequences of the given lengths (default kLens), batch tokens over them; caches of C. With
// kv_scale (an fp8 cache's dequantization scales) the GPU reads the same codes with the scales in
// its layout, and the CPU reference reads the dequantized cache: codes times the scales.
template <typename T, typename C = T>
void check(const Shape& s, const Batch& batch, Kernel kernel, uint32_t seed,
           const std::vector<int>& lens = kLens, kernels::KvScale kv_scale = {}) {
  std::mt19937 rng(seed);
  Scenario<C> sc;
  sc.lens = lens;
  sc.build(s, rng);
  for (const auto& [values, by] : {std::pair{&sc.k_cache, kv_scale.k}, {&sc.v_cache, kv_scale.v}})
    if (by != 1.0f)
      for (size_t i = 0; i < values->size(); ++i) values->data()[i] *= by;
  kernels::PagedKvLayout gpu_layout = sc.layout;
  gpu_layout.scale = kv_scale;
  const int tokens = batch.tokens(), D = s.head_dim;
  const int q_stride = (s.heads + 2 * s.kv_heads) * D;  // as in a fused qkv projection
  const std::vector<float> q = test::randn<T>(size_t(tokens) * q_stride, rng);
  const float scale = 1.0f / std::sqrt(float(D));
  const std::vector<float> slopes = s.alibi ? bloom_alibi_slopes(s.heads) : std::vector<float>{};

  std::vector<float> ref(size_t(tokens) * s.heads * D);
  kernels::cpu::paged_attention(q.data(), q_stride, sc.k_cache.data(), sc.v_cache.data(),
                                sc.tables.data(), batch.seq.data(), batch.pos.data(), ref.data(),
                                tokens, s.heads, scale, s.alibi ? slopes.data() : nullptr, s.window,
                                sc.layout);

  const std::vector<T> hq = to_dtype<T>(q);
  const HostArray<C>&hk = sc.k_c, &hv = sc.v_c;
  test::Dev<T> dq(hq.size()), dout(ref.size());
  test::Dev<C> dk(hk.size()), dv(hv.size());
  test::Dev<int32_t> dtab(sc.tables.size()), dseq(tokens), dpos(tokens),
      dcu(std::max<size_t>(batch.cu_q.size(), 1));
  test::Dev<float> dslopes(std::max<size_t>(slopes.size(), 1));
  ASSERT_TRUE(dq.p && dk.p && dv.p && dout.p && dtab.p && dseq.p && dpos.p && dcu.p && dslopes.p);
  LMX_CUDA_OK(
      cudaMemcpy(dslopes.p, slopes.data(), slopes.size() * sizeof(float), cudaMemcpyHostToDevice));
  const float* alibi = s.alibi ? dslopes.p : nullptr;
  LMX_CUDA_OK(cudaMemcpy(dq.p, hq.data(), hq.size() * sizeof(T), cudaMemcpyHostToDevice));
  LMX_CUDA_OK(cudaMemcpy(dk.p, hk.data(), hk.size() * sizeof(C), cudaMemcpyHostToDevice));
  LMX_CUDA_OK(cudaMemcpy(dv.p, hv.data(), hv.size() * sizeof(C), cudaMemcpyHostToDevice));
  LMX_CUDA_OK(cudaMemcpy(dtab.p, sc.tables.data(), sc.tables.size() * 4, cudaMemcpyHostToDevice));
  LMX_CUDA_OK(cudaMemcpy(dseq.p, batch.seq.data(), tokens * 4, cudaMemcpyHostToDevice));
  LMX_CUDA_OK(cudaMemcpy(dpos.p, batch.pos.data(), tokens * 4, cudaMemcpyHostToDevice));
  if (!batch.cu_q.empty())
    LMX_CUDA_OK(
        cudaMemcpy(dcu.p, batch.cu_q.data(), batch.cu_q.size() * 4, cudaMemcpyHostToDevice));
  LMX_CUDA_OK(cudaMemset(dout.p, 0xff, ref.size() * sizeof(T)));  // poison: NaN in every dtype

  const int max_len = *std::max_element(sc.lens.begin(), sc.lens.end());
  if (kernel == Kernel::kPrefill || kernel == Kernel::kPrefillMmaSync) {
    kernels::cuda::paged_attention_prefill<T>(
        dq.p, q_stride, dk.p, dv.p, dtab.p, dseq.p, dpos.p, dcu.p, int(batch.cu_q.size()) - 1,
        batch.max_q_len, dout.p, s.heads, scale, alibi, s.window, gpu_layout, nullptr,
        kernel == Kernel::kPrefill ? kernels::cuda::PrefillKernel::kBest
                                   : kernels::cuda::PrefillKernel::kMmaSync);
  } else if (kernel == Kernel::kGeneric) {
    kernels::cuda::paged_attention_generic<T>(dq.p, q_stride, dk.p, dv.p, dtab.p, dseq.p, dpos.p,
                                              dout.p, tokens, s.heads, scale, alibi, s.window,
                                              gpu_layout, nullptr);
  } else {
    const int max_context = kernel == Kernel::kDecode ? max_len : 1000;  // understated
    const size_t ws_bytes = kernels::cuda::paged_attention_decode_workspace_bytes(
        tokens, s.heads, s.kv_heads, D, max_context);
    test::Dev<unsigned char> ws(ws_bytes);
    ASSERT_TRUE(ws.p);
    LMX_CUDA_OK(cudaMemset(ws.p, 0xff, ws_bytes));
    kernels::cuda::paged_attention_decode<T>(dq.p, q_stride, dk.p, dv.p, dtab.p, dseq.p, dpos.p,
                                             dout.p, tokens, s.heads, scale, alibi, s.window,
                                             gpu_layout, max_context, ws.p, ws_bytes, nullptr);
    LMX_CUDA_OK(cudaGetLastError());
    LMX_CUDA_OK(cudaDeviceSynchronize());
  }
  LMX_CUDA_OK(cudaGetLastError());
  LMX_CUDA_OK(cudaDeviceSynchronize());
  std::vector<T> hout(ref.size());
  LMX_CUDA_OK(cudaMemcpy(hout.data(), dout.p, hout.size() * sizeof(T), cudaMemcpyDeviceToHost));

  // Per (token, head): the relative L2 error of that head's D outputs. Each head's output is its
  // own softmax-weighted average of V, so a wrong head, token or key range shows there even when
  // it is a small part of the whole output (the global error below would hide it).
  double num = 0, den = 0, worst = 0;
  int bad = 0, worst_t = -1, worst_h = -1;
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < s.heads; ++h) {
      double hn = 0, hd = 0;
      for (int d = 0; d < D; ++d) {
        const size_t i = (size_t(t) * s.heads + h) * D + d;
        const double o = float(hout[i]);
        ASSERT_TRUE(std::isfinite(o))
            << name(s) << ": element " << i << " (token " << t << ", head " << h << ") not written";
        hn += (o - ref[i]) * (o - ref[i]);
        hd += double(ref[i]) * ref[i];
      }
      num += hn;
      den += hd;
      const double e = hd > 0 ? std::sqrt(hn / hd) : std::sqrt(hn);
      bad += e >= Tol<T>::per_head;
      if (e > worst) worst = e, worst_t = t, worst_h = h;
    }
  EXPECT_EQ(bad, 0) << name(s) << ": " << bad << " of " << tokens * s.heads
                    << " (token, head) outputs past " << Tol<T>::per_head << "; the worst, token "
                    << worst_t << " (seq " << batch.seq[size_t(std::max(worst_t, 0))] << ", pos "
                    << batch.pos[size_t(std::max(worst_t, 0))] << ") head " << worst_h << ": "
                    << worst;
  const double err = std::sqrt(num / den);
  EXPECT_LT(err, Tol<T>::value) << name(s);
  std::printf("  %-36s tokens %4d  max len %5d  rel L2 %.2e, worst head %.2e\n", name(s).c_str(),
              tokens, max_len, err, worst);
}

const Shape kShapes[] = {
    {32, 32, 128, 0}, {32, 8, 128, 4096}, {8, 1, 64, 7},   {32, 8, 64, 0},     {8, 1, 128, 0},
    {32, 32, 64, 7},  {16, 4, 80, 0},     {12, 2, 96, 7},  {32, 1, 128, 4096}, {16, 16, 256, 0},
    {8, 1, 256, 0},   {16, 8, 256, 4096}, {12, 4, 256, 7},
};

// Decode: the last token of every sequence, plus three more tokens of the 83-long sequence.
Batch decode_batch() {
  Batch b;
  for (size_t i = 0; i < kLens.size(); ++i) b.add_chunk(int(i), kLens[i] - 1, kLens[i]);
  b.add_chunk(2, 60, 63);
  return b;
}

// Decode of the last token of each of `seqs` sequences of length `len`.
Batch last_tokens(int seqs, int len) {
  Batch b;
  for (int i = 0; i < seqs; ++i) b.add_chunk(i, len - 1, len);
  return b;
}

// Prefill: whole short prompts and chunks with cached context before them.
Batch prefill_batch() {
  Batch b;
  b.add_chunk(0, 0, 1);
  b.add_chunk(1, 0, 7);
  b.add_chunk(2, 0, 83);
  b.add_chunk(3, 830, 1000);
  b.add_chunk(4, 4100 - 77, 4100);
  return b;
}

template <typename T>
class PagedAttentionCuda : public ::testing::Test {};
using Types = ::testing::Types<__half, __nv_bfloat16>;
TYPED_TEST_SUITE(PagedAttentionCuda, Types);

TYPED_TEST(PagedAttentionCuda, DecodeMatchesCpu) {
  LMX_REQUIRE_GPU();
  uint32_t seed = 1;
  for (const Shape& s : kShapes) check<TypeParam>(s, decode_batch(), Kernel::kDecode, seed++);
}

// Groups of 1 and 2 (the per-warp decode kernel) at every head_dim, with and without windows.
TYPED_TEST(PagedAttentionCuda, DecodeSmallGroupsMatchCpu) {
  LMX_REQUIRE_GPU();
  const Shape shapes[] = {{16, 8, 80, 0},  {8, 4, 96, 4096}, {12, 12, 96, 7}, {16, 16, 80, 4096},
                          {32, 16, 64, 0}, {32, 16, 128, 7}, {16, 8, 256, 7}, {8, 8, 256, 4096}};
  uint32_t seed = 40;
  for (const Shape& s : shapes) check<TypeParam>(s, decode_batch(), Kernel::kDecode, seed++);
}

// Groups of 3-16 at head_dim <= 128 without ALiBi (the tensor-core kernel,
// kernels/cuda/attention_decode_mma.cu): groups 3, 16, 5, 7 and 12 (rows of the mma past the
// group left zero), windows, 16-bit and fp8 caches, and the Llama-3-8B shape at batch 32 x 2048
// (its split plan: partials merged by the reduce kernel).
TYPED_TEST(PagedAttentionCuda, DecodeTensorCoreGroupsMatchCpu) {
  LMX_REQUIRE_GPU();
  const Shape shapes[] = {
      {24, 8, 128, 0}, {16, 1, 96, 0}, {40, 8, 64, 4096}, {56, 8, 128, 7}, {48, 4, 80, 0}};
  uint32_t seed = 60;
  for (const Shape& s : shapes) {
    check<TypeParam>(s, decode_batch(), Kernel::kDecode, seed++);
    check<TypeParam, __nv_fp8_e4m3>(s, decode_batch(), Kernel::kDecode, seed++);
  }
  const Shape llama3{32, 8, 128, 0};
  const std::vector<int> lens(32, 2048);
  check<TypeParam>(llama3, last_tokens(32, 2048), Kernel::kDecode, seed++, lens);
  check<TypeParam, __nv_fp8_e4m3>(llama3, last_tokens(32, 2048), Kernel::kDecode, seed++, lens);
}

// The benchmark's MHA decode shapes (Llama-2-7B): batch 1 at short and long contexts (4 and 8
// splits merged in a cluster), batch 32 x 512 (1 split), a short single sequence (1 split) and
// a windowed one.
TYPED_TEST(PagedAttentionCuda, DecodeMhaBatchesMatchCpu) {
  LMX_REQUIRE_GPU();
  const Shape mha{32, 32, 128, 0};
  check<TypeParam>(mha, last_tokens(1, 512), Kernel::kDecode, 50, {512});
  check<TypeParam>(mha, last_tokens(1, 8192), Kernel::kDecode, 51, {8192});
  check<TypeParam>(mha, last_tokens(32, 512), Kernel::kDecode, 52, std::vector<int>(32, 512));
  check<TypeParam>(mha, last_tokens(1, 100), Kernel::kDecode, 53, {100});
  check<TypeParam>({32, 32, 128, 1000}, last_tokens(1, 3000), Kernel::kDecode, 54, {3000});
  // GPT-J-6B (16 / 16 / 256): the per-warp kernel at 1 CTA an SM, clusters of 8 and 1 split.
  const Shape gptj{16, 16, 256, 0};
  check<TypeParam>(gptj, last_tokens(1, 8192), Kernel::kDecode, 55, {8192});
  check<TypeParam>(gptj, last_tokens(32, 512), Kernel::kDecode, 56, std::vector<int>(32, 512));
}

TYPED_TEST(PagedAttentionCuda, DecodeWithUnderstatedMaxContextMatchesCpu) {
  LMX_REQUIRE_GPU();
  check<TypeParam>({32, 8, 128, 0}, decode_batch(), Kernel::kDecodeShortMaxContext, 7);
  check<TypeParam>({8, 1, 64, 4096}, decode_batch(), Kernel::kDecodeShortMaxContext, 8);
  check<TypeParam>({32, 32, 128, 0}, decode_batch(), Kernel::kDecodeShortMaxContext, 9);
  check<TypeParam>({16, 8, 96, 4096}, decode_batch(), Kernel::kDecodeShortMaxContext, 10);
  check<TypeParam>({8, 1, 256, 0}, decode_batch(), Kernel::kDecodeShortMaxContext, 14);
}

TYPED_TEST(PagedAttentionCuda, DecodeKernelOnPrefillChunksMatchesCpu) {
  LMX_REQUIRE_GPU();
  check<TypeParam>({32, 8, 128, 0}, prefill_batch(), Kernel::kDecode, 11);
  check<TypeParam>({8, 1, 64, 7}, prefill_batch(), Kernel::kDecode, 12);
  check<TypeParam>({32, 32, 128, 0}, prefill_batch(), Kernel::kDecode, 13);
}

TYPED_TEST(PagedAttentionCuda, PrefillMatchesCpu) {
  LMX_REQUIRE_GPU();
  uint32_t seed = 100;
  for (const Shape& s : kShapes) check<TypeParam>(s, prefill_batch(), Kernel::kPrefill, seed++);
}

// The mma.sync kernel where the wgmma one runs on Hopper (16-bit caches), and a whole 1000-token
// prompt in 8 q tiles through both (tiles masked on the diagonal, unmasked ones below it).
TYPED_TEST(PagedAttentionCuda, PrefillMmaSyncMatchesCpu) {
  LMX_REQUIRE_GPU();
  uint32_t seed = 140;
  for (const Shape& s : kShapes)
    check<TypeParam>(s, prefill_batch(), Kernel::kPrefillMmaSync, seed++);
}

TYPED_TEST(PagedAttentionCuda, PrefillOfAWholePromptMatchesCpu) {
  LMX_REQUIRE_GPU();
  Batch whole;
  whole.add_chunk(3, 0, 1000);
  uint32_t seed = 170;
  for (const Shape& s : {Shape{8, 2, 128, 0}, Shape{8, 8, 64, 300}})
    for (Kernel kernel : {Kernel::kPrefill, Kernel::kPrefillMmaSync})
      check<TypeParam>(s, whole, kernel, seed++);
}

// Cache blocks of other sizes: 8, 32 and 128 keys (on Hopper the TMA-fed wgmma kernel loads one
// box a block, 16-bit caches with blocks that divide its 128-key tile) and 24 (does not divide a
// tile: the cp.async wgmma kernel), each through the best kernel and mma.sync.
TYPED_TEST(PagedAttentionCuda, PrefillOverOtherBlockSizesMatchesCpu) {
  LMX_REQUIRE_GPU();
  uint32_t seed = 190;
  for (int block : {8, 32, 128, 24})
    for (Shape s : {Shape{32, 8, 128, 4096}, Shape{8, 1, 64, 7}, Shape{16, 16, 128, 0, true}}) {
      s.block_size = block;
      for (Kernel kernel : {Kernel::kPrefill, Kernel::kPrefillMmaSync})
        check<TypeParam>(s, prefill_batch(), kernel, seed++);
    }
}

// fp8 (E4M3) caches: the decode kernels (both variants, split plans of the MHA shapes, windows)
// and the prefill kernel, against the reference over the same E4M3 values.
using KvFp8 = __nv_fp8_e4m3;

TYPED_TEST(PagedAttentionCuda, DecodeOverFp8CacheMatchesCpu) {
  LMX_REQUIRE_GPU();
  uint32_t seed = 200;
  for (const Shape& s : kShapes)
    check<TypeParam, KvFp8>(s, decode_batch(), Kernel::kDecode, seed++);
  check<TypeParam, KvFp8>({16, 8, 80, 0}, decode_batch(), Kernel::kDecode, seed++);
  check<TypeParam, KvFp8>({12, 12, 96, 7}, decode_batch(), Kernel::kDecode, seed++);
  check<TypeParam, KvFp8>({32, 16, 64, 0}, decode_batch(), Kernel::kDecodeShortMaxContext, seed++);
  const Shape mha{32, 32, 128, 0};
  check<TypeParam, KvFp8>(mha, last_tokens(1, 8192), Kernel::kDecode, seed++, {8192});
  check<TypeParam, KvFp8>(mha, last_tokens(32, 512), Kernel::kDecode, seed++,
                          std::vector<int>(32, 512));
  check<TypeParam, KvFp8>({16, 16, 256, 0}, last_tokens(1, 8192), Kernel::kDecode, seed++, {8192});
  check<TypeParam, KvFp8>({16, 8, 256, 7}, decode_batch(), Kernel::kDecode, seed++);
}

// Both prefill kernels (on Hopper, head_dim 64 / 128: wgmma, widening staged bytes, and mma.sync),
// and a whole 1000-token prompt.
TYPED_TEST(PagedAttentionCuda, PrefillOverFp8CacheMatchesCpu) {
  LMX_REQUIRE_GPU();
  uint32_t seed = 300;
  for (Kernel kernel : {Kernel::kPrefill, Kernel::kPrefillMmaSync})
    for (const Shape& s : kShapes) check<TypeParam, KvFp8>(s, prefill_batch(), kernel, seed++);
  Batch whole;
  whole.add_chunk(3, 0, 1000);
  for (Kernel kernel : {Kernel::kPrefill, Kernel::kPrefillMmaSync})
    check<TypeParam, KvFp8>({8, 2, 128, 0}, whole, kernel, seed++);
}

// fp8 caches with per-layer scales (kernels/kv_dtype.h): K's folded into the score scale, V's
// into the output's normalization, in every kernel and every decode variant (per-warp with and
// without a cluster merge, workspace-merged), with ALiBi too. Powers of two (what calibration
// picks) and a checkpoint-style 0.37: the reference's dequantized cache is exact for the former
// and one fp32 rounding away for the latter, far below the tolerances. k_scale 4 makes the
// scores 4x sharper than the unscaled cases, still within the same fp32 score arithmetic.
TYPED_TEST(PagedAttentionCuda, ScaledFp8CacheMatchesCpuInEveryKernel) {
  LMX_REQUIRE_GPU();
  const kernels::KvScale pow2{4.0f, 64.0f}, odd{0.37f, 3.3f};
  uint32_t seed = 600;
  for (const kernels::KvScale& ks : {pow2, odd}) {
    for (const Shape& s : {Shape{32, 8, 128, 0}, Shape{32, 32, 128, 0}, Shape{12, 2, 96, 7}}) {
      check<TypeParam, KvFp8>(s, decode_batch(), Kernel::kDecode, seed++, kLens, ks);
      check<TypeParam, KvFp8>(s, prefill_batch(), Kernel::kPrefill, seed++, kLens, ks);
      check<TypeParam, KvFp8>(s, prefill_batch(), Kernel::kPrefillMmaSync, seed++, kLens, ks);
    }
    check<TypeParam, KvFp8>({32, 16, 64, 0}, decode_batch(), Kernel::kDecodeShortMaxContext, seed++,
                            kLens, ks);
    check<TypeParam, KvFp8>({32, 32, 128, 0}, last_tokens(1, 8192), Kernel::kDecode, seed++, {8192},
                            ks);
    check<TypeParam, KvFp8>({16, 16, 256, 0}, decode_batch(), Kernel::kDecode, seed++, kLens, ks);
    check<TypeParam, KvFp8>({12, 4, 64, 7, true}, decode_batch(), Kernel::kDecode, seed++, kLens,
                            ks);
    check<TypeParam, KvFp8>({12, 4, 64, 7, true}, prefill_batch(), Kernel::kPrefill, seed++, kLens,
                            ks);
    check<TypeParam, KvFp8>({6, 2, 40, 0, true}, decode_batch(), Kernel::kGeneric, seed++, kLens,
                            ks);
    check<TypeParam, KvFp8>({8, 2, 128, 0}, decode_batch(), Kernel::kGeneric, seed++, kLens, ks);
  }
}

// ALiBi shapes: Bloom-560m (16/16/64) and Bloom-7b1 (32/32/128), 6 and 12 heads (slopes from the
// extra base), every decode variant (groups 1 and 2: per-warp kernel; 3, 6: workspace-merged
// kernel), MQA, windows 7, 1000 and 4096, head_dim 64 to 256.
const Shape kAlibiShapes[] = {
    {16, 16, 64, 0, true}, {32, 32, 128, 1000, true}, {6, 6, 64, 0, true},
    {6, 3, 128, 7, true},  {6, 2, 80, 4096, true},    {6, 1, 96, 0, true},
    {12, 4, 64, 7, true},  {32, 8, 128, 0, true},     {6, 6, 256, 0, true},
    {6, 3, 256, 7, true},  {12, 4, 256, 4096, true},
};

// Batches of 1, 7 and 83 tokens: one decode token, the last 7 tokens of the 4100-long sequence,
// the whole 83-long sequence (as independent tokens for decode / generic, one chunk for prefill).
std::vector<Batch> odd_batches() {
  std::vector<Batch> b(3);
  b[0].add_chunk(3, 999, 1000);
  b[1].add_chunk(4, 4093, 4100);
  b[2].add_chunk(2, 0, 83);
  return b;
}

template <typename T, typename C>
void check_alibi(Kernel kernel, uint32_t seed) {
  // Generic: the decode batch, whose reference is cheap (odd_batches adds 83 prefill tokens).
  const bool prefill = kernel == Kernel::kPrefill || kernel == Kernel::kPrefillMmaSync;
  const Batch main_batch = prefill ? prefill_batch() : decode_batch();
  for (const Shape& s : kAlibiShapes) check<T, C>(s, main_batch, kernel, seed++);
  for (const Batch& b : odd_batches()) {
    check<T, C>({6, 6, 64, 0, true}, b, kernel, seed++);
    check<T, C>({12, 4, 128, 7, true}, b, kernel, seed++);
  }
}

TYPED_TEST(PagedAttentionCuda, AlibiDecodeMatchesCpu) {
  LMX_REQUIRE_GPU();
  check_alibi<TypeParam, TypeParam>(Kernel::kDecode, 400);
  // Bloom-7b1 batch 1 x 8192 (8 splits merged in a cluster); the workspace merge with fewer
  // splits than planned (understated max_context), MHA and GQA.
  check<TypeParam>({32, 32, 128, 0, true}, last_tokens(1, 8192), Kernel::kDecode, 420, {8192});
  check<TypeParam>({6, 2, 80, 0, true}, decode_batch(), Kernel::kDecodeShortMaxContext, 421);
  check<TypeParam>({16, 16, 64, 0, true}, decode_batch(), Kernel::kDecodeShortMaxContext, 422);
}

TYPED_TEST(PagedAttentionCuda, AlibiDecodeOverFp8CacheMatchesCpu) {
  LMX_REQUIRE_GPU();
  check_alibi<TypeParam, KvFp8>(Kernel::kDecode, 430);
  check<TypeParam, KvFp8>({32, 32, 128, 0, true}, last_tokens(1, 8192), Kernel::kDecode, 450,
                          {8192});
}

// mma.sync: 32/32/128 and 32/8/128 take the 128-row tiles (>= 264 CTAs), the other shapes
// 64-row ones. On Hopper kPrefill runs head_dim 64 and 128 through the wgmma kernel.
TYPED_TEST(PagedAttentionCuda, AlibiPrefillMatchesCpu) {
  LMX_REQUIRE_GPU();
  check_alibi<TypeParam, TypeParam>(Kernel::kPrefill, 460);
  check_alibi<TypeParam, TypeParam>(Kernel::kPrefillMmaSync, 470);
}

TYPED_TEST(PagedAttentionCuda, AlibiPrefillOverFp8CacheMatchesCpu) {
  LMX_REQUIRE_GPU();
  check_alibi<TypeParam, KvFp8>(Kernel::kPrefill, 490);
  check_alibi<TypeParam, KvFp8>(Kernel::kPrefillMmaSync, 500);
}

// The generic kernel (any head_dim <= 256): the tuned dims and odd ones, with and without ALiBi.
TYPED_TEST(PagedAttentionCuda, GenericMatchesCpu) {
  LMX_REQUIRE_GPU();
  check_alibi<TypeParam, TypeParam>(Kernel::kGeneric, 520);
  check_alibi<TypeParam, KvFp8>(Kernel::kGeneric, 540);
  uint32_t seed = 560;
  for (const Shape& s : {Shape{6, 2, 40, 0, true}, Shape{6, 6, 16, 7, true}, Shape{4, 2, 8, 0},
                         Shape{8, 2, 256, 4096, true}, Shape{12, 4, 96, 0}})
    check<TypeParam>(s, decode_batch(), Kernel::kGeneric, seed++);
}

}  // namespace
}  // namespace lmx
