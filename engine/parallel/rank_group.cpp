#include "engine/parallel/rank_group.h"

#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "engine/backend/sample_rows.h"
#include "engine/core/error.h"
#include "engine/core/load_deadline.h"
#include "engine/core/log.h"
#include "engine/parallel/mpi_communicator.h"
#include "engine/parallel/rank_step.h"

namespace lmx {
namespace {

// Builds a rank's backend and agrees with the other ranks that all of them built theirs. Returns
// null (with `error` set when this rank was the one that failed) when some rank failed.
std::unique_ptr<Backend> build_rank(Communicator& comm, const MakeRank& make_rank,
                                    std::exception_ptr& error) {
  std::unique_ptr<Backend> backend;
  try {
    backend = make_rank(comm);
  } catch (...) {
    error = std::current_exception();
  }
  if (!all_ranks_ok(comm, backend != nullptr)) return nullptr;
  return backend;
}

// The non-leader's loop. A step that throws throws on the leader too (every rank runs the same
// checks on the same step before its first collective), so the rank goes on with the next one.
void run_steps(Communicator& comm, Backend& backend) {
  while (std::optional<RankStep> step = receive_step(comm)) {
    try {
      if (step->draws.empty())
        backend.forward_discard(step->chunks);
      else
        backend.forward_sample_discard(step->chunks, step->draws);
    } catch (const std::exception& e) {
      lmx::logger().debug("tensor-parallel rank {}: step failed as on the leader: {}", comm.rank(),
                          e.what());
    }
  }
}

class RankGroup final : public Backend {
 public:
  // `comm` is rank 0's. `followers` (thread groups) are joined after the stop message.
  RankGroup(std::unique_ptr<Backend> leader, Communicator& comm,
            std::vector<std::unique_ptr<Communicator>> owned_comms,
            std::vector<std::thread> followers, std::unique_ptr<Communicator> owned_comm)
      : leader_(std::move(leader)),
        comm_(comm),
        owned_comms_(std::move(owned_comms)),
        owned_comm_(std::move(owned_comm)),
        followers_(std::move(followers)) {}

  ~RankGroup() override {
    try {
      send_stop(comm_);
      if (owned_comm_) mpi_group_ended_together();  // every process has the stop message
    } catch (const std::exception& e) {
      lmx::logger().error("tensor-parallel group: could not stop the other ranks: {}", e.what());
    }
    // The leader's part goes while the others free theirs: freeing a device communicator may wait
    // for its peers (NCCL), so no rank may wait for another to finish first.
    leader_.reset();
    for (std::thread& t : followers_) t.join();
  }

  const DecoderDesc& desc() const override { return leader_->desc(); }
  const KvCacheShape& kv_shape() const override { return leader_->kv_shape(); }
  std::string name() const override { return leader_->name(); }
  std::string kv_cache_dtype_name() const override { return leader_->kv_cache_dtype_name(); }
  int tensor_parallel_degree() const override { return comm_.size(); }
  bool draws_sharded() const override { return leader_->draws_sharded(); }

  void forward(std::span<const BatchChunk> chunks, std::vector<float>& logits) override {
    send_step(comm_, chunks);
    leader_->forward(chunks, logits);
  }

  // Rows the ranks draw together (Backend::draws_sharded) go with the step; otherwise the other
  // ranks run forward(), whose collectives a gathered forward_sample makes too.
  void forward_sample(std::span<const BatchChunk> chunks, std::span<const SampleSpec> rows,
                      std::span<SampledToken> out, std::vector<float>* logits) override {
    // Checked before any rank starts: a leader that failed after its layers would leave the
    // others waiting in the draw's gather.
    check_sample_rows(rows.size(), out.size(), rows.size());
    if (leader_->draws_sharded() && draw_without_gather(rows, leader_->desc().vocab_size)) {
      std::vector<kernels::SamplingRow> draws;
      for (const SampleSpec& r : rows) draws.push_back(r.params);
      send_step(comm_, chunks, draws);
    } else {
      send_step(comm_, chunks);
    }
    leader_->forward_sample(chunks, rows, out, logits);
  }

  nlohmann::json take_profile() override { return leader_->take_profile(); }

