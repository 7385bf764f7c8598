// CUDA element-wise / row ops vs their CPU references, every dtype, odd and large sizes
// (tokens 1, 7, 83; hidden 67, 4096, 5120, plus rows long enough for the norms' fallback path).
// Outputs are poisoned with NaN first, so an unwritten element fails. Tolerances: Tol<T> in
// cuda_test_util.h (one rounding of an fp32 result to T); copies are compared exactly.
#include <cuda_fp8.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "kernels/activation.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/norm.h"
#include "kernels/rope_kv.h"
#include "tests/kernels/cuda_test_util.h"

namespace lmx {
namespace {

using test::Dev;
using test::rel_l2;
using test::Tol;
namespace cpu = kernels::cpu;
namespace gpu = kernels::cuda;

template <typename T>
class CudaOps : public ::testing::Test {};
using Types = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(CudaOps, Types);

const std::pair<int, int> kSizes[] = {{1, 67}, {7, 4096}, {83, 5120}, {3, 67}, {2, 5121}};

TYPED_TEST(CudaOps, Embedding) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  for (auto [tokens, hidden] : kSizes) {
    for (bool learned : {false, true}) {
      std::mt19937 rng(tokens * 7 + hidden);
      const int vocab = 101, max_pos = 33;
      auto table = test::randn<T>(size_t(vocab) * hidden, rng);
      auto ptable = test::randn<T>(size_t(max_pos) * hidden, rng);
      std::vector<int32_t> ids(tokens), pos(tokens);
      for (int t = 0; t < tokens; ++t) ids[t] = int32_t(rng() % vocab), pos[t] = int32_t(rng() % max_pos);
      std::vector<float> ref(size_t(tokens) * hidden);
      cpu::embedding(ids.data(), table.data(), pos.data(), learned ? ptable.data() : nullptr,
                     ref.data(), tokens, hidden);
      Dev<T> dt(table.size()), dp(ptable.size()), dout(ref.size());
      Dev<int32_t> di(tokens), dpos(tokens);
      dt.upload(table), dp.upload(ptable), di.upload(ids), dpos.upload(pos);
      gpu::embedding<T>(di.p, dt.p, dpos.p, learned ? dp.p : nullptr, dout.p, tokens, hidden,
                        nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      // A copy is exact; the learned-position sum is rounded once.
      EXPECT_LE(rel_l2(dout.download_f(), ref), learned ? Tol<T>::rel : 0.0)
          << tokens << "x" << hidden << " learned=" << learned;
    }
  }
}

TYPED_TEST(CudaOps, GatherRowsAndBiasAdd) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  for (auto [tokens, cols] : kSizes) {
    std::mt19937 rng(tokens * 11 + cols);
    auto x = test::randn<T>(size_t(tokens) * cols, rng);
    auto bias = test::randn<T>(cols, rng);
    auto res = test::randn<T>(x.size(), rng);
    Dev<T> dx(x.size()), db(cols), dr(x.size()), dout(x.size());
    dx.upload(x), db.upload(bias), dr.upload(res);

    std::vector<int32_t> rows(std::max(1, tokens / 2));
    for (auto& r : rows) r = int32_t(rng() % tokens);
    std::vector<float> gref(rows.size() * cols);
    cpu::gather_rows(x.data(), rows.data(), gref.data(), int(rows.size()), cols);
    Dev<int32_t> drows(rows.size());
    Dev<T> dg(gref.size());
    drows.upload(rows);
    gpu::gather_rows<T>(dx.p, drows.p, dg.p, int(rows.size()), cols, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(rel_l2(dg.download_f(), gref), 0.0) << tokens << "x" << cols;

    for (bool with_res : {false, true}) {
      std::vector<float> ref(x.size());
      cpu::bias_add(x.data(), bias.data(), with_res ? res.data() : nullptr, ref.data(), tokens,
                    cols);
      dout.poison();
      gpu::bias_add<T>(dx.p, db.p, with_res ? dr.p : nullptr, dout.p, tokens, cols, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_LE(rel_l2(dout.download_f(), ref), Tol<T>::rel) << tokens << "x" << cols;
    }
  }
}

TYPED_TEST(CudaOps, AddNorms) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  auto sizes = std::vector<std::pair<int, int>>(std::begin(kSizes), std::end(kSizes));
  sizes.push_back({2, 40000});  // past the register-cached row: the long-row kernel
  for (auto [rows, cols] : sizes) {
    for (int variant = 0; variant < 4; ++variant) {  // bit 0: layer norm; bit 1: residual add
      const bool layer = variant & 1, add = variant & 2;
      std::mt19937 rng(rows * 13 + cols + variant);
      auto res = test::randn<T>(size_t(rows) * cols, rng, 1.0f, 0.5f);
      auto x = test::randn<T>(res.size(), rng);
      auto w = test::randn<T>(cols, rng, 0.2f, 1.0f);
      auto b = test::randn<T>(cols, rng, 0.1f);
      std::vector<float> ref_res = res, ref(res.size());
      if (layer)
        cpu::add_layer_norm(ref_res.data(), add ? x.data() : nullptr, w.data(), b.data(),
                            ref.data(), rows, cols, 1e-5f);
      else
        cpu::add_rms_norm(ref_res.data(), add ? x.data() : nullptr, w.data(), ref.data(), rows,
                          cols, 1e-6f);
      Dev<T> dres(res.size()), dx(x.size()), dw(cols), db(cols), dout(res.size());
      dres.upload(res), dx.upload(x), dw.upload(w), db.upload(b);
      if (layer)
        gpu::add_layer_norm<T>(dres.p, add ? dx.p : nullptr, dw.p, db.p, dout.p, rows, cols,
                               1e-5f, nullptr);
      else
        gpu::add_rms_norm<T>(dres.p, add ? dx.p : nullptr, dw.p, dout.p, rows, cols, 1e-6f,
                             nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_LE(rel_l2(dres.download_f(), ref_res), Tol<T>::rel)
          << rows << "x" << cols << " variant " << variant;
      EXPECT_LE(rel_l2(dout.download_f(), ref), Tol<T>::rel)
          << rows << "x" << cols << " variant " << variant;
      if (!add) {  // the plain launchers
        dout.poison();
        if (layer)
          gpu::layer_norm<T>(dres.p, dw.p, db.p, dout.p, rows, cols, 1e-5f, nullptr);
        else
          gpu::rms_norm<T>(dres.p, dw.p, dout.p, rows, cols, 1e-6f, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_LE(rel_l2(dout.download_f(), ref), Tol<T>::rel) << rows << "x" << cols;
      }
    }
  }
}

TYPED_TEST(CudaOps, Activations) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  using kernels::ActivationKind;
  for (auto [tokens, inter] : kSizes) {
    for (ActivationKind kind : {ActivationKind::Silu, ActivationKind::GeluTanh,
                                ActivationKind::GeluExact, ActivationKind::Relu}) {
      for (bool gated : {false, true}) {
        for (bool with_bias : {false, true}) {
          std::mt19937 rng(tokens * 17 + inter + int(kind));
          const size_t width = size_t(gated ? 2 : 1) * inter;
          auto in = test::randn<T>(tokens * width, rng, 2.0f);
          auto bias = test::randn<T>(width, rng, 0.5f);
          std::vector<float> ref(size_t(tokens) * inter);
          if (gated)
            cpu::bias_gated_act(kind, in.data(), with_bias ? bias.data() : nullptr, ref.data(),
                                tokens, inter);
          else
            cpu::bias_act(kind, in.data(), with_bias ? bias.data() : nullptr, ref.data(), tokens,
                          inter);
          Dev<T> din(in.size()), db(width), dout(ref.size());
          din.upload(in), db.upload(bias);
          const T* bp = with_bias ? db.p : nullptr;
          if (gated) {
            if (with_bias)
              gpu::bias_gated_act<T>(kind, din.p, bp, dout.p, tokens, inter, nullptr);
            else
              gpu::gated_act<T>(kind, din.p, dout.p, tokens, inter, nullptr);
          } else {
            if (with_bias)
              gpu::bias_act<T>(kind, din.p, bp, dout.p, tokens, inter, nullptr);
            else
              gpu::act<T>(kind, din.p, dout.p, tokens, inter, nullptr);
          }
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          EXPECT_LE(rel_l2(dout.download_f(), ref), Tol<T>::rel)
              << tokens << "x" << inter << " kind " << int(kind) << " gated " << gated
              << " bias " << with_bias;
        }
      }
    }
  }
}

// One cache type C of the rope + KV-write test below: inputs of standard deviation `amplitude`,
// the cache with dequantization scales `scale` (the GPU's codes times them against the CPU's
// fp32 cache, which holds the dequantized values).
template <typename T, typename C>
void run_rope_write_kv(kernels::KvDtype storage, double cache_tol, float amplitude = 1.0f,
                       kernels::KvScale scale = {}) {
  struct Cfg {
    int heads, kv_heads, head_dim, rotary_dim;
    bool bias;
  };
  for (Cfg c : {Cfg{8, 2, 64, 64, false}, Cfg{4, 4, 80, 32, true}, Cfg{6, 1, 128, 128, true},
                Cfg{3, 3, 64, 0, true}}) {
    // Rows padded by 5 take the kernel's one-column units; by 8, its 8-column units (16-byte
    // accesses) wherever the head layout splits into groups of 8.
    for (auto [tokens, pad] : {std::pair{1, 5}, {7, 5}, {83, 5}, {1, 8}, {7, 8}, {83, 8}}) {
      std::mt19937 rng(tokens * 19 + c.head_dim + c.rotary_dim);
      const int seqs = 3, block_size = 16, max_blocks = 400, num_blocks = 64;
      const kernels::PagedKvLayout L{block_size, c.kv_heads, c.head_dim, max_blocks, scale};
      const int q_size = c.heads * c.head_dim, kv_size = c.kv_heads * c.head_dim;
      const int stride = q_size + 2 * kv_size + pad;
      auto qkv = test::randn<T>(size_t(tokens) * stride, rng, amplitude);
      auto bias = test::randn<T>(q_size + 2 * kv_size, rng, 0.3f);
      std::vector<float> inv_freq(std::max(1, c.rotary_dim / 2));
      for (int i = 0; i < c.rotary_dim / 2; ++i)
        inv_freq[i] = std::pow(10000.0f, -2.0f * i / float(c.rotary_dim));
      // Block tables: distinct (seq, pos) per token, some positions large (angle precision, and
      // table entries up to 314 of a 400-entry row), some tokens padding (seq -1). The blocks the
      // tokens use (at most 7) get distinct blocks of a scrambled pool of num_blocks; the other
      // entries are -1 (never read). Cost: the pool was the 1,200 blocks of a full permutation
      // (up to 6.1M cache slots a case, allocated, downloaded and scanned 144 times a type); 64
      // blocks still leave most of the cache unwritten, so stray writes show.
      std::vector<int32_t> tables(size_t(seqs) * max_blocks, -1), pool(num_blocks);
      std::iota(pool.begin(), pool.end(), 0);
      std::shuffle(pool.begin(), pool.end(), rng);
      std::vector<int32_t> seq(tokens), pos(tokens);
      int next[seqs] = {0, 17, 5000};
      size_t used = 0;
      for (int t = 0; t < tokens; ++t) {
        seq[t] = t % seqs;
        pos[t] = next[seq[t]]++;
        int32_t& entry = tables[size_t(seq[t]) * max_blocks + pos[t] / block_size];
        if (entry < 0) entry = pool.at(used++);
        if (t % 10 == 9) seq[t] = -1;
      }
      const size_t cache_n = size_t(num_blocks) * block_size * kv_size;
      std::vector<float> ref_qkv = qkv, kc(cache_n, NAN), vc(cache_n, NAN);
      cpu::rope_write_kv(ref_qkv.data(), stride, c.bias ? bias.data() : nullptr, pos.data(),
                         c.rotary_dim ? inv_freq.data() : nullptr, c.rotary_dim, c.heads,
                         kc.data(), vc.data(), tables.data(), seq.data(), tokens, L, storage);
      Dev<T> dqkv(qkv.size()), db(bias.size());
      Dev<C> dkc(cache_n), dvc(cache_n);
      Dev<float> dfreq(inv_freq.size());
      Dev<int32_t> dtab(tables.size()), dseq(tokens), dpos(tokens);
      dqkv.upload(qkv), db.upload(bias), dfreq.upload(inv_freq), dtab.upload(tables);
      dseq.upload(seq), dpos.upload(pos);
      gpu::rope_write_kv<T>(dqkv.p, stride, c.bias ? db.p : nullptr, dpos.p,
                            c.rotary_dim ? dfreq.p : nullptr, c.rotary_dim, c.heads, dkc.p, dvc.p,
                            dtab.p, dseq.p, tokens, L, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const auto got_qkv = dqkv.download_f();
      // Compare q|k|v columns (the padding columns are untouched copies).
      EXPECT_LE(rel_l2(got_qkv, ref_qkv), Tol<T>::rel) << "qkv, tokens " << tokens << ", pad " << pad;
      // Cache: every slot the reference wrote must match; every other slot must stay NaN.
      const auto gk = dkc.download_f(), gv = dvc.download_f();
      std::vector<float> wk, rk, wv, rv;
      size_t stray = 0;
      for (size_t i = 0; i < cache_n; ++i) {
        if (std::isnan(kc[i])) {
          stray += !std::isnan(gk[i]) + !std::isnan(gv[i]);
          continue;
        }
        wk.push_back(gk[i] * scale.k), rk.push_back(kc[i]);
        wv.push_back(gv[i] * scale.v), rv.push_back(vc[i]);
      }
      EXPECT_EQ(stray, 0u) << "writes outside the token slots";
      EXPECT_GT(rk.size(), 0u);
      EXPECT_LE(rel_l2(wk, rk), cache_tol) << "k cache, tokens " << tokens << ", pad " << pad;
      EXPECT_LE(rel_l2(wv, rv), cache_tol) << "v cache, tokens " << tokens << ", pad " << pad;
      if (::testing::Test::HasFailure()) return;  // one failing case is enough to read
    }
  }
}

// Rotary + qkv bias + paged KV write against cpu::rope_write_kv, into a cache of T and into an
// fp8 (E4M3) cache (the reference stores round_to_e4m3 of its fp32 values; the kernel rounds its
// own fp32 values once, so a value whose fp32 result differs in the last bit can round to the
// neighbouring E4M3 value: tolerance 5e-3 there).
TYPED_TEST(CudaOps, RopeWriteKvMatchesCpuAndWritesOnlyTokenSlots) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  run_rope_write_kv<T, T>(kernels::KvDtype::model, Tol<T>::rel);
  run_rope_write_kv<T, __nv_fp8_e4m3>(kernels::KvDtype::fp8_e4m3, std::max(Tol<T>::rel, 5e-3));
}

// The fp8 cache with per-layer scales (kernels/kv_dtype.h): K and V of standard deviation 300
// (beyond 448 often: scale 1 would saturate them) stored as codes of x / 8 and x / 16, against
// the CPU reference's round_to_e4m3(x, scale); same tolerance as the unscaled fp8 cache (the
// scales are powers of two, so they add no rounding).
TYPED_TEST(CudaOps, RopeWriteKvIntoScaledFp8Cache) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  run_rope_write_kv<T, __nv_fp8_e4m3>(kernels::KvDtype::fp8_e4m3, std::max(Tol<T>::rel, 5e-3),
                                      300.0f, {8.0f, 16.0f});
}

}  // namespace
}  // namespace lmx
