#!/usr/bin/env bash
# One device call for smoothquant's W8A8 on CUDA (issue 19): builds the GPU targets, runs the
# W8A8 / int8 kernel tests, the int8 GEMM microbenchmark at Llama-2-7B's prefill shapes, the
# quantized CUDA-vs-CPU parity tests, and `lmx bench` of Llama-2-7B fp16 against smoothquant and
# dynamic_int8 in the same lease. Each step is bounded; logs under $OUT.
# Carry: .devdeps, .cache/shared_models.
source "$(dirname "$0")/device_check_common.sh" w8a8-check
step "build"
build_gpu "lmx_cuda_kernel_tests lmx_cuda_parity_tests lmx lmx_bench_int8_gemm" \
  "${BUILD_TIMEOUT:-330}" || exit 1
step "W8A8 + int8 kernel tests"
timeout 120 build-gpu/bin/lmx_cuda_kernel_tests \
  --gtest_filter='*W8A8*:*Int8Gemm*:*Int8Cuda*:*ByteWeightGemv*' >"$out/kernels.log" 2>&1
echo "exit $?"; grep -E "^\[  (PASSED|FAILED) |^\[ int8 gemm|Failure|Expected|Which is|OK \]" "$out/kernels.log" | head -40
step "int8 GEMM microbenchmark"
timeout 120 build-gpu/bin/lmx_bench_int8_gemm --rows 512,4096 2>&1 | tee "$out/int8_gemm.txt"
step "quantized parity (smoothquant, dynamic_int8)"
timeout 150 build-gpu/bin/lmx_cuda_parity_tests --gtest_brief=1 \
  --gtest_filter='*SmoothQuant*:*DynamicInt8*' >"$out/parity.log" 2>&1
echo "exit $?"; grep -E "^\[  (PASSED|FAILED) |Failure|Expected|Which is|^\[ (w8a8|int8)" "$out/parity.log" | head -60
L="--shape llama-2-7b --prefill 512,4096 --batches 1,32,128 --context 512 --steps 24 --graphs"
for q in none smoothquant dynamic_int8; do
  step "bench llama-2-7b fp16 quantize=$q"
  # shellcheck disable=SC2086
  timeout 90 build-gpu/bin/lmx bench $L --dtype fp16 --quantize $q 2>&1 | tee -a "$out/bench.txt"
done
step "end"
