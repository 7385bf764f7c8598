#!/usr/bin/env bash
# Device calls on a 2-GPU kind for the sharded draw and the loader (issues 17 and 22), one phase a
# call (the builds stay on the warm machine between calls):
#   PHASE=build: builds the tree (lmx, CUDA kernel and parity tests) and, from BASE_SRC (an earlier
#     commit's `git archive`, carried), lmx into build-base/, side by side; then the sampling
#     kernel tests and every tensor-parallel parity test (the sharded draw among them).
#   PHASE=bench: Llama-2-7B fp16 degree 2 decode, base and tree alternating (bench_compare's
#     runs), then the loader: sparse Llama-2-7B checkpoints at degree 1 and 2 and Llama-2-70B at
#     degree 2 (scripts/make_sparse_checkpoint.py: real file sizes, data are holes), each loaded by
#     `lmx generate --report-load` (load time and the process's peak RSS; ranks are its threads).
#   PHASE=load: builds lmx and the CUDA parity tests from the tree and lmx from BASE_SRC, runs every
#     CUDA parity test (both GPUs), then loads the sparse checkpoints above with each build (the
#     70B one with the tree only).
# Logs under $OUT. Carry: .devdeps, .cache/shared_models, .cache/base-src.
source "$(dirname "$0")/device_check_common.sh" tp-draw-load
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
free -g | head -2
load_sparse() {  # BUILD "SHAPE DEGREE"...: a sparse checkpoint of each shape loaded at the degree
  local b=$1 spec
  shift
  for spec in "$@"; do
    set -- $spec
    step "loader ($b): sparse $1 at degree $2"
    "$b/bin/lmx" shapes --config "$1" >"$out/$1.json"
    rm -rf /tmp/sparse && python3 scripts/make_sparse_checkpoint.py "$out/$1.json" /tmp/sparse
    timeout 400 "$b/bin/lmx" generate --model /tmp/sparse --device cuda --dtype fp16 \
      --prompt-ids 1,2,3 --max-new-tokens 2 --tensor-parallel-degree "$2" --report-load 2>&1 |
      tail -3 | tee "$out/load-$b-$1-$2.txt"
  done
  rm -rf /tmp/sparse
}
case ${PHASE:?PHASE=build, bench or load} in
build)
  step "build tree and base"
  build_base &
  build_gpu "lmx lmx_cuda_kernel_tests lmx_cuda_parity_tests" "${BUILD_TIMEOUT:-420}" || exit 1
  wait
  step "kernel tests: sampling"
  build-gpu/bin/lmx_cuda_kernel_tests --gtest_brief=1 --gtest_filter='CudaSampling.*' 2>&1 | tail -5
  step "parity: tensor parallel"
  LMX_REQUIRE_GPU=1 timeout "${PARITY_TIMEOUT:-240}" build-gpu/bin/lmx_cuda_parity_tests \
    --gtest_brief=1 --gtest_filter='*TensorParallel*' >"$out/parity.log" 2>&1
  echo "exit $?"
  grep -E "^\[  (PASSED|FAILED) |Failure|tests ran" "$out/parity.log" | cut -c1-160 | head -30
  ;;
bench)
  step "decode, llama-2-7b fp16, degree 2: base then tree"
  L="--shape llama-2-7b --dtype fp16 --prefill 512 --batches 1,32,128 --context 512 --steps 24 --graphs --tensor-parallel-degree 2"
  for round in 1 2; do
    for b in build-base build-gpu; do
      echo "-- $b round $round"
      # shellcheck disable=SC2086
      timeout 150 "$b/bin/lmx" bench $L 2>&1 | tee -a "$out/bench-$b.txt"
    done
  done
  load_sparse build-gpu "llama-2-7b 1" "llama-2-7b 2" "llama-2-70b 2"
  ;;
load)
  step "build tree and base"
  build_base &
  build_gpu "lmx lmx_cuda_parity_tests" "${BUILD_TIMEOUT:-420}" || exit 1
  wait
  step "parity: every CUDA parity test"
  LMX_REQUIRE_GPU=1 timeout "${PARITY_TIMEOUT:-240}" build-gpu/bin/lmx_cuda_parity_tests \
    --gtest_brief=1 >"$out/parity.log" 2>&1
  echo "exit $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|tests ran" "$out/parity.log" | cut -c1-160 | head -30
  for b in build-base build-gpu; do load_sparse "$b" "llama-2-7b 1" "llama-2-7b 2"; done
  load_sparse build-gpu "llama-2-70b 2"
  ;;
esac
step "end"
