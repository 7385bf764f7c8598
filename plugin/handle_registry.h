// Live handles by the value the host holds. An lmx_handle* given to a host is not an address: it
// is a token that this registry maps to the handle's state, so a pointer that is not a live
// handle (never created, already destroyed, or garbage) is found missing instead of being
// dereferenced, and the call returns LMX_STATUS_INVALID_ARGUMENT.
//
// Tokens are never reused (a 64-bit serial per process), so a stale handle stays invalid after
// new handles are created. A token is 0x4C4D58 ("LMX") << 40 | serial << 4: a non-canonical
// address on x86-64 and AArch64, so a host that dereferences one faults at once.
//
// Every call that uses a handle holds a Lease for its duration; lmx_destroy removes the token
// (no new lease after that) and then waits for the leases in flight (Handle::wait_for_calls).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "plugin/handle.h"

namespace lmx::plugin {

class HandleRegistry {
 public:
  // A handle in use by one call.
  class Lease {
   public:
    Lease() = default;
    explicit Lease(std::shared_ptr<Handle> h) : h_(std::move(h)) {}
    Lease(Lease&& o) noexcept : h_(std::move(o.h_)) {}
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease() {
      if (h_) h_->end_call();
    }
    explicit operator bool() const { return h_ != nullptr; }
    Handle* operator->() const { return h_.get(); }
    Handle& operator*() const { return *h_; }

   private:
    std::shared_ptr<Handle> h_;
  };

  static HandleRegistry& instance();  // never destroyed: hosts may call during process exit

  // Registers a loaded handle; returns the token the host gets.
  lmx_handle* add(std::shared_ptr<Handle> handle);
  // The live handle behind `token`, leased for one call; empty when `token` is not live.
  Lease acquire(const lmx_handle* token);
  // Unregisters `token`: later acquire() calls fail. Null when it is not live (also when another
  // thread removed it first).
  std::shared_ptr<Handle> remove(const lmx_handle* token);

 private:
  std::mutex mu_;
  std::unordered_map<uintptr_t, std::shared_ptr<Handle>> live_;
  uint64_t next_serial_ = 1;
};

}  // namespace lmx::plugin
