#include "container/metrics.h"

#include <fmt/format.h>

namespace lmx::server {

void Histogram::observe(double seconds) {
  for (size_t i = 0; i < kBounds.size(); ++i) {
    if (seconds <= kBounds[i]) ++counts_[i];
  }
  ++count_;
  sum_ += seconds;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  std::string sep = labels.empty() ? "" : ",";
  for (size_t i = 0; i < kBounds.size(); ++i) {
    out +=
        fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep, kBounds[i], counts_[i]);
  }
  out += fmt::format("{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, labels, sep, count_);
  std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, braces, sum_, name, braces, count_);
}

void Metrics::request_done(const std::string& endpoint, int status, double seconds) {
  std::lock_guard lock(mu_);
  ++requests_[{endpoint, status}];
  latency_[endpoint].observe(seconds);
}

void Metrics::first_token(double seconds) {
  std::lock_guard lock(mu_);
  ttft_.observe(seconds);
}

void Metrics::tokens(int64_t prompt, int64_t generated) {
  prompt_tokens_.fetch_add(prompt);
  generated_tokens_.fetch_add(generated);
}

namespace {

double number(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return 0;
  auto it = j.find(key);
  return (it != j.end() && it->is_number()) ? it->get<double>() : 0.0;
}

}  // namespace

std::string Metrics::render(const nlohmann::json& engine, const std::string& model_state) const {
  std::string out;
  std::lock_guard lock(mu_);
  out += "# HELP lmx_requests_total HTTP requests answered, by endpoint and status code.\n";
  out += "# TYPE lmx_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    out += fmt::format("lmx_requests_total{{endpoint=\"{}\",code=\"{}\"}} {}\n", key.first,
                       key.second, n);
  }
  out += "# HELP lmx_request_duration_seconds Time from request read to last byte queued.\n";
  out += "# TYPE lmx_request_duration_seconds histogram\n";
  for (const auto& [endpoint, h] : latency_) {
    h.render(out, "lmx_request_duration_seconds", fmt::format("endpoint=\"{}\"", endpoint));
  }
  out += "# HELP lmx_time_to_first_token_seconds Time from request read to the first token.\n";
  out += "# TYPE lmx_time_to_first_token_seconds histogram\n";
  ttft_.render(out, "lmx_time_to_first_token_seconds", "");
  out += "# HELP lmx_prompt_tokens_total Prompt tokens of finished generations.\n";
  out += "# TYPE lmx_prompt_tokens_total counter\n";
  out += fmt::format("lmx_prompt_tokens_total {}\n", prompt_tokens_.load());
  out += "# HELP lmx_generated_tokens_total Tokens generated.\n";
  out += "# TYPE lmx_generated_tokens_total counter\n";
  out += fmt::format("lmx_generated_tokens_total {}\n", generated_tokens_.load());
  out += "# HELP lmx_cancelled_total Generations cancelled because the client went away.\n";
  out += "# TYPE lmx_cancelled_total counter\n";
  out += fmt::format("lmx_cancelled_total {}\n", cancelled_.load());
  out += "# HELP lmx_rejected_total Generation requests refused with 503 (and Retry-After): "
         "queue_full (job_queue_size requests already wait), not_ready (model loading or "
         "failed), draining (shutting down).\n";
  out += "# TYPE lmx_rejected_total counter\n";
  const char* reasons[] = {"queue_full", "not_ready", "draining"};
  for (size_t i = 0; i < rejected_.size(); ++i)
    out += fmt::format("lmx_rejected_total{{reason=\"{}\"}} {}\n", reasons[i], rejected_[i].load());
  out += "# HELP lmx_timed_out_total Requests ended by option.request_timeout (their KV blocks "
         "freed).\n";
  out += "# TYPE lmx_timed_out_total counter\n";
  out += fmt::format("lmx_timed_out_total {}\n", number(engine, "timed_out_total"));
  out += "# HELP lmx_requests_in_flight HTTP requests being answered now.\n";
  out += "# TYPE lmx_requests_in_flight gauge\n";
  out += fmt::format("lmx_requests_in_flight {}\n", in_flight_.load());
  out += "# HELP lmx_open_connections Client connections open now.\n";
  out += "# TYPE lmx_open_connections gauge\n";
  out += fmt::format("lmx_open_connections {}\n", open_connections_.load());
  out += "# HELP lmx_queue_depth Requests waiting in the engine queue.\n";
  out += "# TYPE lmx_queue_depth gauge\n";
  out += fmt::format("lmx_queue_depth {}\n", number(engine, "waiting"));
  out += "# HELP lmx_running_requests Requests in the running batch.\n";
  out += "# TYPE lmx_running_requests gauge\n";
  out += fmt::format("lmx_running_requests {}\n", number(engine, "running"));
  out += "# HELP lmx_kv_blocks_used KV-cache blocks in use.\n";
  out += "# TYPE lmx_kv_blocks_used gauge\n";
  out += fmt::format("lmx_kv_blocks_used {}\n", number(engine, "kv_blocks_used"));
  out += "# HELP lmx_kv_blocks_free KV-cache blocks free.\n";
  out += "# TYPE lmx_kv_blocks_free gauge\n";
  out += fmt::format("lmx_kv_blocks_free {}\n", number(engine, "kv_blocks_free"));
  out += "# HELP lmx_non_finite_logits_total Requests failed alone because their logits were "
         "not finite.\n";
  out += "# TYPE lmx_non_finite_logits_total counter\n";
  out += fmt::format("lmx_non_finite_logits_total {}\n", number(engine, "non_finite_logits_total"));
  out += "# HELP lmx_model_ready 1 when the model is loaded and serving.\n";
  out += "# TYPE lmx_model_ready gauge\n";
  out += fmt::format("lmx_model_ready{{state=\"{}\"}} {}\n", model_state,
                     model_state == "ready" ? 1 : 0);
  return out;
}

}  // namespace lmx::server
