#include "engine/core/load_deadline.h"

#include <dlfcn.h>

namespace lmx {
namespace {

thread_local std::shared_ptr<LoadDeadline> t_deadline;

}  // namespace

std::shared_ptr<LoadDeadline> current_load_deadline() { return t_deadline; }

LoadDeadlineScope::LoadDeadlineScope(std::shared_ptr<LoadDeadline> deadline)
    : previous_(std::exchange(t_deadline, std::move(deadline))) {}

LoadDeadlineScope::~LoadDeadlineScope() { t_deadline = std::move(previous_); }

void check_load_deadline() {
  const LoadDeadline* d = t_deadline.get();
  if (d != nullptr && d->expired()) d->fail();
}

namespace detail {

void keep_loaded_for_abandoned_load() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&keep_loaded_for_abandoned_load), &info) == 0 ||
      info.dli_fname == nullptr)
    return;
  // Already loaded (RTLD_NOLOAD): only adds RTLD_NODELETE. The handle is deliberately kept.
  (void)dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
}

}  // namespace detail
}  // namespace lmx
