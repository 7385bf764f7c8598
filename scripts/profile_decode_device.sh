#!/usr/bin/env bash
# Per-kernel time of one decode step (Llama-2-7B shape by default, fp16), for the device machine: builds
# `lmx`, times graph-replayed steps with `lmx bench`, then runs Nsight Compute over eager steps and
# sums the last step's kernels by name (scripts/ncu_step_summary.py). Logs under $OUT.
# Usage: run(command="bash scripts/profile_decode_device.sh", carry=[".devdeps"])
# Env: PROFILE_SHAPE (llama-2-7b; any `lmx shapes` name), PROFILE_BATCHES (default "1 32"),
# PROFILE_CONTEXT (512), PROFILE_PREFILL (the profiled run's prompt, 4096), PROFILE_DTYPE (fp16),
# PROFILE_ARGS (more `lmx bench` options, e.g. "--quantize dynamic_int8"), SKIP_BUILD=1.
source "$(dirname "$0")/device_check_common.sh" build-gpu/profile  # configure_tree, $out
set -e
if [[ -z ${SKIP_BUILD:-} ]]; then
  configure_tree . build-gpu || { tail -30 "$out/configure-build-gpu.log"; exit 1; }
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
