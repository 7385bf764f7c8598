#include "plugin/handle_registry.h"

#include <cstdint>

#include "engine/core/error.h"

namespace lmx::plugin {
namespace {

static_assert(sizeof(uintptr_t) == 8, "handle tokens need 64-bit pointers");
constexpr uintptr_t kTag = uintptr_t{0x4C4D58} << 40;
constexpr uint64_t kMaxSerial = (uint64_t{1} << 36) - 1;  // serial << 4 stays below the tag

}  // namespace

HandleRegistry& HandleRegistry::instance() {
  static auto* registry = new HandleRegistry();
  return *registry;
}

lmx_handle* HandleRegistry::add(std::shared_ptr<Handle> handle) {
  std::lock_guard lock(mu_);
  if (next_serial_ > kMaxSerial) throw Error("this process created 2^36 handles; no token is left");
  const uintptr_t token = kTag | (uintptr_t{next_serial_++} << 4);
  live_.emplace(token, std::move(handle));
  return reinterpret_cast<lmx_handle*>(token);
}

HandleRegistry::Lease HandleRegistry::acquire(const lmx_handle* token) {
  std::lock_guard lock(mu_);
  auto it = live_.find(reinterpret_cast<uintptr_t>(token));
  if (it == live_.end()) return Lease();
  it->second->begin_call();
  return Lease(it->second);
}

std::shared_ptr<Handle> HandleRegistry::remove(const lmx_handle* token) {
  std::lock_guard lock(mu_);
  auto it = live_.find(reinterpret_cast<uintptr_t>(token));
  if (it == live_.end()) return nullptr;
  std::shared_ptr<Handle> h = std::move(it->second);
  live_.erase(it);
  return h;
}

}  // namespace lmx::plugin
