// --device cpu|cuda and --dtype fp32|fp16|bf16 (cuda only), shared by lmx generate and lmx
// perplexity, and the backend both build from them: one sequence at a time.
#pragma once

#include <memory>
#include <string>

#include "args.h"
#include "engine/backend/backend.h"
#include "engine/model/model.h"

namespace lmx::cli {

inline constexpr const char* kDeviceFlag = "--device";
inline constexpr const char* kDtypeFlag = "--dtype";

struct DeviceChoice {
  bool cuda = false;
  std::string dtype = "fp16";  // cuda's activations; the CPU backend computes in fp32
};

// --device (default cpu) and --dtype (default fp16). Throws lmx::Error naming the flag for a
// device other than cpu / cuda, and for --dtype with the CPU.
DeviceChoice device_from_args(const Args& args);

// A backend on `d` for one sequence of up to `tokens` tokens (KV blocks of 16), split over
// `degree` tensor-parallel ranks (engine/parallel/rank_group.h). Null on a process of an mpirun
// group other than 0, once the leader has finished. Throws lmx::Error for cuda in a build without
// the CUDA backend.
std::unique_ptr<Backend> make_one_sequence_backend(const LoadedModel& model, const DeviceChoice& d,
                                                   int tokens, int degree = 1);

}  // namespace lmx::cli
