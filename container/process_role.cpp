#include "container/process_role.h"

#include <csignal>
#include <stdexcept>

#include <spdlog/spdlog.h>
#include <fmt/format.h>

#include "container/log_format.h"

namespace lmx::server {

ProcessRole process_role(const PluginApi& api) {
  int32_t rank = 0, processes = 1;
  if (api.process_rank(&rank, &processes) != LMX_STATUS_OK)
    throw std::runtime_error(std::string("cannot tell this process's rank: ") + api.last_error());
  return {rank, processes};
}

int run_follower_process(const PluginApi& api, const ProcessRole& role,
                         const std::string& model_dir, const std::string& overrides_json) {
  use_one_line_logs(fmt::format("rank {} of {}", role.rank, role.processes));
  spdlog::set_level(spdlog::level::warn);
  api.route_logs();
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGINT, SIG_IGN);
  const lmx_status st = api.run_follower(
      model_dir.c_str(), overrides_json.empty() ? nullptr : overrides_json.c_str());
  if (st == LMX_STATUS_OK) return 0;
  spdlog::error("model {} (status {}): {}", model_dir, st, api.last_error());
  return 1;
}

}  // namespace lmx::server
