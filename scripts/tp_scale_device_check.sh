#!/usr/bin/env bash
# One call on a 4-GPU kind (nvidia-h200-x4 / nvidia-h100-x4) for issue 22's degree-4 run and the
# one-shot all-reduce: builds lmx and the CUDA parity tests, checks the device all-reduce at
# degrees 2..4 (one-shot and NCCL, exact sums, eager and from graphs), then `lmx bench` of
# Llama-2-70B fp16 at degree 4 (random weights made in GPU memory: ~35 GB a GPU) and Llama-2-7B
# fp16 at degree 2, each with the one-shot all-reduce (the default) and with LMX_ALL_REDUCE=nccl,
# then the tensor-parallel parity tests with what time is left. Each step is bounded so the call
# ends inside the device's 10 minutes; logs under $OUT.
# Carry: .devdeps, .cache/shared_models.
source "$(dirname "$0")/device_check_common.sh" tp-scale-check
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
nvidia-smi topo -m | head -8
step "build"
build_gpu "lmx lmx_cuda_parity_tests" "$(limit 300)" || exit 1
step "device all-reduce, degrees 2..4"
timeout "$(limit 90)" build-gpu/bin/lmx_cuda_parity_tests --gtest_filter='TensorParallelAllReduce.*' \
  >"$out/all_reduce_test.log" 2>&1
echo "exit $?"
grep -E "^\[  (PASSED|FAILED|  OK) |Failure|Expected|stuck|one-shot" "$out/all_reduce_test.log" | cut -c1-200 | head -20
bench() {  # NAME TIMEOUT ALL_REDUCE ARGS...  (ALL_REDUCE: auto or nccl, as LMX_ALL_REDUCE)
  local name=$1 t=$2 path=$3; shift 3
  step "bench $name (LMX_ALL_REDUCE=$path): $*"
  LMX_ALL_REDUCE=$path timeout "$(limit "$t")" build-gpu/bin/lmx bench --dtype fp16 --context 512 --graphs "$@" \
    >"$out/bench_$name.txt" 2>&1
  echo "exit $?"
  grep -vE "^\[|^$" "$out/bench_$name.txt" | tail -14
}
bench 70b_tp4 150 auto --shape llama-2-70b --prefill 512,4096 --batches 1,32 --steps 16 --tensor-parallel-degree 4
bench 70b_tp4_nccl 100 nccl --shape llama-2-70b --prefill 512 --batches 1,32 --steps 16 --tensor-parallel-degree 4
bench 7b_tp2 70 auto --shape llama-2-7b --prefill 512 --batches 1,32,128 --steps 24 --tensor-parallel-degree 2
bench 7b_tp2_nccl 70 nccl --shape llama-2-7b --prefill 512 --batches 1,32,128 --steps 24 --tensor-parallel-degree 2
step "parity: tensor parallel at degrees 2..4"
timeout "$(limit 200)" build-gpu/bin/lmx_cuda_parity_tests --gtest_brief=1 \
  --gtest_filter='*TensorParallel*' >"$out/parity.log" 2>&1
echo "exit $?"
grep -E "^\[  (PASSED|FAILED) |Failure|tests ran" "$out/parity.log" | cut -c1-160 | head -30
step "end"
