#!/usr/bin/env bash
# Profiles the W8A16 GEMM (kernels/byte_weight_gemm.h) on the device: its split target tried at
# 1, 2 and 4 blocks an SM, then Nsight Compute sections of the qkv shape at 32 and 128 rows.
# Logs under $OUT. Carry: .devdeps.
source scripts/device_check_common.sh ncu
build_gpu "lmx_bench_byte_weight_gemm lmx" 300 || exit 1
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
B=build-gpu/bin/lmx_bench_byte_weight_gemm
for bps in 1 2 4; do step "bps $bps"; timeout 60 $B --rows 16,32,128 --blocks-per-sm $bps | grep -v device | cut -c1-150; done
for r in 32 128; do
  step "ncu rows $r"
  timeout 150 "$ncu" -k regex:byte_weight_gemm --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section Occupancy --section SchedulerStats --section LaunchStats $B --rows $r --shape qkv > "$out/ncu_$r.txt" 2>&1
  grep -vE "^\s*$|----" "$out/ncu_$r.txt" | grep -E "Throughput|Duration|Warp Cycles|Stall|Occupancy|Bank|Eligible|Issued|Registers|Shared Memory|Block Limit|L2 Hit|L1/TEX Hit|Mem Busy|Max Bandwidth|Active Warps|Waves|bank|stall|OPT|WRN" | head -60
done
step end
