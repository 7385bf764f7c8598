// Programmatic dependent launch (Hopper): lets a kernel start while the one before it in the
// stream is still running, so a decode step's weight streams do not wait for every small kernel's
// launch, ramp-up and tail.
//
// The contract, per pair of consecutive kernels (primary, then secondary):
// - the primary calls allow_dependents() once its blocks have started: the secondary's blocks may
//   then be scheduled on SMs it leaves free (a no-op when the secondary was launched normally);
// - the secondary is launched with launch_dependent(), and before it reads or writes anything the
//   primary (or an earlier kernel) writes or reads, calls wait_for_primary(), which returns once
//   the primary has completed and its memory is visible. Before that it may only read data no
//   kernel of the step writes (weights), or data last written two or more kernels back (below,
//   through L2: ld.global.cg / __ldcg). Data the primary writes must not be read through the
//   read-only path (ld.global.nc / __ldg / const __restrict__) even after the wait: it is not
//   read-only for the secondary's lifetime.
// Every kernel of a decode step is launched this way and waits at its top, except the decode
// GEMV (kernels/cuda/gemv.cu), which issues its first weight loads before waiting. Measured on
// an H100 (Llama-2-7B fp16, graphs): batch 1 5.55 ms a step with no dependent launches, 5.42
// with the GEMV alone, 5.32 with every kernel (batch 8: 6.70, 6.60, 6.53). Prefetching more of
// the weights into L2 before the wait (prefetch.global.L2, one or two iterations a warp) made it
// slower (5.51 / 5.73 ms with the GEMV alone): not done. The MHA decode attention
// (decode_warp_kernel) also starts early: it reads the step's metadata and gathers the K/V of
// positions before this step's (written by earlier steps) before waiting.
// Who lets its dependent in (calls allow_dependents() after its wait), measured in the same step
// (bench/RESULTS.md):
// - The decode GEMV, after its first tile. Its 128 KB weight ring leaves no room for a second
//   GEMV block on an SM, so the next projection's blocks take each SM as this one's block leaves
//   and start streaming there, filling the tail: batch 1 4.91-4.92 ms against 5.09-5.10, batch 8
//   6.01-6.02 against 6.16-6.17 (2026-11-22). With the earlier register-held GEMV, whose blocks
//   fit two to an SM, the next projection's blocks moved in beside the running ones and the step
//   was 17% slower (6.42-6.44 against 5.49-5.51 ms); only the qkv projection let its dependent,
//   the attention, in.
// - Not the MHA decode attention: with the output projection let in after its wait, a batch-1
//   step took 5.49-5.51 ms against 5.27-5.31 (its blocks fit beside the attention's, and their
//   loads queue in front of the attention's). Warming the output projection's weights into L2
//   from the attention (cp.async.bulk.prefetch.L2 once its own loads were out) was slower too:
//   5.16-5.18 against 5.09-5.12 ms. Extra traffic while the attention runs lengthens the step.
// What a kernel may read before its wait follows from this: every kernel calls allow_dependents()
// only after its own wait (or not at all), so when a kernel's blocks start, the kernel two places
// before it in the stream, and every earlier one, has completed. Data last written by those may
// be read before the wait (the decode GEMV's residual-add epilogue does: the residual it adds to
// was last written two or three kernels back).
// Kernels launched normally, and every kernel on GPUs before sm_90, behave as without it.
#pragma once

#include <cuda_runtime.h>

namespace lmx::kernels::cuda::pdl {

__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void wait_for_primary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// The launch attribute that makes a launch a programmatic dependent (for cudaLaunchKernelEx
// launches that need other attributes too).
inline cudaLaunchAttribute dependent_attribute() {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  return attribute;
}

// kernel<<<grid, block, smem, stream>>>(args...) as a programmatic dependent of the kernel
// before it in the stream (graph capture records the programmatic edge).
template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                      cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute = dependent_attribute();
  config.attrs = &attribute;
  config.numAttrs = 1;
  cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

}  // namespace lmx::kernels::cuda::pdl
