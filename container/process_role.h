// Tensor-parallel ranks as processes: `mpirun -np N lmx-server` starts N servers, and only
// process 0 serves HTTP. What this process is comes from the plugin (lmx_process_rank), before
// anything binds a port; the server knows no MPI. A follower never serves: it runs its rank
// through the plugin (lmx_run_follower) until process 0 stops the group. docs/tensor-parallel.md.
#pragma once

#include <string>

#include "container/plugin_loader.h"

namespace lmx::server {

struct ProcessRole {
  int rank = 0;
  int processes = 1;
  bool follower() const { return rank != 0; }
  bool leads_group() const { return rank == 0 && processes > 1; }
};

// Throws std::runtime_error with the plugin's message when it cannot tell.
ProcessRole process_role(const PluginApi& api);

// A follower's whole life: log lines tagged with its rank, warnings and errors only; SIGTERM and
// SIGINT ignored (mpirun forwards a signal to every process, and a follower leaving early would
// leave process 0's drain without its rank: the group ends when process 0 stops it); its rank
// run until process 0 stops the group. Returns the exit code: 0 when process 0 stopped the group,
// 1 (the error logged) when the group failed.
int run_follower_process(const PluginApi& api, const ProcessRole& role,
                         const std::string& model_dir, const std::string& overrides_json);

}  // namespace lmx::server
