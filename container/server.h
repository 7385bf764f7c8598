// The listener: accepts connections on the I/O threads, and on SIGTERM/SIGINT stops accepting,
// lets in-flight requests finish (up to drain_timeout_s), stops the model and returns.
#pragma once

#include "container/server_context.h"

namespace lmx::server {

// Serves until a termination signal has been handled, or until the model failed to load when
// options.exit_if_model_fails. Returns the process exit code (1 for the latter).
int serve(ServerContext& ctx);

}  // namespace lmx::server