 private:
  std::unique_ptr<Backend> leader_;
  Communicator& comm_;
  std::vector<std::unique_ptr<Communicator>> owned_comms_;  // thread group: every rank's
  std::unique_ptr<Communicator> owned_comm_;                // MPI: this process's
  std::vector<std::thread> followers_;
};

// Every process of an MPI group learns every process's degree first, so that a process count
// other than the degree, or degrees that differ between processes (given to some only), is the
// same error on every process, and none is left waiting in a collective for the others.
void check_same_degree(Communicator& comm, int degree) {
  std::vector<float> degrees(size_t(comm.size()));  // small integers: exact in a float
  const float mine = float(degree);
  comm.all_gather(&mine, degrees.data(), 1);
  std::string listed;
  bool same = true;
  for (size_t r = 0; r < degrees.size(); ++r) {
    listed += fmt::format("{}process {}: {}", r == 0 ? "" : ", ", r, int(degrees[r]));
    same = same && degrees[r] == degrees[0];
  }
  if (same && comm.size() == degree) return;
  mpi_group_ended_together();  // every process throws here
  if (!same)
    throw_error("the processes of this mpirun group were given different tensor-parallel degrees "
                "({}); give every process the same option.tensor_parallel_degree",
                listed);
  throw_error("mpirun started {} processes but the tensor-parallel degree is {}; start one "
              "process a rank",
              comm.size(), degree);
}

}  // namespace

std::unique_ptr<Backend> make_thread_group(int degree, const MakeRank& make_rank) {
  if (degree < 1) throw_error("tensor_parallel_degree must be at least 1, got {}", degree);
  auto comms = make_local_communicators(degree);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(degree));
  std::vector<std::thread> followers;
  for (int r = 1; r < degree; ++r) {
    // make_rank and errors are used only before the ranks agree that all of them built, which
    // the leader waits for below.
    // A rank builds under the load deadline of the thread that starts the group (if any).
    followers.emplace_back([comm = comms[size_t(r)].get(), error = &errors[size_t(r)], &make_rank,
                            deadline = current_load_deadline()] {
      std::unique_ptr<Backend> backend;
      {
        LoadDeadlineScope scope(deadline);
        backend = build_rank(*comm, make_rank, *error);
      }
      if (backend) run_steps(*comm, *backend);
    });
  }
  std::unique_ptr<Backend> leader = build_rank(*comms[0], make_rank, errors[0]);
  if (!leader) {
    for (std::thread& t : followers) t.join();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
    throw_error("a tensor-parallel rank failed to build its part of the model");
  }
  Communicator& comm0 = *comms[0];
  return std::make_unique<RankGroup>(std::move(leader), comm0, std::move(comms),
                                     std::move(followers), nullptr);
}

std::unique_ptr<Backend> lead_group(std::unique_ptr<Communicator> comm, const MakeRank& make_rank) {
  if (comm->rank() != 0) throw_error("internal: lead_group on rank {}", comm->rank());
  std::exception_ptr error;
  std::unique_ptr<Backend> leader = build_rank(*comm, make_rank, error);
  if (!leader) mpi_group_ended_together();  // every rank agreed that one failed
  if (error) std::rethrow_exception(error);
  if (!leader)
    throw_error(
        "another tensor-parallel rank (process) failed to build its part of the model; "
        "its log says why");
  Communicator& c = *comm;
  return std::make_unique<RankGroup>(std::move(leader), c,
                                     std::vector<std::unique_ptr<Communicator>>{},
                                     std::vector<std::thread>{}, std::move(comm));
}

void follow_leader(Communicator& comm, const MakeRank& make_rank) {
  std::exception_ptr error;
  std::unique_ptr<Backend> backend = build_rank(comm, make_rank, error);
  if (!backend) mpi_group_ended_together();  // every rank agreed that one failed
  if (error) std::rethrow_exception(error);
  if (!backend)
    throw_error("tensor-parallel rank {}: another rank failed to build its part of the model",
                comm.rank());
  run_steps(comm, *backend);
  mpi_group_ended_together();  // the leader stopped the group
}

std::unique_ptr<Backend> launch_ranks(int degree, const MakeRank& make_rank) {
  if (!launched_by_mpi()) return make_thread_group(degree, make_rank);
  std::unique_ptr<Communicator> comm = make_mpi_communicator();
  check_same_degree(*comm, degree);
  if (comm->rank() == 0) return lead_group(std::move(comm), make_rank);
  follow_leader(*comm, make_rank);
  return nullptr;
}

}  // namespace lmx
