// Prometheus text-format metrics of the server: request counts by endpoint and status, latency
// and time-to-first-token histograms, token counters, in-flight requests; the engine's queue
// depth is added from lmx_health at scrape time.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace lmx::server {

class Histogram {
 public:
  static constexpr std::array<double, 12> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1,  0.25,
                                                     0.5,   1.0,  2.5,   5.0,  10.0, 30.0};
  void observe(double seconds);
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::array<uint64_t, kBounds.size()> counts_{};
  uint64_t count_ = 0;
  double sum_ = 0;
};

class Metrics {
 public:
  void request_done(const std::string& endpoint, int status, double seconds);
  void first_token(double seconds);
  void tokens(int64_t prompt, int64_t generated);
  void stream_cancelled() { cancelled_.fetch_add(1); }
  // A generation request refused with 503 before it reached the engine's queue, or by it.
  enum class Rejection { QueueFull, NotReady, Draining };
  void rejected(Rejection why) { rejected_[static_cast<size_t>(why)].fetch_add(1); }
  std::atomic<int64_t>& in_flight() { return in_flight_; }
  std::atomic<int64_t>& open_connections() { return open_connections_; }

  // The whole exposition; `engine` is lmx_health's "engine" object (may be empty).
  std::string render(const nlohmann::json& engine, const std::string& model_state) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, Histogram> latency_;
  Histogram ttft_;
  std::atomic<int64_t> prompt_tokens_{0};
  std::atomic<int64_t> generated_tokens_{0};
  std::atomic<int64_t> cancelled_{0};
  std::array<std::atomic<int64_t>, 3> rejected_{};
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> open_connections_{0};
};

}  // namespace lmx::server
