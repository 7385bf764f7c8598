#!/usr/bin/env bash
# Profiles the W8A16 GEMM (kernels/byte_weight_gemm.h) on the device: Nsight Compute sections of
# its qkv shape (Llama-2-7B) at 32 and 128 rows. (Its timings: scripts/byte_weight_gemm_device_check.sh.)
# Logs under $OUT. Carry: .devdeps.
source scripts/device_check_common.sh ncu
build_gpu "lmx_bench_byte_weight_gemm lmx" 300 || exit 1
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
sections=()
for s in SpeedOfLight MemoryWorkloadAnalysis MemoryWorkloadAnalysis_Tables WarpStateStats Occupancy \
  SchedulerStats LaunchStats; do sections+=(--section "$s"); done
for r in 32 128; do
  step "ncu rows $r"
  timeout 150 "$ncu" -k regex:byte_weight_gemm --launch-count 1 "${sections[@]}" \
    build-gpu/bin/lmx_bench_byte_weight_gemm --rows "$r" --shape qkv >"$out/ncu_$r.txt" 2>&1
  grep -vE "^\s*$|----" "$out/ncu_$r.txt" | grep -E "Throughput|Duration|Warp Cycles|Stall|Occupancy|\
Bank|Eligible|Issued|Registers|Shared Memory|Block Limit|L2 Hit|L1/TEX Hit|Mem Busy|Max Bandwidth|\
Active Warps|Waves|bank|stall|OPT|WRN" | head -60
done
step end
