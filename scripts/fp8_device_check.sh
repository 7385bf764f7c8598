#!/usr/bin/env bash
# One device call for option.quantize=fp8 on CUDA (issue 26): builds the GPU targets, runs the
# fp8 kernel tests (and the int8 / W8A8 ones, which share the tuned cuBLASLt GEMM and the GEMV),
# the GEMM microbenchmark (fp16 / int8 / fp8 at Llama-2-7B's prefill shapes), the quantized
# CUDA-vs-CPU parity tests, and `lmx bench` of Llama-2-7B fp16 against fp8 and of the
# Llama-3-8B shape bf16 against fp8, in the same lease. Each step is bounded; logs under $OUT.
# Parts (arguments, default all; the build comes first either way): tests, gemm, bench.
# Carry: .devdeps, .cache/shared_models.
parts=${*:-tests gemm bench}
source "$(dirname "$0")/device_check_common.sh" fp8-check
step "build"
build_gpu "lmx_cuda_kernel_tests lmx_cuda_parity_tests lmx lmx_bench_int8_gemm" \
  "${BUILD_TIMEOUT:-330}" || exit 1
if [[ " $parts " == *" tests "* ]]; then
step "fp8 + int8 + W8A8 kernel tests"
timeout 150 build-gpu/bin/lmx_cuda_kernel_tests \
  --gtest_filter='*Fp8Cuda*:*ByteWeightGemv*:*W8A8*:*Int8Cuda*' >"$out/kernels.log" 2>&1
echo "exit $?"
grep -E "^\[  (PASSED|FAILED) |^\[ fp8 gemm|Failure|Expected|Which is|OK \]" "$out/kernels.log" | head -60
step "quantized parity (fp8, smoothquant, dynamic_int8)"
timeout "${PARITY_TIMEOUT:-200}" build-gpu/bin/lmx_cuda_parity_tests --gtest_brief=1 \
  --gtest_filter="${PARITY_FILTER:-*Fp8Matches*:*SmoothQuant*:*DynamicInt8*}" >"$out/parity.log" 2>&1
echo "exit $?"
grep -E "^\[  (PASSED|FAILED) |Failure|Expected|Which is|^\[ (fp8|w8a8|int8)" "$out/parity.log" | head -80
fi
if [[ " $parts " == *" gemm "* ]]; then
step "GEMM microbenchmark"
timeout 150 build-gpu/bin/lmx_bench_int8_gemm --rows 512,4096 2>&1 | tee "$out/gemm.txt"
fi
if [[ " $parts " == *" bench "* ]]; then
L="--shape llama-2-7b --prefill 512,4096 --batches 1,32,128 --context 512 --steps 24 --graphs"
for q in none fp8; do
  step "bench llama-2-7b fp16 quantize=$q"
  # shellcheck disable=SC2086
  timeout 90 build-gpu/bin/lmx bench $L --dtype fp16 --quantize $q 2>&1 | tee -a "$out/bench.txt"
done
L3="--shape llama-3-8b --prefill 512,4096 --batches 1,32,128 --context 512 --steps 24 --graphs"
for q in none fp8; do
  step "bench llama-3-8b bf16 quantize=$q"
  # shellcheck disable=SC2086
  timeout 90 build-gpu/bin/lmx bench $L3 --dtype bf16 --quantize $q 2>&1 | tee -a "$out/bench.txt"
done
fi
step "end"
