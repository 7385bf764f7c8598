// option.quantize=smoothquant on the CPU reference (smoothquant/, docs/quantization.md):
// calibration statistics against a direct computation, smoothing without quantization leaving
// every family's logits equal (the folding into norms and the explicit scale are exact), the
// alpha search and plan, the calibration cache, and W8A8 end to end (backend and engine API).
#include <cmath>
#include <cstdlib>
#include <random>

#include <gtest/gtest.h>

#include "engine/api/engine.h"
#include "engine/backend/cpu_backend.h"
#include "engine/backend/cpu_smoothing_scorer.h"
#include "engine/generate/generator.h"
#include "engine/model/shard.h"
#include "engine/model/weight_map.h"
#include "engine/tokenizer/tokenizer.h"
#include "properties/serving_config.h"
#include "smoothquant/cache.h"
#include "smoothquant/calibration.h"
#include "smoothquant/plan.h"
#include "smoothquant/sharded_scorer.h"
#include "smoothquant/smoothing.h"
#include "smoothquant/smoothquant.h"
#include "tests/support/parity_fixtures.h"
#include "tests/support/served_tokens.h"

namespace lmx {
namespace {

using namespace smoothquant;
namespace fs = std::filesystem;

// Token samples in [1, vocab): random-weight fixtures have no tokenizer.
std::vector<std::vector<int32_t>> random_samples(const DecoderDesc& d,
                                                 std::vector<size_t> lengths) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> id(1, d.vocab_size - 1);
  std::vector<std::vector<int32_t>> out;
  for (const size_t n : lengths) {
    out.emplace_back(n);
    for (int32_t& t : out.back()) t = id(rng);
  }
  return out;
}

// Every position's logits of one sequence [ids, vocab].
std::vector<float> all_logits(const LoadedModel& m, const std::vector<int32_t>& ids) {
  auto backend = make_cpu_backend(m, {16, 4});
  const std::vector<int32_t> table = {0, 1, 2, 3};
  BatchChunk c{ids, 0, table, true, true};
  std::vector<float> logits;
  backend->forward(std::span(&c, 1), logits);
  return logits;
}

// Natural-log perplexity of ids[1:] given the prefixes.
double perplexity(const LoadedModel& m, const std::vector<int32_t>& ids) {
  const std::vector<float> l = all_logits(m, ids);
  const size_t V = size_t(m.desc.vocab_size);
  double nll = 0.0;
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    const float* row = l.data() + i * V;
    double mx = row[0], sum = 0.0;
    for (size_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
    for (size_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
    nll += mx + std::log(sum) - row[size_t(ids[i + 1])];
  }
  return std::exp(nll / double(ids.size() - 1));
}

// Progress (a terminal line and log lines in apply()) is told after every sample, in order.
TEST(SmoothQuantCalibration, ProgressIsToldAfterEverySample) {
  const LoadedModel m = load_model(testing::parity_dir() / "llama_mha_tied");
  const auto samples = random_samples(m.desc, {7, 13, 3});
  std::vector<std::pair<size_t, size_t>> told;
  Calibrator c(m, {}, 5, longest_sample(samples));
  c.run(samples, [&](size_t done, size_t total) { told.emplace_back(done, total); });
  EXPECT_EQ(told, (std::vector<std::pair<size_t, size_t>>{{1, 3}, {2, 3}, {3, 3}}));
}

TEST(SmoothQuantCalibration, StatisticsMatchADirectComputation) {
  // Llama (pre RMSNorm): layer 0's qkv input is rms_norm(embed[id]) * w, token by token.
  const LoadedModel m = load_model(testing::parity_dir() / "llama_mha_tied");
  const auto samples = random_samples(m.desc, {7, 13});
  Calibrator c(m, {}, 5, longest_sample(samples));
  c.run(samples);
  const std::vector<LayerStats>& stats = c.stats();
  ASSERT_EQ(stats.size(), size_t(m.desc.num_layers));
  const int H = m.desc.hidden_size;
  const std::vector<float> embed = materialize_f32(m.weights.embed);
  const std::vector<float> w = materialize_f32(m.weights.layers[0].attn_norm.weight);
  std::vector<double> expect(static_cast<size_t>(H), 0.0);
  std::vector<std::vector<double>> first_rows;
  for (const auto& s : samples)
    for (const int32_t t : s) {
      const float* e = embed.data() + size_t(t) * H;
      double ms = 0.0;
      for (int j = 0; j < H; ++j) ms += double(e[j]) * e[j];
      const double r = 1.0 / std::sqrt(ms / H + m.desc.norm_eps);
      std::vector<double> row(static_cast<size_t>(H));
      for (int j = 0; j < H; ++j) {
        row[size_t(j)] = e[j] * r * w[size_t(j)];
        expect[size_t(j)] = std::max(expect[size_t(j)], std::fabs(row[size_t(j)]));
      }
      if (first_rows.size() < 5) first_rows.push_back(row);
    }
  const InputStats& qkv = stats[0][size_t(LinearSlot::Qkv)];
  EXPECT_EQ(qkv.tokens, 20);
  ASSERT_EQ(qkv.in, H);
  ASSERT_EQ(qkv.kept(), 5);  // the cap: the first 5 rows
  for (int j = 0; j < H; ++j) {
    EXPECT_NEAR(qkv.abs_max[size_t(j)], expect[size_t(j)], 1e-5 * expect[size_t(j)] + 1e-7) << j;
    for (int r = 0; r < 5; ++r)
      EXPECT_NEAR(qkv.rows[size_t(r) * H + j], first_rows[size_t(r)][size_t(j)],
                  1e-5 * std::fabs(first_rows[size_t(r)][size_t(j)]) + 1e-6);
  }
  // Every projection of every layer was seen, at its width; o and down keep no rows.
  for (const LayerStats& l : stats) {
    EXPECT_EQ(l[size_t(LinearSlot::O)].in, m.weights.layers[0].o.in);
    EXPECT_EQ(l[size_t(LinearSlot::Down)].in, m.weights.layers[0].down.in);
    EXPECT_EQ(l[size_t(LinearSlot::Up)].tokens, 20);
    EXPECT_EQ(l[size_t(LinearSlot::Down)].kept(), 0);
  }
}

TEST(SmoothQuantFactors, FormulaAndClamps) {
  const std::vector<float> s = smoothing_factors({4.0f, 0.0f, 9.0f}, {1.0f, 2.0f, 0.0f}, 0.5);
  EXPECT_FLOAT_EQ(s[0], 2.0f);                                // 4^0.5 / 1^0.5
  EXPECT_FLOAT_EQ(s[1], std::sqrt(1e-5f) / std::sqrt(2.0f));  // act clamped to 1e-5
  EXPECT_FLOAT_EQ(s[2], 3.0f / std::sqrt(1e-5f));             // weight clamped to 1e-5
  EXPECT_FLOAT_EQ(smoothing_factors({8.0f}, {2.0f}, 1.0)[0], 8.0f);
  EXPECT_FLOAT_EQ(smoothing_factors({8.0f}, {2.0f}, 0.0)[0], 0.5f);
  EXPECT_THROW(smoothing_factors({1.0f}, {1.0f}, 1.5), Error);
  EXPECT_THROW(smoothing_factors({1.0f}, {1.0f, 2.0f}, 0.5), Error);
}

class SmoothingIsExact : public ::testing::TestWithParam<std::string> {};

// Smoothing without quantization, with factors spread over [1/20, 20]: logits equal to the
// unsmoothed model's within fp32 rounding, for every family (folded into the norms in pre-norm
// layers, an explicit scale in post-norm and residual-from-norm layers, one vector for GPT-J's
// shared norm).
TEST_P(SmoothingIsExact, LogitsUnchanged) {
  const auto f = testing::open_parity_fixture(GetParam());
  const LoadedModel ref = load_model(f.model_dir);
  LoadedModel smoothed = load_model(f.model_dir);
  Plan plan = calibrate_and_plan(smoothed, {}, random_samples(smoothed.desc, {9}), 8, 0.5);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> log_s(-3.0f, 3.0f);
  for (LayerPlan& l : plan.layers) {
    const bool shared = l.up == l.qkv;
    for (auto* s : {&l.qkv, &l.up}) {
      if (shared && s == &l.up) break;
      std::vector<float> v = **s;
      for (float& x : v) x = std::exp(log_s(rng));
      *s = std::make_shared<const std::vector<float>>(std::move(v));
    }
    if (shared) l.up = l.qkv;
  }
  mark(smoothed, plan);
  for (LayerWeights<WeightRef>& l : smoothed.weights.layers)
    for (LinearRef* p : {&l.qkv, &l.o, &l.up, &l.down}) p->quant.kind = QuantKind::None;
  const std::vector<int32_t> ids = random_samples(ref.desc, {11})[0];
  const std::vector<float> a = all_logits(ref, ids), b = all_logits(smoothed, ids);
  ASSERT_EQ(a.size(), b.size());
  double max_ref = 0.0, max_err = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_ref = std::max(max_ref, double(std::fabs(a[i])));
    max_err = std::max(max_err, double(std::fabs(a[i] - b[i])));
  }
  EXPECT_LE(max_err, 2e-5 * max_ref) << "max |logit| " << max_ref;
  EXPECT_GT(max_ref, 0.0);
}

std::vector<std::string> weight_fixtures() {
  std::vector<std::string> names;
  for (const std::string& n : testing::parity_fixture_names())
    if (fs::exists(testing::parity_dir() / n / "model.safetensors") ||
        fs::exists(testing::parity_dir() / n / "model.safetensors.index.json"))
      names.push_back(n);
  return names;
}
INSTANTIATE_TEST_SUITE_P(Families, SmoothingIsExact, ::testing::ValuesIn(weight_fixtures()),
                         testing::ParityNamePrinter());

// W8A8 with a searched alpha on a random-weight fixture: the plan picks grid alphas, greedy
// generation completes, and perplexity (on the fp32 model's own greedy continuation) stays
// within 2% of fp32's.
TEST(SmoothQuantW8A8, GreedyRunAndPerplexityNearFp32) {
  const auto f = testing::open_parity_fixture("llama_gqa_llama3_bias");
  const LoadedModel ref = load_model(f.model_dir);
  LoadedModel q = load_model(f.model_dir);
  const Plan plan =
      calibrate_and_plan(q, {}, random_samples(q.desc, {24, 40}), kSearchRows, std::nullopt);
  ASSERT_TRUE(plan.searched);
  for (const LayerPlan& l : plan.layers) {
    EXPECT_GE(l.alpha, 0.3 - 1e-9);
    EXPECT_LE(l.alpha, 0.9 + 1e-9);
    EXPECT_TRUE(std::isfinite(l.error));
  }
  mark(q, plan);
  GenerationRequest r;
  r.prompt = {1, 17, 42, 99, 5};
  r.params.max_new_tokens = 27;
  r.params.ignore_eos = true;
  auto fp32_backend = make_cpu_backend(ref, {16, 4});
  auto q_backend = make_cpu_backend(q, {16, 4});
  const auto fp32_out = Generator(*fp32_backend).generate(std::span(&r, 1)).front().tokens;
  const auto q_out = Generator(*q_backend).generate(std::span(&r, 1)).front().tokens;
  ASSERT_EQ(q_out.size(), 27u);
  std::vector<int32_t> text = r.prompt;
  text.insert(text.end(), fp32_out.begin(), fp32_out.end());
  const double p32 = perplexity(ref, text), pq = perplexity(q, text);
  EXPECT_NEAR(pq / p32, 1.0, 0.02) << "fp32 " << p32 << " smoothquant " << pq;
  EXPECT_NE(pq, p32);  // the W8A8 path ran
}

// The alpha search never picks a grid value with a larger calibration error than another.
TEST(SmoothQuantW8A8, SearchedAlphaHasTheLeastError) {
  LoadedModel m = load_model(testing::parity_dir() / "gpt2");
  const auto samples = random_samples(m.desc, {30});
  Calibrator c(m, {}, kSearchRows, longest_sample(samples));
  c.run(samples);
  const std::vector<LayerStats>& stats = c.stats();
  SmoothingScorer& scorer = c.scorer();
  const Plan searched = make_plan(m.desc, stats, std::nullopt, scorer);
  const auto relative = [&](int l, LinearSlot slot, const std::vector<float>& s) {
    const InputStats& in = stats[size_t(l)][size_t(slot)];
    scorer.set_rows(in.rows, int(in.kept()), int(in.in));
    const ErrorSums e = scorer.w8a8_error(l, slot, s);
    return e.error / e.reference;
  };
  for (const double a : alpha_grid()) {
    const Plan fixed = make_plan(m.desc, stats, a, scorer);
    for (int l = 0; l < int(fixed.layers.size()); ++l) {
      const double e = relative(l, LinearSlot::Qkv, *fixed.layers[size_t(l)].qkv) +
                       relative(l, LinearSlot::Up, *fixed.layers[size_t(l)].up);
      EXPECT_LE(searched.layers[size_t(l)].error, e * (1 + 1e-12))
          << "layer " << l << " alpha " << a;
    }
  }
}

// Calibration split over two tensor-parallel ranks (CalibrationDevice::ranks; each CPU rank holds
// its slices) against one rank, on every parity fixture that degree 2 splits: the same statistics
// (qkv and up from rank 0, o and down joined from the ranks' columns; fp32 sums in another order,
// so within 1e-5 of each input's largest value) and the same searched plan (alphas equal; the
// errors and factors within 0.2%: an input that moved by 1e-6 may round to another int8) where
// no KV head is replicated. Where degree 2 replicates the KV heads (one KV head), both ranks'
// K / V rows count in the alpha search's sums, so only the statistics are held equal and the plan
// is checked for being made.
TEST(SmoothQuantCalibration, TwoRanksGiveOneRanksStatisticsAndPlan) {
  int checked = 0;
  for (const std::string& name : testing::parity_fixture_names()) {
    const LoadedModel m = load_model(testing::open_parity_fixture(name).model_dir);
    try {
      rank_desc(m.desc, {0, 2});
    } catch (const Error&) {
      continue;  // degree 2 does not split this model
    }
    SCOPED_TRACE(name);
    const auto samples = random_samples(m.desc, {9, 17});
    Calibrator one(m, {}, 12, longest_sample(samples));
    CalibrationDevice split;
    split.ranks = 2;
    EXPECT_EQ(split.describe(m), "cpu (fp32) x 2 ranks");
    Calibrator two(m, split, 12, longest_sample(samples));
    one.run(samples);
    two.run(samples);
    ASSERT_EQ(two.stats().size(), one.stats().size());
    for (size_t l = 0; l < one.stats().size(); ++l)
      for (size_t slot = 0; slot < kLinearSlots; ++slot) {
        const InputStats &want = one.stats()[l][slot], &got = two.stats()[l][slot];
        ASSERT_EQ(got.in, want.in) << "layer " << l << " slot " << slot;
        EXPECT_EQ(got.tokens, want.tokens);
        ASSERT_EQ(got.rows.size(), want.rows.size());
        // Within 1e-5 of the input's largest |x| (the ranks add the row-parallel partial sums
        // in another order, and the random fixtures' values grow layer by layer).
        const float scale = *std::max_element(want.abs_max.begin(), want.abs_max.end());
        for (size_t j = 0; j < want.abs_max.size(); ++j)
          ASSERT_NEAR(got.abs_max[j], want.abs_max[j], 1e-5 * scale)
              << "layer " << l << " slot " << slot << " column " << j;
        for (size_t j = 0; j < want.rows.size(); ++j)
          ASSERT_NEAR(got.rows[j], want.rows[j], 1e-5 * scale)
              << "layer " << l << " row value " << j;
      }
    const Plan p1 = make_plan(m.desc, one.stats(), std::nullopt, one.scorer());
    const Plan p2 = make_plan(m.desc, two.stats(), std::nullopt, two.scorer());
    ASSERT_EQ(p2.layers.size(), p1.layers.size());
    if (m.desc.num_kv_heads % 2 != 0) continue;  // replicated KV heads: see above
    for (size_t l = 0; l < p1.layers.size(); ++l) {
      EXPECT_EQ(p2.layers[l].alpha, p1.layers[l].alpha) << "layer " << l;
      EXPECT_NEAR(p2.layers[l].error, p1.layers[l].error, 2e-3 * p1.layers[l].error);
      for (const auto& [a, b] : {std::pair{p1.layers[l].qkv, p2.layers[l].qkv},
                                 std::pair{p1.layers[l].up, p2.layers[l].up}})
        for (size_t j = 0; j < a->size(); ++j)
          ASSERT_NEAR((*b)[j], (*a)[j], 2e-3 * (*a)[j]) << "layer " << l << " column " << j;
    }
    ++checked;
  }
  EXPECT_GE(checked, 10);  // the families' fixtures that split without replicating KV heads
}

// The sharded alpha search answers only for the column-parallel projections (qkv, up); a cuda
// calibration refuses to split (it runs on one GPU), and a rank count below 1 or one that does
// not split the model is an error naming it.
TEST(SmoothQuantCalibration, SplitCalibrationRefusesWhatItCannotDo) {
  const LoadedModel m = load_model(testing::parity_dir() / "llama_mha_tied");
  CalibrationDevice split;
  split.ranks = 2;
  Calibrator two(m, split, 4, 8);
  two.run(random_samples(m.desc, {8}));
  EXPECT_NO_THROW(two.scorer().weight_column_max(0, LinearSlot::Qkv));
  EXPECT_THROW(two.scorer().weight_column_max(0, LinearSlot::O), Error);
  EXPECT_THROW(two.scorer().w8a8_error(0, LinearSlot::Down, std::vector<float>(8, 1.0f)), Error);
  const auto message = [&](const CalibrationDevice& d) {
    try {
      Calibrator c(m, d, 4, 8);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CalibrationDevice on_gpus = split;
  on_gpus.cuda = true;
  EXPECT_NE(message(on_gpus).find("one GPU"), std::string::npos) << message(on_gpus);
  CalibrationDevice none;
  none.ranks = 0;
  EXPECT_NE(message(none).find("0 tensor-parallel ranks"), std::string::npos) << message(none);
  CalibrationDevice too_many;
  too_many.ranks = 3 * m.desc.num_heads;
  EXPECT_NE(message(too_many).find(std::to_string(too_many.ranks)), std::string::npos)
      << message(too_many);
  EXPECT_THROW(ShardedScorer({}), Error);
}

// The CPU alpha search's sums against a direct computation: W diag(s) and x diag(1/s) quantized
// as quant/int8.h and quant/w8a8.h say, the products in fp64.
TEST(SmoothQuantScorer, CpuSumsMatchADirectComputation) {
  const int out = 24, in = 40, rows = 7;
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_s(-2.0f, 2.0f);
  std::vector<float> w(size_t(out * in)), x(size_t(rows * in)), s(static_cast<size_t>(in));
  for (float& v : w) v = n(rng);
  for (float& v : x) v = n(rng) * 3.0f;
  for (float& v : s) v = std::exp(log_s(rng));
  CpuSmoothingScorer scorer([&](int, LinearSlot) {
    return kernels::LinearWeights<float>{w.data(), nullptr, out, in};
  });
  scorer.set_rows(x, rows, in);
  const ErrorSums got = scorer.w8a8_error(0, LinearSlot::Qkv, s);
  // Direct: per output row, q = round_half_even(w s / (max |w s| / 127)); per input row likewise
  // of x / s; y = sum q_w q_x * scale_w * scale_x.
  const auto quantize = [](std::vector<double> v, std::vector<double>& q) {
    double m = 0.0;
    for (const double e : v) m = std::max(m, std::fabs(e));
    const float scale = float(m) / 127.0f;
    q.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      q[i] = scale > 0 ? std::nearbyint(float(v[i]) / scale) : 0.0;
    return double(scale);
  };
  double error = 0.0, reference = 0.0;
  for (int r = 0; r < rows; ++r) {
    std::vector<double> xs(static_cast<size_t>(in)), qx;
    for (int j = 0; j < in; ++j)
      xs[size_t(j)] = double(x[size_t(r * in + j)] * (1.0f / s[size_t(j)]));
    const double sx = quantize(xs, qx);
    for (int o = 0; o < out; ++o) {
      std::vector<double> ws(static_cast<size_t>(in)), qw;
      for (int j = 0; j < in; ++j) ws[size_t(j)] = double(w[size_t(o * in + j)] * s[size_t(j)]);
      const double sw = quantize(ws, qw);
      double acc = 0.0, exact = 0.0;
      for (int j = 0; j < in; ++j) {
        acc += qx[size_t(j)] * qw[size_t(j)];
        exact += double(x[size_t(r * in + j)]) * w[size_t(o * in + j)];
      }
      const double d = acc * sx * sw - exact;
      error += d * d;
      reference += exact * exact;
    }
  }
  EXPECT_NEAR(got.reference, reference, 1e-5 * reference);
  EXPECT_NEAR(got.error, error, 1e-3 * error);
  EXPECT_GT(got.error, 0.0);
  // Errors name what is wrong.
  EXPECT_THROW(scorer.set_rows(x, rows + 1, in), Error);
  EXPECT_THROW(scorer.w8a8_error(0, LinearSlot::Qkv, std::vector<float>(3, 1.0f)), Error);
}

// Temporary LMX_CACHE_DIR for the engine and apply() tests.
struct CacheDir {
  fs::path dir = fs::temp_directory_path() / ("lmx-sq-test-" + std::to_string(::getpid()));
  CacheDir() {
    fs::remove_all(dir);
    ::setenv("LMX_CACHE_DIR", dir.c_str(), 1);
  }
  ~CacheDir() {
    ::unsetenv("LMX_CACHE_DIR");
    fs::remove_all(dir);
  }
};

const fs::path kModel = testing::shared_models_dir() / "stories260k";

TEST(SmoothQuantApply, CacheIsWrittenThenRead) {
  CacheDir cache;
  Settings s;
  s.samples = 2;
  LoadedModel a = load_model(kModel);
  const Report first = apply(a, s);
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(first.samples, 2);
  ASSERT_TRUE(fs::exists(first.cache_file));
  EXPECT_EQ(first.cache_file.parent_path(), cache.dir / "smoothquant");
  LoadedModel b = load_model(kModel);
  const Report second = apply(b, s);
  EXPECT_TRUE(second.from_cache);
  ASSERT_EQ(second.plan.layers.size(), first.plan.layers.size());
  for (size_t l = 0; l < first.plan.layers.size(); ++l) {
    EXPECT_EQ(second.plan.layers[l].alpha, first.plan.layers[l].alpha);
    EXPECT_EQ(*second.plan.layers[l].qkv, *first.plan.layers[l].qkv);  // bit for bit
    EXPECT_EQ(*second.plan.layers[l].up, *first.plan.layers[l].up);
    EXPECT_EQ(b.weights.layers[l].qkv.quant.kind, QuantKind::W8A8);
  }
  // Another alpha setting is another file.
  s.alpha = 0.5;
  LoadedModel c = load_model(kModel);
  EXPECT_FALSE(apply(c, s).from_cache);
  // A missing calibration file names itself.
  s.calibration_file = "/nonexistent/calib.txt";
  LoadedModel d = load_model(kModel);
  try {
    apply(d, s);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/calib.txt"), std::string::npos) << e.what();
  }
}

std::vector<int32_t> engine_tokens(std::map<std::string, std::string> env,
                                   nlohmann::json* stats = nullptr) {
  return testing::served_greedy_tokens(kModel, std::move(env), "Once upon a time", 12, stats);
}

// The engine API (lmx-server, the plugin) runs what the CLI's load_quantized_model runs.
TEST(SmoothQuantEngine, OptionQuantizeSmoothquantTakesEffect) {
  CacheDir cache;
  Settings s;
  s.alpha = 0.5;
  s.samples = 2;
  const LoadedModel m = load_quantized_model(kModel, {}, s);
  GenerationRequest r;
  r.prompt = Tokenizer::from_model_dir(kModel).encode("Once upon a time");
  r.params.max_new_tokens = 12;
  r.params.ignore_eos = true;
  auto backend = make_cpu_backend(m, {16, 4});
  const auto expected = Generator(*backend).generate(std::span(&r, 1)).front().tokens;
  nlohmann::json stats;
  EXPECT_EQ(engine_tokens({{"OPTION_QUANTIZE", "smoothquant"},
                           {"OPTION_SMOOTHQUANT_ALPHA", "0.5"},
                           {"OPTION_SMOOTHQUANT_CALIBRATION_SAMPLES", "2"}},
                          &stats),
            expected);
  // The engine's stats (lmx-server's /ping and /metrics source) say what was chosen.
  const nlohmann::json& q = stats["quantization"];
  EXPECT_EQ(q["method"], "smoothquant") << stats.dump();
  ASSERT_EQ(q["alphas"].size(), size_t(m.desc.num_layers)) << stats.dump();
  for (const auto& a : q["alphas"]) EXPECT_EQ(a.get<double>(), 0.5);
  EXPECT_EQ(q["alpha_searched"], false);
  EXPECT_TRUE(q["calibration"].contains("from_cache")) << q.dump();  // the plan apply() cached
  nlohmann::json plain;
  engine_tokens({}, &plain);
  EXPECT_TRUE(plain["quantization"].is_null());
}

// Served on the CPU at tensor-parallel degree 2, the model calibrates split as it serves: each
// rank holds its slices (CalibrationDevice::ranks), and the stats say so.
TEST(SmoothQuantEngine, CpuDegreeTwoCalibratesOverItsRanks) {
  CacheDir cache;
  nlohmann::json stats;
  const std::vector<int32_t> tokens =
      engine_tokens({{"OPTION_QUANTIZE", "smoothquant"},
                     {"OPTION_TENSOR_PARALLEL_DEGREE", "2"},
                     {"OPTION_SMOOTHQUANT_CALIBRATION_SAMPLES", "2"}},
                    &stats);
  EXPECT_EQ(tokens.size(), 12u);
  const nlohmann::json& q = stats["quantization"];
  EXPECT_EQ(q["method"], "smoothquant") << stats.dump();
  EXPECT_EQ(q["alpha_searched"], true);
  EXPECT_EQ(q["calibration"]["device"], "cpu (fp32) x 2 ranks") << q.dump();
}

}  // namespace
}  // namespace lmx
