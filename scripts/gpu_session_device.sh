#!/usr/bin/env bash
# One device call that does what a session's GPU check needs, in order of value, each step bounded
# so that the logs of the finished ones come back even when a later one runs long:
#   1. builds the working tree (build-gpu/, every target) and, when BASE_SRC is set, `lmx` of an
#      earlier commit (build-base/), in parallel;
#   2. the GPU suite (scripts/gpu_tests.sh: kernel tests, CUDA parity incl. tensor parallelism on
#      2+ GPUs, scheduler, every family through lmx-server);
#   3. `lmx bench` base against new (scripts/bench_compare_device.sh) with BENCH_ARGS;
#   4. on 2+ GPUs, the same bench at --tensor-parallel-degree 2.
# Logs go to $OUT/logs.tar.gz (the device returns few files) plus a summary on stdout.
# Carry: .devdeps, .cache/shared_models (a copy of ../shared/models), .cache/base-src.
#   BASE_SRC=.cache/base-src bash scripts/gpu_session_device.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared hosts (device KINDS.md)
out=${OUT:-gpu-session}
logs=$(mktemp -d)
started=$SECONDS
step() { echo "== [$((SECONDS - started)) s] $*"; }
pack() { tar -czf "$out/logs.tar.gz" -C "$logs" . 2>/dev/null; }
trap pack EXIT
# The CUDA parity tests read the shared tiny models from ../shared/models.
if [[ -d .cache/shared_models && ! -d ../shared/models ]]; then
  mkdir -p ../shared && cp -r .cache/shared_models ../shared/models
fi
bench_args=${BENCH_ARGS:-"--shape llama-2-7b --dtype fp16 --prefill 512,4096 --batches 1,32,128 --context 512 --steps 24 --graphs"}

step "build"
extra=()
if [[ -d .devdeps ]]; then
  extra+=(-DLMX_DEVDEPS="$PWD/.devdeps" -DLMX_BUILTIN_BLAS=ON)
  source scripts/unpack_device_deps.sh
fi
if [[ -n ${BASE_SRC:-} ]]; then
  (cmake -S "$BASE_SRC" -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLMX_WITH_CUDA=ON \
     -DCMAKE_CUDA_ARCHITECTURES=90a "${extra[@]}" && ninja -C build-base lmx) >"$logs/build-base.log" 2>&1 &
fi
OUT=$logs timeout "${SUITE_TIMEOUT:-420}" bash scripts/gpu_tests.sh >"$logs/gpu_tests.log" 2>&1
echo "gpu_tests exit $?" >>"$logs/gpu_tests.log"
wait
step "GPU suite done"
grep -E "^== |PASSED|FAILED|Failure|checks passed|FAIL|exit|GPUs|error:" "$logs/gpu_tests.log" | head -60

if [[ -x build-gpu/bin/lmx ]]; then
  step "bench: base against new"
  OUT=$logs/bench timeout "${BENCH_TIMEOUT:-240}" bash scripts/bench_compare_device.sh "$bench_args" 2>&1 | tail -12
  if (($(nvidia-smi -L | wc -l) >= 2)); then
    step "bench: tensor parallel degree 2"
    # shellcheck disable=SC2086
    timeout 120 build-gpu/bin/lmx bench $bench_args --tensor-parallel-degree 2 --json \
      >"$logs/bench-tp2.json" 2>"$logs/bench-tp2.log"
    echo "exit $?"; tail -5 "$logs/bench-tp2.log"; head -c 3000 "$logs/bench-tp2.json"; echo
  fi
fi
step "end"
