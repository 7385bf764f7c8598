#!/usr/bin/env bash
# The decode GEMV (kernels/cuda/gemv.cu) on the device: `lmx_bench_gemv` over 16-bit, int8 and
# E4M3 weights, beside variants of the kernel built from its compile-time knobs, alternated in one
# call (each variant is gemv.cu alone compiled with its flags and linked into the same benchmark).
# Logs under $OUT. Carry: .devdeps.
# Env: GEMV_VARIANTS ("name=-DFLAG=1 -DOTHER=2;name2=..."; none by default),
#      GEMV_RUNS ("args;args", the benchmark's options a run: by default int8 and E4M3 at fp16,
#      E4M3 at bf16 and 16-bit fp16, graphs, rows 1, 4, 8), GEMV_REPEAT (2: alternations),
#      GEMV_NCU (lmx_bench_gemv options to profile the first GEMV launch of with Nsight Compute's
#      sections, base and each variant; none by default).
source scripts/device_check_common.sh gemv
build_gpu "lmx_bench_gemv" 420 || [[ -x build-gpu/bin/lmx_bench_gemv ]] || exit 1
IFS=';' read -ra variants <<<"${GEMV_VARIANTS:-}"
bins=(base)
link=$(ninja -C build-gpu -t commands lmx_bench_gemv | tail -1)
for v in "${variants[@]}"; do
  name=${v%%=*} flags=${v#*=}
  step "variant $name: $flags"
  /usr/local/cuda/bin/nvcc -O3 -std=c++20 -arch=sm_90a -I. $flags -c kernels/cuda/gemv.cu \
    -o "build-gpu/gemv_$name.o" >"$out/nvcc_$name.log" 2>&1 &
done
wait
for v in "${variants[@]}"; do
  name=${v%%=*}
  [[ -f build-gpu/gemv_$name.o ]] || { cat "$out/nvcc_$name.log"; exit 1; }
  (cd build-gpu && eval "${link/-o bin\/lmx_bench_gemv/-o bin/gemv_$name gemv_$name.o}") ||
    { echo "link of $name failed"; exit 1; }
  bins+=("$name")
done
bin() { [[ $1 == base ]] && echo build-gpu/bin/lmx_bench_gemv || echo "build-gpu/bin/gemv_$1"; }
IFS=';' read -ra runs <<<"${GEMV_RUNS:---weights int8 --rows 1,4,8;--weights fp8 --rows 1,4,8;\
--weights fp8 --dtype bf16 --rows 1,4,8;--weights 16bit --rows 1,4,8}"
for ((r = 0; r < ${GEMV_REPEAT:-2}; ++r)); do
  for args in "${runs[@]}"; do
    for b in "${bins[@]}"; do
      step "$b $args (round $r)"
      timeout "$(limit 120)" "$(bin "$b")" --graph $args | tee "$out/${b}_${r}_$(echo $args | tr -c "a-z0-9" _).txt" | grep -v "^device"
    done
  done
done
if [[ -n ${GEMV_NCU:-} ]]; then
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  sections=()
  for s in SpeedOfLight MemoryWorkloadAnalysis WarpStateStats Occupancy SchedulerStats \
    InstructionStats SourceCounters; do sections+=(--section "$s"); done
  for b in "${bins[@]}"; do
    step "ncu $b: $GEMV_NCU"
    timeout "$(limit 120)" "$ncu" -k regex:skinny_kernel --launch-skip 8 --launch-count 1 \
      "${sections[@]}" "$(bin "$b")" $GEMV_NCU >"$out/ncu_$b.txt" 2>&1
    grep -vE "^\s*$|----" "$out/ncu_$b.txt" | grep -E "Throughput|Duration|Warp Cycles|Stall|\
Eligible|Issued|Registers|Active Warps|No Eligible|Executed Ipc|smsp__pcsamp|stall|OPT" | head -40
  done
fi
step end
