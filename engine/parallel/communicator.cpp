#include "engine/parallel/communicator.h"

namespace lmx {

bool all_ranks_ok(Communicator& comm, bool ok) {
  float failed = ok ? 0.0f : 1.0f;  // ranks that failed, counted
  comm.all_reduce_sum(&failed, 1);
  return failed == 0.0f;
}

}  // namespace lmx
