#include "engine/api/replicated_engine.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace lmx {
namespace {

class ReplicatedEngine final : public Engine {
 public:
  explicit ReplicatedEngine(std::vector<std::unique_ptr<Engine>> replicas)
      : replicas_(std::move(replicas)) {
    if (replicas_.empty()) throw_error("internal: a replica set needs at least one engine");
    in_flight_.assign(replicas_.size(), 0);
  }

  ~ReplicatedEngine() override { shutdown(); }

  uint64_t enqueue(EngineRequest request, UpdateCallback on_update) override {
    if (!on_update) throw RequestError("callback", "a request needs an update callback");
    size_t r = 0;
    uint64_t id = 0;
    {
      std::lock_guard lock(mutex_);
      r = size_t(std::min_element(in_flight_.begin(), in_flight_.end()) - in_flight_.begin());
      id = next_id_++;
      ++in_flight_[r];
      routes_[id] = {r, 0};
    }
    // The replica's updates carry the set's id; the last one retires the route.
    auto forward = [this, id, r, cb = std::move(on_update)](const RequestUpdate& u) {
      RequestUpdate mine = u;
      mine.id = id;
      if (u.finished) retire(id, r);
      cb(mine);
    };
    uint64_t local = 0;
    try {
      local = replicas_[r]->enqueue(std::move(request), std::move(forward));
    } catch (...) {
      retire(id, r);
      throw;
    }
    std::lock_guard lock(mutex_);
    if (auto it = routes_.find(id); it != routes_.end()) it->second.local = local;
    return id;
  }

  bool cancel(uint64_t id) override {
    Route route;
    {
      std::lock_guard lock(mutex_);
      auto it = routes_.find(id);
      if (it == routes_.end() || it->second.local == 0) return false;
      route = it->second;
    }
    return replicas_[route.replica]->cancel(route.local);
  }

  // Replica 0's description of the model and, summed over the replicas, the load; every
  // replica's own stats under "replicas".
  nlohmann::json stats() const override {
    nlohmann::json out = replicas_[0]->stats();
    nlohmann::json each = nlohmann::json::array();
    for (const auto& e : replicas_) each.push_back(e->stats());
    for (const char* key : {"running", "waiting", "kv_blocks_used", "kv_blocks_free",
                            "preemptions", "requests_total", "tokens_generated",
                            "tokens_per_second", "non_finite_logits_total", "timed_out_total"}) {
      double sum = 0;
      for (const auto& s : each) sum += s.value(key, 0.0);
      out[key] = out[key].is_number_integer() ? nlohmann::json(int64_t(sum)) : nlohmann::json(sum);
    }
    for (const auto& s : each)
      if (s.value("state", "") != "ready") out["state"] = s.value("state", "");
    out["replicas"] = std::move(each);
    out["replica_count"] = replicas_.size();
    return out;
  }

  const Tokenizer& tokenizer() const override { return replicas_[0]->tokenizer(); }
  const properties::ServingConfig& config() const override { return replicas_[0]->config(); }

  void shutdown() override {
    for (auto& e : replicas_) e->shutdown();
  }

 private:
  struct Route {
    size_t replica = 0;
    uint64_t local = 0;  // 0 until the replica's enqueue returned
  };

  void retire(uint64_t id, size_t replica) {
    std::lock_guard lock(mutex_);
    if (routes_.erase(id)) --in_flight_[replica];
  }

  mutable std::mutex mutex_;  // guards in_flight_, routes_, next_id_
  std::vector<int> in_flight_;  // [replica] requests enqueued and not finished
  std::unordered_map<uint64_t, Route> routes_;
  uint64_t next_id_ = 1;
  // Last: destroyed first, while the state their last updates reach is still alive.
  std::vector<std::unique_ptr<Engine>> replicas_;
};

}  // namespace

std::unique_ptr<Engine> make_replicated_engine(std::vector<std::unique_ptr<Engine>> replicas) {
  return std::make_unique<ReplicatedEngine>(std::move(replicas));
}

}  // namespace lmx
