#!/usr/bin/env bash
# Per-kernel time of one decode step (Llama-2-7B shape by default, fp16), for the device machine: builds
# `lmx`, times graph-replayed steps with `lmx bench`, then runs Nsight Compute over eager steps and
# sums the last step's kernels by name (scripts/ncu_step_summary.py). Logs under $OUT.
# Usage: run(command="bash scripts/profile_decode_device.sh", carry=[".devdeps"])
# Env: PROFILE_SHAPE (llama-2-7b; any `lmx shapes` name), PROFILE_BATCHES (default "1 32"),
# PROFILE_CONTEXT (512), PROFILE_PREFILL (the profiled run's prompt, 4096), PROFILE_DTYPE (fp16),
# PROFILE_ARGS (more `lmx bench` options, e.g. "--quantize dynamic_int8"), SKIP_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build-gpu/profile}
mkdir -p "$out"
if [[ -z ${SKIP_BUILD:-} ]]; then
  extra=()
  [[ -d .devdeps ]] && extra+=(-DLMX_DEVDEPS="$PWD/.devdeps" -DLMX_BUILTIN_BLAS=ON)
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLMX_WITH_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DLMX_WERROR=ON "${extra[@]}" >"$out/configure.log" 2>&1 ||
    { tail -30 "$out/configure.log"; exit 1; }
  ninja -C build-gpu lmx >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
fi
shape=${PROFILE_SHAPE:-llama-2-7b}
ctx=${PROFILE_CONTEXT:-512}
batches=${PROFILE_BATCHES:-1 32}
dtype=${PROFILE_DTYPE:-fp16}
read -ra more <<<"${PROFILE_ARGS:-}"
build-gpu/bin/lmx bench --shape "$shape" --dtype "$dtype" "${more[@]}" --prefill 512 --batches "$(echo $batches | tr ' ' ,)" \
  --context "$ctx" --steps 24 --graphs | tee "$out/bench_graphs.txt"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for b in $batches; do
  "$ncu" --csv --metrics gpu__time_duration.sum --cache-control none --clock-control none \
    build-gpu/bin/lmx bench --shape "$shape" --dtype "$dtype" "${more[@]}" --prefill "${PROFILE_PREFILL:-4096}" --batches "$b" \
    --context "$ctx" --steps 2 >"$out/ncu_b$b.csv" 2>"$out/ncu_b$b.err" || { tail -20 "$out/ncu_b$b.err"; }
  python3 scripts/ncu_step_summary.py "$out/ncu_b$b.csv" | tee "$out/summary_b$b.txt"
done
