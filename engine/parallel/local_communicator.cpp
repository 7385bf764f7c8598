// The in-process Communicator: N ranks as threads of one process.
//
// Every collective is one exchange (collective() below):
//   1. publish: each rank writes its call (which collective, buffer pointer, n, root) into its own
//      slot of the shared state;
//   2. barrier A: every slot is written, and every rank has finished the previous collective;
//   3. check: each rank compares all slots; they are read-only until barrier B, so every rank
//   reaches
//      the same verdict and builds the same message;
//   4. read: each rank reads the other ranks' buffers and writes only memory that no other rank
//      reads in this collective (its scratch, its own `out`, or, for broadcast, its own non-root
//      buffer);
//   5. barrier B: every rank has finished reading the slots and the other ranks' buffers;
//   6. after: all_reduce_sum copies its scratch into its own buffer; a mismatch throws.
// After barrier B a rank may write its own buffer and return, and its next collective may overwrite
// its slot: nobody reads either again until the next barrier A, which no rank passes before every
// rank has arrived there, i.e. finished step 6 of this collective. So two barriers per collective
// are enough; std::barrier is reusable across phases (a fast rank's arrival at the next barrier A
// counts towards that phase only). The barriers also order the memory accesses: a rank's writes
// before arriving happen before the others' reads after the barrier completes.
//
// A mismatch still passes barrier B on every rank before anyone throws, so no rank is left waiting
// and the group stays in step for the next collective.
#include <algorithm>
#include <barrier>
#include <cstring>
#include <exception>
#include <span>
#include <string>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/parallel/communicator.h"

namespace lmx {
namespace {

enum class Op { kAllReduceSum, kAllGather, kBroadcast, kBroadcastBytes };

// One rank's side of a collective, as published to the others.
struct Call {
  Op op;
  const void* data;  // the buffer the other ranks read: data (all_reduce_sum, broadcast) or in
  size_t n;          // elements: floats, or bytes for kBroadcastBytes
  int root;          // broadcast only; 0 otherwise

  bool operator==(const Call& o) const { return op == o.op && n == o.n && root == o.root; }
};

std::string describe(const Call& c) {
  switch (c.op) {
    case Op::kAllReduceSum:
      return fmt::format("all_reduce_sum(n={})", c.n);
    case Op::kAllGather:
      return fmt::format("all_gather(n={})", c.n);
    case Op::kBroadcast:
      return fmt::format("broadcast(n={}, root={})", c.n, c.root);
    case Op::kBroadcastBytes:
      return fmt::format("broadcast_bytes(bytes={}, root={})", c.n, c.root);
  }
  return "?";
}

// Why the ranks' calls do not make one collective ("" when they do). A function of `calls` only,
// so every rank gets the same answer.
std::string mismatch(std::span<const Call> calls) {
  const int ranks = int(calls.size());
  for (int r = 1; r < ranks; ++r) {
    if (!(calls[r] == calls[0])) {
      return fmt::format(
          "communicator: rank {} called {} but rank 0 called {} (every rank must "
          "make the same collective calls in the same order)",
          r, describe(calls[r]), describe(calls[0]));
    }
  }
  if ((calls[0].op == Op::kBroadcast || calls[0].op == Op::kBroadcastBytes) &&
      (calls[0].root < 0 || calls[0].root >= ranks)) {
    return fmt::format("communicator: broadcast root {} is not a rank of this group of {}",
                       calls[0].root, ranks);
  }
  return {};
}

// The state the ranks of one group share.
struct Group {
  explicit Group(int ranks) : barrier(ranks), calls(size_t(ranks)) {}
  std::barrier<> barrier;
  std::vector<Call> calls;  // [rank], written by that rank only, before barrier A
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return int(group_->calls.size()); }

  void all_reduce_sum(float* data, size_t n) override {
    if (size() == 1) return;
    collective({Op::kAllReduceSum, data, n, 0}, [&](std::span<const Call> calls) {
      // Per element: ((data_0 + data_1) + data_2) + ..., the same order on every rank.
      const float* first = static_cast<const float*>(calls[0].data);
      scratch_.assign(first, first + n);
      for (size_t r = 1; r < calls.size(); ++r) {
        const float* src = static_cast<const float*>(calls[r].data);
        for (size_t i = 0; i < n; ++i) scratch_[i] += src[i];
      }
    });
    std::copy_n(scratch_.data(), n, data);
  }

  void all_gather(const float* in, float* out, size_t n) override {
    collective({Op::kAllGather, in, n, 0}, [&](std::span<const Call> calls) {
      for (size_t r = 0; r < calls.size(); ++r)
        std::copy_n(static_cast<const float*>(calls[r].data), n, out + r * n);
    });
  }

  void broadcast(float* data, size_t n, int root) override {
    collective({Op::kBroadcast, data, n, root}, [&](std::span<const Call> calls) {
      if (rank_ != root) std::copy_n(static_cast<const float*>(calls[size_t(root)].data), n, data);
    });
  }

  void broadcast_bytes(void* data, size_t bytes, int root) override {
    collective({Op::kBroadcastBytes, data, bytes, root}, [&](std::span<const Call> calls) {
      if (rank_ != root && bytes > 0) std::memcpy(data, calls[size_t(root)].data, bytes);
    });
  }

 private:
  // Steps 1-5 of the file comment; read(calls) is step 4 and runs only when the calls match.
  // Without other ranks (size 1) there is nothing to wait for and no barrier.
  template <typename Read>
  void collective(const Call& call, Read&& read) {
    Group& g = *group_;
    const bool wait = size() > 1;
    g.calls[size_t(rank_)] = call;
    if (wait) g.barrier.arrive_and_wait();  // A
    const std::string error = mismatch(g.calls);
    std::exception_ptr failed;  // e.g. bad_alloc in scratch_; rethrown after B so no rank hangs
    if (error.empty()) {
      try {
        read(std::span<const Call>(g.calls));
      } catch (...) {
        failed = std::current_exception();
      }
    }
    if (wait) g.barrier.arrive_and_wait();  // B
    if (!error.empty()) throw Error(error);
    if (failed) std::rethrow_exception(failed);
  }

  std::shared_ptr<Group> group_;
  int rank_;
  std::vector<float> scratch_;  // all_reduce_sum's sum, copied into data after barrier B
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_local_communicators(int ranks) {
  if (ranks < 1) throw_error("make_local_communicators: ranks must be >= 1, got {}", ranks);
  auto group = std::make_shared<Group>(ranks);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < ranks; ++r) comms.push_back(std::make_unique<LocalCommunicator>(group, r));
  return comms;
}

}  // namespace lmx
