#include "engine/parallel/mpi_communicator.h"

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "engine/core/error.h"

#if LMX_HAVE_MPI
#define OMPI_SKIP_MPICXX \
  1  // the C API only (the C++ bindings are deprecated and need their library)
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <vector>
#endif

namespace lmx {

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && std::atoi(v) > 1) return true;
  }
  return false;
}

LaunchedRank launched_rank() {
  struct Names {
    const char* size;
    const char* rank;
  };
  for (const Names& n : {Names{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
                         Names{"PMI_SIZE", "PMI_RANK"}}) {
    const char* size_text = std::getenv(n.size);
    const int size = size_text == nullptr ? 0 : std::atoi(size_text);
    if (size <= 1) continue;
    const char* rank_text = std::getenv(n.rank);
    int rank = -1;
    if (rank_text != nullptr) {
      const char* end = rank_text + std::strlen(rank_text);
      auto [ptr, ec] = std::from_chars(rank_text, end, rank);
      if (ec != std::errc() || ptr != end) rank = -1;
    }
    if (rank < 0 || rank >= size)
      throw_error("this process was started by an MPI launcher ({}={}) but {} is {}, not a rank "
                  "from 0 to {}",
                  n.size, size_text, n.rank, rank_text == nullptr ? "unset" : rank_text, size - 1);
    return {rank, size};
  }
  return {};
}

namespace {
std::atomic<bool> g_group_ended_together{false};
}  // namespace

void mpi_group_ended_together() { g_group_ended_together = true; }

#if LMX_HAVE_MPI
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw_error("MPI {} failed: {}", what, std::string(text, size_t(len)));
}

// MPI_Init once a process; MPI_Finalize when the process exits, if the group ended together
// (mpi_group_ended_together). The collectives of one group are made by one thread at a time (the
// engine's), so MPI_THREAD_SERIALIZED is enough.
void ensure_initialized() {
  static const bool initialized = [] {
    int done = 0;
    MPI_Initialized(&done);
    if (!done) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "init");
      if (provided < MPI_THREAD_SERIALIZED)
        throw_error("MPI provides thread level {}, LMX needs MPI_THREAD_SERIALIZED", provided);
      std::atexit([] {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized && g_group_ended_together) MPI_Finalize();
      });
    }
    return true;
  }();
  (void)initialized;
}

// MPI counts are ints: larger transfers go in pieces.
template <typename Fn>
void in_pieces(size_t bytes, Fn&& fn) {
  constexpr size_t kPiece = size_t(1) << 30;
  for (size_t at = 0; at < bytes; at += kPiece) fn(at, int(std::min(kPiece, bytes - at)));
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  // Every rank's data, summed in rank order: bitwise the same on every rank and as the
  // in-process communicator (MPI_Allreduce does not promise an order).
  void all_reduce_sum(float* data, size_t n) override {
    if (size_ == 1 || n == 0) return;
    gathered_.resize(size_t(size_) * n);
    all_gather(data, gathered_.data(), n);
    std::copy_n(gathered_.data(), n, data);
    for (int r = 1; r < size_; ++r) {
      const float* src = gathered_.data() + size_t(r) * n;
      for (size_t i = 0; i < n; ++i) data[i] += src[i];
    }
  }

  void all_gather(const float* in, float* out, size_t n) override {
    if (n > size_t(INT_MAX)) throw_error("MPI all_gather of {} floats is too large", n);
    check(MPI_Allgather(in, int(n), MPI_FLOAT, out, int(n), MPI_FLOAT, MPI_COMM_WORLD),
          "all_gather");
  }

  void broadcast(float* data, size_t n, int root) override {
    broadcast_bytes(data, n * sizeof(float), root);
  }

  void broadcast_bytes(void* data, size_t bytes, int root) override {
    if (root < 0 || root >= size_)
      throw_error("communicator: broadcast root {} is not a rank of this group of {}", root, size_);
    in_pieces(bytes, [&](size_t at, int count) {
      check(MPI_Bcast(static_cast<char*>(data) + at, count, MPI_BYTE, root, MPI_COMM_WORLD),
            "broadcast");
    });
  }

 private:
  int rank_ = 0, size_ = 1;
  std::vector<float> gathered_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() {
  ensure_initialized();
  return std::make_unique<MpiCommunicator>();
}

#else

std::unique_ptr<Communicator> make_mpi_communicator() {
  throw_error(
      "this process was started by mpirun, but this build of LMX has no MPI (install "
      "libopenmpi-dev and rebuild)");
}

#endif

}  // namespace lmx
