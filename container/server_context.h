// What every connection shares: the model, the metrics, the options and the drain flag.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "container/metrics.h"
#include "container/plugin_loader.h"

namespace lmx::server {

struct ServerOptions {
  std::string model_dir = "/opt/ml/model";
  std::string model_name;  // default: the model directory's name
  std::string host = "0.0.0.0";
  int port = 8080;
  std::string plugin_path;                       // default: ../lib/liblmx.so next to the binary
  std::size_t max_body_bytes = 6 * 1024 * 1024;  // SageMaker's invocation payload limit
  int threads = 0;                               // 0: hardware concurrency (at least 2)
  int drain_timeout_s = 60;
  int read_timeout_s = 60;     // a request's header, and then its body, must arrive within this
  int write_timeout_s = 60;    // each write of a response must finish within this
  int max_connections = 4096;  // lowered at startup to fit the descriptor limit
  // Process 0 of an mpirun group: a model that fails to load ends the server (exit 1), since the
  // other processes cannot go on without it (container/process_role.h).
  bool exit_if_model_fails = false;
};

struct ServerContext {
  ServerOptions options;
  Model* model = nullptr;
  Metrics metrics;
  std::atomic<bool> draining{false};
  // Responses whose last bytes are queued but not yet written to their client (a stream's final
  // chunk behind a slow reader): a draining server waits for them as for requests in flight.
  std::atomic<int64_t> unsent_responses{0};
};

}  // namespace lmx::server
