// lmx_serving_bench: the serving workload of bench/serving/load_generator.py against the engine
// API in-process (no HTTP, no plugin ABI), to show what the server itself costs.
//
//   lmx_serving_bench --model-dir DIR [--requests 256] [--concurrency 128] [--prompt-tokens 512]
//                     [--max-new-tokens 128] [--warmup N] [--out result.json]
//                     [--step-log steps.log]
//
// Configuration comes from DIR/serving.properties and OPTION_* like lmx-server. Closed loop:
// `concurrency` virtual clients, each enqueues its next request when its previous one finished.
// Prompts are exactly P token ids (BOS + random common words, different per request), greedy,
// ignore_eos, max_new_tokens M. TTFT = enqueue() -> first update with tokens; TPOT = (last token
// - first token) / (tokens - 1), per request. Timestamps are taken in the update callback (the
// engine's worker thread), so they are when the engine hands the token out. --step-log writes the
// engine's per-step trace of the measured phase (what each step fed the model, its time, the gap
// before it) to a file.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <deque>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include "engine/api/engine.h"
#include "engine/tokenizer/tokenizer.h"
#include "properties/engine_capabilities.h"
#include "properties/env_source.h"
#include "properties/serving_config.h"
#include "prompt_words.h"  // generated from prompt_words.txt (CMakeLists.txt)

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Options {
  std::string model_dir;
  int requests = 256;
  int concurrency = 128;
  int prompt_tokens = 512;
  int max_new_tokens = 128;
  int warmup = -1;  // default: concurrency (every batch size runs once before measuring)
  std::string out;
  std::string label;
  std::string step_log;
};

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr,
               "%s\nusage: lmx_serving_bench --model-dir DIR [--requests N] [--concurrency N] "
               "[--prompt-tokens P] [--max-new-tokens M] [--warmup N] [--label S] [--out FILE] "
               "[--step-log FILE]\n",
               msg);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + std::string(a)).c_str());
      return argv[++i];
    };
    auto next_int = [&]() {
      std::string v = next();
      try {
        return std::stoi(v);
      } catch (...) {
        usage(("not a number for " + std::string(a) + ": " + v).c_str());
      }
    };
    if (a == "--model-dir") o.model_dir = next();
    else if (a == "--requests") o.requests = next_int();
    else if (a == "--concurrency") o.concurrency = next_int();
    else if (a == "--prompt-tokens") o.prompt_tokens = next_int();
    else if (a == "--max-new-tokens") o.max_new_tokens = next_int();
    else if (a == "--warmup") o.warmup = next_int();
    else if (a == "--out") o.out = next();
    else if (a == "--label") o.label = next();
    else if (a == "--step-log") o.step_log = next();
    else if (a == "-h" || a == "--help") usage("");
    else usage(("unknown argument " + std::string(a)).c_str());
  }
  if (o.model_dir.empty()) usage("--model-dir is required");
  if (o.requests < 1 || o.concurrency < 1 || o.prompt_tokens < 1 || o.max_new_tokens < 1) {
    usage("requests, concurrency, prompt-tokens and max-new-tokens must be >= 1");
  }
  return o;
}

// The words of prompt_words.txt (one Llama-2 token each after a space), as load_generator.py
// reads them: lines starting with '#' skipped, words separated by white space.
std::vector<std::string_view> prompt_words() {
  std::vector<std::string_view> words;
  std::string_view rest = kPromptWordsFile;
  while (!rest.empty()) {
    const size_t end = std::min(rest.find('\n'), rest.size());
    std::string_view line = rest.substr(0, end);
    rest.remove_prefix(std::min(end + 1, rest.size()));
    if (line.starts_with('#')) continue;
    while (!line.empty()) {
      const size_t start = line.find_first_not_of(" \t\r");
      if (start == std::string_view::npos) break;
      line.remove_prefix(start);
      const size_t stop = std::min(line.find_first_of(" \t\r"), line.size());
      words.push_back(line.substr(0, stop));
      line.remove_prefix(stop);
    }
  }
  return words;
}

// Exactly `n` ids: the tokenizer's encoding of random words (with BOS), cut or extended.
std::vector<int32_t> make_prompt(const lmx::Tokenizer& tok, int n, uint64_t seed) {
  static const std::vector<std::string_view> words = prompt_words();
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids;
  while (static_cast<int>(ids.size()) < n) {
    std::string text;
    for (int w = 0; w < n + 8; ++w) {
      if (w) text += ' ';
      text += words[rng() % words.size()];
    }
    auto more = tok.encode(text, ids.empty());
    ids.insert(ids.end(), more.begin(), more.end());
  }
  ids.resize(static_cast<size_t>(n));
  return ids;
}

