#!/usr/bin/env bash
# One call on a 2-GPU kind (nvidia-h200-x2 / nvidia-h100-x2) for issue 22: builds lmx and the
# CUDA parity tests, runs the tensor-parallel parity tests and the quantized ones (their degree-2
# halves run where 2 GPUs are visible), then `lmx bench` of Llama-2-70B fp16 and fp8 at degree 2
# (random weights made in GPU memory: 69 / 35 GB a GPU) and fp8 at degree 1 on one GPU.
# Each step is bounded; logs under $OUT. Carry: .devdeps, .cache/shared_models.
source "$(dirname "$0")/device_check_common.sh" tp-check
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
step "build"
build_gpu "lmx lmx_cuda_parity_tests" "${BUILD_TIMEOUT:-300}" || exit 1
step "parity: tensor parallel, fp8, dynamic_int8, smoothquant"
timeout "${PARITY_TIMEOUT:-150}" build-gpu/bin/lmx_cuda_parity_tests --gtest_brief=1 \
  --gtest_filter='*TensorParallel*:*Fp8Matches*:*DynamicInt8*:*SmoothQuant*' >"$out/parity.log" 2>&1
echo "exit $?"
grep -E "^\[  (PASSED|FAILED) |Failure|degree 2" "$out/parity.log" | cut -c1-160 | head -30
L="--shape llama-2-70b --dtype fp16 --prefill 512,4096 --batches 1,32 --context 512 --steps 16 --graphs"
for run in "--tensor-parallel-degree 2" "--tensor-parallel-degree 2 --quantize fp8" \
           "--tensor-parallel-degree 1 --quantize fp8"; do
  step "bench llama-2-70b $run"
  # shellcheck disable=SC2086
  timeout "${BENCH_TIMEOUT:-150}" build-gpu/bin/lmx bench $L $run 2>&1 | tee -a "$out/bench.txt"
done
step "end"
