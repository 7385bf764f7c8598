// cudaStream_t without including the CUDA runtime, so op headers can declare their CUDA launchers
// next to the CPU reference and be included by host-only code (the CUDA runtime declares the same
// typedef).
#pragma once

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;