struct Record {
  Clock::time_point sent{};
  Clock::time_point first{};
  Clock::time_point last{};
  Clock::time_point done{};
  int tokens = 0;
  int prompt_tokens = 0;
  bool finished = false;
  std::string error;
};

// Closed-loop run of `prompts` with `concurrency` clients. Returns one record per prompt.
std::vector<Record> run_phase(lmx::Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                              int concurrency, int max_new_tokens) {
  std::vector<Record> recs(prompts.size());
  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> finished;  // indices whose final update arrived
  size_t next = 0;
  size_t in_flight = 0;
  size_t done = 0;

  auto submit = [&](size_t i) {
    lmx::EngineRequest req;
    req.prompt_ids = prompts[i];
    req.params.max_new_tokens = max_new_tokens;
    req.params.sampling.greedy = true;
    req.params.ignore_eos = true;
    {
      std::lock_guard lk(mu);
      recs[i].sent = Clock::now();
    }
    try {
      engine.enqueue(std::move(req), [&, i](const lmx::RequestUpdate& u) {
        auto now = Clock::now();
        std::lock_guard lk(mu);
        Record& r = recs[i];
        if (!u.tokens.empty()) {
          if (r.tokens == 0) r.first = now;
          r.last = now;
          r.tokens += static_cast<int>(u.tokens.size());
        }
        if (u.finished) {
          r.finished = true;
          r.done = now;
          r.prompt_tokens = u.prompt_tokens;
          if (u.finish_status == lmx::FinishStatus::Error) {
            r.error = "engine error: " + u.error;
          } else if (u.finish_status != lmx::FinishStatus::Length) {
            r.error = std::string("finish ") + lmx::finish_status_name(u.finish_status);
          } else if (u.generated_tokens != r.tokens || r.tokens != max_new_tokens) {
            r.error = "generated " + std::to_string(r.tokens) + " tokens (update says " +
                      std::to_string(u.generated_tokens) + "), expected " +
                      std::to_string(max_new_tokens);
          }
          finished.push_back(i);
          cv.notify_one();
        }
      });
    } catch (const std::exception& e) {
      std::lock_guard lk(mu);
      recs[i].error = std::string("enqueue: ") + e.what();
      recs[i].finished = true;
      recs[i].done = Clock::now();
      finished.push_back(i);
      cv.notify_one();
    }
  };

  std::unique_lock lk(mu);
  while (done < prompts.size()) {
    while (in_flight < static_cast<size_t>(concurrency) && next < prompts.size()) {
      size_t i = next++;
      ++in_flight;
      lk.unlock();
      submit(i);
      lk.lock();
    }
    cv.wait(lk, [&] { return !finished.empty(); });
    while (!finished.empty()) {
      finished.pop_front();
      --in_flight;
      ++done;
    }
  }
  return recs;
}

double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  double pos = (static_cast<double>(v.size()) - 1.0) * q / 100.0;
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

