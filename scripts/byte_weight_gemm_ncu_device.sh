#!/usr/bin/env bash
# Profiles the W8A16 GEMM (kernels/byte_weight_gemm.h) on the device: Nsight Compute sections of
# the benchmark's shape $NCU_SHAPE (default qkv; Llama-2-7B) at $NCU_ROWS rows (default 32 128), with $NCU_ARGS added to the
# benchmark's (e.g. "--wgmma-tile 128x128"), kernels matching $NCU_KERNEL (default byte_weight_gemm,
# the mma.sync kernel; byte_weight_wgmma for the other). (Its timings: scripts/byte_weight_gemm_device_check.sh.)
# Logs under $OUT. Carry: .devdeps.
source scripts/device_check_common.sh ncu
build_gpu "lmx_bench_byte_weight_gemm lmx" 300 || exit 1
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
sections=()
for s in SpeedOfLight MemoryWorkloadAnalysis MemoryWorkloadAnalysis_Tables WarpStateStats Occupancy \
  SchedulerStats LaunchStats; do sections+=(--section "$s"); done
# Where warps wait: cycles stalled on each reason per issued instruction.
sections+=(--metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio")
for r in ${NCU_ROWS:-32 128}; do
  step "ncu ${NCU_SHAPE:-qkv} rows $r ${NCU_ARGS:-}"
  # shellcheck disable=SC2086
  timeout 150 "$ncu" -k "regex:${NCU_KERNEL:-byte_weight_gemm}" --launch-count 1 "${sections[@]}" \
    build-gpu/bin/lmx_bench_byte_weight_gemm --rows "$r" --shape "${NCU_SHAPE:-qkv}" ${NCU_ARGS:-} >"$out/ncu_$r.txt" 2>&1
  grep -vE "^\s*$|----" "$out/ncu_$r.txt" | grep -E "Throughput|Duration|Warp Cycles|Stall|Occupancy|\
Bank|Eligible|Issued|Registers|Shared Memory|Block Limit|L2 Hit|L1/TEX Hit|Mem Busy|Max Bandwidth|\
Active Warps|Waves|bank|stall|OPT|WRN" | head -60
  grep -E "issue_stalled" "$out/ncu_$r.txt" | sort -k3 -g -r | head -8
done
step end
