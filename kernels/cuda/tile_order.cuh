// The order a GEMM's blocks take their output tiles in (byte_weight_gemm.cuh, w8a8_wgmma.cu): one
// block a tile, x-row tiles in groups of kTileGroup, so that the blocks running together share
// their x rows and weight rows in L2.
#pragma once

namespace lmx::kernels::cuda {

inline constexpr int kTileGroup = 8;  // x-row tiles a group of blocks shares

// Tile `pid` of the grid as (x-row tile, weight-row tile), x-row tiles in groups of kTileGroup.
__device__ __forceinline__ void tile_of(int pid, int tiles_m, int tiles_n, int& tm, int& tn) {
  const int per_group = kTileGroup * tiles_n;
  const int first = pid / per_group * kTileGroup;
  const int size = min(tiles_m - first, kTileGroup);
  const int in_group = pid % per_group;
  tm = first + in_group % size;
  tn = in_group / size;
}

}  // namespace lmx::kernels::cuda