json summary(const std::vector<double>& v, double scale) {
  if (v.empty()) return json{{"p50", nullptr}, {"p90", nullptr}, {"p99", nullptr}, {"mean", nullptr}};
  double sum = 0, mx = v[0];
  for (double x : v) {
    sum += x;
    mx = std::max(mx, x);
  }
  return json{{"p50", pct(v, 50) * scale},
              {"p90", pct(v, 90) * scale},
              {"p99", pct(v, 99) * scale},
              {"mean", sum / static_cast<double>(v.size()) * scale},
              {"max", mx * scale}};
}

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  try {
    auto config = lmx::properties::load_serving_config(
        o.model_dir, lmx::properties::Environment::from_process(),
        lmx::properties::EngineCapabilities::this_build());
    auto t_load = Clock::now();
    auto engine = lmx::Engine::create(config);
    double load_s = secs(Clock::now() - t_load);
    std::fprintf(stderr, "engine ready in %.1f s\n", load_s);
    const lmx::Tokenizer& tok = engine->tokenizer();

    int warmup = o.warmup < 0 ? o.concurrency : o.warmup;
    if (warmup > 0) {
      std::vector<std::vector<int32_t>> wp;
      for (int i = 0; i < warmup; ++i) wp.push_back(make_prompt(tok, o.prompt_tokens, 20000 + i));
      auto wr = run_phase(*engine, wp, o.concurrency, o.max_new_tokens);
      for (const auto& r : wr) {
        if (!r.error.empty()) {
          std::fprintf(stderr, "warm-up error: %s\n", r.error.c_str());
          break;
        }
      }
    }

    if (!o.step_log.empty()) {  // the measured phase's steps only
      auto steps = spdlog::basic_logger_mt("steps", o.step_log, true);
      steps->set_pattern("%H:%M:%S.%f %v");
      steps->set_level(spdlog::level::debug);
      spdlog::set_default_logger(steps);
    }
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < o.requests; ++i) prompts.push_back(make_prompt(tok, o.prompt_tokens, i));
    auto recs = run_phase(*engine, prompts, o.concurrency, o.max_new_tokens);
    spdlog::default_logger()->flush();

    Clock::time_point start = recs[0].sent, end = recs[0].done;
    std::vector<double> ttft, tpot, lat;
    long long out_tokens = 0, prompt_total = 0;
    int completed = 0, errors = 0;
    std::vector<std::string> error_samples;
    for (const auto& r : recs) {
      start = std::min(start, r.sent);
      end = std::max(end, r.done);
      if (!r.error.empty()) {
        ++errors;
        if (error_samples.size() < 5) error_samples.push_back(r.error);
        continue;
      }
      ++completed;
      out_tokens += r.tokens;
      prompt_total += r.prompt_tokens;
      lat.push_back(secs(r.done - r.sent));
      if (r.tokens > 0) ttft.push_back(secs(r.first - r.sent));
      if (r.tokens > 1) tpot.push_back(secs(r.last - r.first) / (r.tokens - 1));
    }
    double duration = secs(end - start);
    json res{
        {"tool", "lmx_serving_bench"},
        {"target", "engine_api"},
        {"label", o.label},
        {"model_dir", o.model_dir},
        {"workload",
         {{"requests", o.requests},
          {"concurrency", o.concurrency},
          {"prompt_tokens", o.prompt_tokens},
          {"max_new_tokens", o.max_new_tokens},
          {"greedy", true},
          {"ignore_eos", true},
          {"warmup_requests", warmup}}},
        {"completed", completed},
        {"errors", errors},
        {"error_samples", error_samples},
        {"load_s", load_s},
        {"duration_s", duration},
        {"output_tokens", out_tokens},
        {"output_tokens_per_s", duration > 0 ? out_tokens / duration : 0.0},
        {"total_tokens_per_s", duration > 0 ? (out_tokens + prompt_total) / duration : 0.0},
        {"requests_per_s", duration > 0 ? completed / duration : 0.0},
        {"ttft_ms", summary(ttft, 1e3)},
        {"tpot_ms", summary(tpot, 1e3)},
        {"latency_s", summary(lat, 1.0)},
        {"engine_stats", engine->stats()},
        {"date_utc", utc_now()},
    };
    engine->shutdown();
    if (!o.out.empty()) {
      std::ofstream f(o.out);
      f << res.dump(2) << "\n";
    }
    std::printf("engine_api %s: %d req, %d conc, prompt %d tok, %d new tok\n", o.label.c_str(),
                o.requests, o.concurrency, o.prompt_tokens, o.max_new_tokens);
    std::printf("  %-22s %d / %d\n", "completed / errors", completed, errors);
    std::printf("  %-22s %.2f s\n", "duration", duration);
    std::printf("  %-22s %.1f\n", "output tokens/s", res["output_tokens_per_s"].get<double>());
    std::printf("  %-22s %.2f\n", "requests/s", res["requests_per_s"].get<double>());
    if (!ttft.empty()) {
      std::printf("  %-22s p50 %.1f  p99 %.1f ms\n", "TTFT", pct(ttft, 50) * 1e3,
                  pct(ttft, 99) * 1e3);
    }
    if (!tpot.empty()) {
      std::printf("  %-22s p50 %.2f  p99 %.2f ms\n", "TPOT", pct(tpot, 50) * 1e3,
                  pct(tpot, 99) * 1e3);
    }
    for (const auto& e : error_samples) std::printf("  error: %s\n", e.c_str());
    return errors == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lmx_serving_bench: %s\n", e.what());
    return 1;
  }
}
