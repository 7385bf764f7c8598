// GPU sampling vs the CPU reference (kernels/sampling.h).
// - Greedy ids equal the CPU's exactly (same fp32 penalty arithmetic, lowest index on ties).
// - logprob within 1e-5 * max(1, |logprob|) + 1e-5: both are log_softmax of the same fp32 row,
//   summed in a different order (fp32 on the GPU, fp64 on the CPU): a relative error ~1e-6.
// - Non-greedy draws use the same Philox stream as the CPU reference, so ids agree except where
//   the GPU's and the host's expf/logf differ by an ulp right at a decision: >= 97% agreement.
// - Distribution: 32768 draws of one row against softmax of the filtered logits
//   (cpu::sampling_probs): no draw outside the kept set, chi-square within a 1e-6-level bound.
// - Replay: the same (seed, step) draws the same ids.
#include <map>

#include "kernels/sampling.h"
#include "tests/kernels/cuda_test_util.h"

namespace lmx {
namespace {

using kernels::SamplingRow;
using test::Dev;

struct Batch {
  int n, vocab, prev_stride;
  std::vector<float> logits;
  std::vector<SamplingRow> params;
  std::vector<int32_t> prev, prev_len;
};

Batch make_batch(int n, int vocab, uint32_t seed, bool greedy) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  Batch b{n, vocab, 40, {}, {}, {}, {}};
  b.logits.resize(size_t(n) * vocab);
  for (float& l : b.logits) l = d(rng);
  for (int r = 0; r < n; r += 5)  // exact ties on a few rows
    b.logits[size_t(r) * vocab + rng() % vocab] = b.logits[size_t(r) * vocab + rng() % vocab] = 30.0f;
  b.prev.resize(size_t(n) * b.prev_stride);
  b.prev_len.resize(n);
  for (int r = 0; r < n; ++r) {
    SamplingRow p;
    p.seed = rng();
    p.step = r;
    p.greedy = greedy;
    p.temperature = 0.5f + 0.25f * (r % 5);
    p.top_k = (r % 3 == 0) ? 0 : int32_t(1 + rng() % 60);
    p.top_p = (r % 4 == 0) ? 1.0f : 0.5f + 0.1f * (r % 5);
    p.repetition_penalty = (r % 2) ? 1.3f : 1.0f;
    b.params.push_back(p);
    b.prev_len[r] = int32_t(rng() % b.prev_stride);
    for (int i = 0; i < b.prev_stride; ++i)  // duplicates and out-of-range ids included
      b.prev[size_t(r) * b.prev_stride + i] = int32_t(rng() % (vocab + 3)) - 1;
  }
  return b;
}

struct Result {
  std::vector<int32_t> ids;
  std::vector<float> logprob;
};

Result run_gpu(const Batch& b) {
  Dev<float> dl(b.logits.size()), dlp(b.n);
  Dev<SamplingRow> dp(b.params.size());
  Dev<int32_t> dprev(b.prev.size()), dlen(b.n), dids(b.n);
  dl.upload(b.logits);
  cudaMemcpy(dp.p, b.params.data(), b.params.size() * sizeof(SamplingRow), cudaMemcpyHostToDevice);
  dprev.upload(b.prev), dlen.upload(b.prev_len);
  kernels::cuda::sample(dl.p, b.n, b.vocab, dp.p, dprev.p, b.prev_stride, dlen.p, dids.p, dlp.p,
                        nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return {dids.download(), dlp.download()};
}

Result run_cpu(const Batch& b) {
  Result r{std::vector<int32_t>(b.n), std::vector<float>(b.n)};
  kernels::cpu::sample(b.logits.data(), b.n, b.vocab, b.params.data(), b.prev.data(),
                       b.prev_stride, b.prev_len.data(), r.ids.data(), r.logprob.data());
  return r;
}

TEST(CudaSampling, GreedyEqualsCpuArgmax) {
  LMX_REQUIRE_GPU();
  for (int vocab : {67, 32000, 151936}) {
    for (int n : {1, 7, 83}) {
      const Batch b = make_batch(n, vocab, uint32_t(vocab + n), true);
      const Result g = run_gpu(b), c = run_cpu(b);
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(g.ids[r], c.ids[r]) << "row " << r << " vocab " << vocab;
        EXPECT_NEAR(g.logprob[r], c.logprob[r], 1e-5 * std::max(1.0f, std::fabs(c.logprob[r])) + 1e-5)
            << "row " << r << " vocab " << vocab;
      }
    }
  }
}

TEST(CudaSampling, DrawsMatchCpuReferenceAndReplay) {
  LMX_REQUIRE_GPU();
  for (int vocab : {67, 32000, 151936}) {
    const int n = 83;
    const Batch b = make_batch(n, vocab, uint32_t(vocab * 3), false);
    const Result g = run_gpu(b), g2 = run_gpu(b), c = run_cpu(b);
    int agree = 0;
    for (int r = 0; r < n; ++r) {
      agree += g.ids[r] == c.ids[r];
      EXPECT_EQ(g.ids[r], g2.ids[r]) << "replay differs, row " << r;
      EXPECT_NEAR(g.logprob[r], c.logprob[r], 1e-5 * std::max(1.0f, std::fabs(c.logprob[r])) + 1e-5);
      // top_k == 1 is greedy over z (= argmax of the penalized logits).
    }
    EXPECT_GE(agree, int(0.97 * n)) << "vocab " << vocab;
  }
}

TEST(CudaSampling, FrequenciesFollowFilteredSoftmax) {
  LMX_REQUIRE_GPU();
  struct Cfg {
    float temperature, top_p, penalty;
    int top_k;
  };
  for (Cfg cfg : {Cfg{1.0f, 1.0f, 1.0f, 0}, Cfg{1.5f, 0.8f, 1.2f, 20}, Cfg{0.7f, 0.9f, 1.0f, 0},
                  Cfg{1.0f, 1.0f, 1.0f, 5}}) {
    const int vocab = 67, n = 4096, launches = 8;
    std::mt19937 rng(7);
    std::normal_distribution<float> d(0.0f, 1.5f);
    std::vector<float> row(vocab);
    for (float& l : row) l = d(rng);
    std::vector<int32_t> hist = {3, 5, 5, 9, 60, 2};
    SamplingRow p;
    p.greedy = 0;
    p.temperature = cfg.temperature;
    p.top_p = cfg.top_p;
    p.top_k = cfg.top_k;
    p.repetition_penalty = cfg.penalty;
    p.seed = 1234;
    std::vector<double> probs(vocab);
    kernels::cpu::sampling_probs(row.data(), vocab, p, hist.data(), int(hist.size()), probs.data());

    Batch b{n, vocab, int(hist.size()), {}, {}, {}, {}};
    for (int r = 0; r < n; ++r) {
      b.logits.insert(b.logits.end(), row.begin(), row.end());
      b.prev.insert(b.prev.end(), hist.begin(), hist.end());
      b.prev_len.push_back(int32_t(hist.size()));
    }
    std::vector<int64_t> count(vocab, 0);
    for (int l = 0; l < launches; ++l) {
      b.params.assign(n, p);
      for (int r = 0; r < n; ++r) b.params[r].step = uint64_t(l) * n + r;
      for (int32_t id : run_gpu(b).ids) ++count[size_t(id)];
    }
    const double total = double(n) * launches;
    double chi2 = 0;
    int dof = -1;
    for (int i = 0; i < vocab; ++i) {
      if (probs[i] == 0) {
        EXPECT_EQ(count[i], 0) << "token " << i << " drawn but filtered out";
        continue;
      }
      const double e = probs[i] * total;
      chi2 += (count[i] - e) * (count[i] - e) / e;
      ++dof;
    }
    // Chi-square with `dof` degrees of freedom: mean dof, sd sqrt(2 dof); 6 sd + 10 is far past
    // any plausible fluctuation (p < 1e-6) yet catches a wrong filter or temperature.
    EXPECT_LT(chi2, dof + 6 * std::sqrt(2.0 * std::max(dof, 1)) + 10)
        << "T " << cfg.temperature << " top_p " << cfg.top_p << " top_k " << cfg.top_k;
  }
}

// Tensor parallelism's draw over vocabulary shards (draw_partials on each shard, combine_draws):
// the same token as sample() on the whole row on the same GPU (the same keys, in the same
// arithmetic), the log-prob within float rounding; padding columns (+inf here) are not read.
TEST(CudaSampling, ShardedDrawEqualsTheWholeRowsDraw) {
  LMX_REQUIRE_GPU();
  for (int vocab : {67, 32000, 250880}) {
    const int n = 37;
    Batch b = make_batch(n, vocab, uint32_t(vocab + 5), false);
    for (int r = 0; r < n; ++r) {  // shardable rows: no top-k / top-p / penalty
      SamplingRow& p = b.params[size_t(r)];
      p.greedy = r % 3 == 0;
      p.top_k = 0;
      p.top_p = 1.0f;
      p.repetition_penalty = 1.0f;
    }
    const Result whole = run_gpu(b);
    for (int ranks : {2, 3, 4}) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + ", ranks " + std::to_string(ranks));
      const int per = (vocab + ranks - 1) / ranks;
      Dev<SamplingRow> dp(static_cast<size_t>(n));
      cudaMemcpy(dp.p, b.params.data(), b.params.size() * sizeof(SamplingRow), cudaMemcpyHostToDevice);
      Dev<kernels::DrawPartial> parts(size_t(ranks) * n);
      for (int k = 0; k < ranks; ++k) {
        const int first = k * per, cols = std::clamp(vocab - first, 0, per);
        std::vector<float> shard(size_t(n) * per, INFINITY);
        for (int r = 0; r < n; ++r)
          std::copy_n(b.logits.begin() + ptrdiff_t(r) * vocab + first, cols,
                      shard.begin() + ptrdiff_t(r) * per);
        Dev<float> ds(shard.size());
        ds.upload(shard);
        kernels::cuda::draw_partials(ds.p, n, per, cols, first, dp.p, parts.p + size_t(k) * n, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      }
      Dev<int32_t> ids(static_cast<size_t>(n));
      Dev<float> lp(static_cast<size_t>(n));
      kernels::cuda::combine_draws(parts.p, ranks, n, ids.p, lp.p, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<int32_t> got(static_cast<size_t>(n));
      cudaMemcpy(got.data(), ids.p, got.size() * sizeof(int32_t), cudaMemcpyDeviceToHost);
      const std::vector<float> got_lp = lp.download_f();
      EXPECT_EQ(got, whole.ids);
      for (int r = 0; r < n; ++r)
        EXPECT_NEAR(got_lp[size_t(r)], whole.logprob[size_t(r)],
                    1e-5 * std::max(1.0f, std::fabs(whole.logprob[size_t(r)])) + 1e-5)
            << "row " << r;
    }
  }
}

}  // namespace
}  // namespace lmx
