#!/usr/bin/env bash
# One device call for dynamic_int8 on CUDA (issue 18): builds the GPU targets, runs the int8 and
# GEMV kernel tests, benches Llama-2-7B fp16 against dynamic_int8 in the same lease (and the
# Llama-3-8B shape in bf16), then the CUDA parity suite and every family through lmx-server.
# Each step is bounded; logs under $OUT. Carry: .devdeps, .cache/shared_models.
source "$(dirname "$0")/device_check_common.sh" int8-check
step "build and the CUDA parity suite + e2e come last; kernels first"
build_gpu "lmx_cuda_kernel_tests lmx_cuda_parity_tests lmx lmx-server lmx_plugin" 300 || exit 1
step "int8 + GEMV kernel tests"
timeout 120 build-gpu/bin/lmx_cuda_kernel_tests --gtest_brief=1 \
  --gtest_filter='*Int8*:*FusedGemv*:*Skinny*:*Gemv*' >"$out/kernels.log" 2>&1
echo "exit $?"; grep -E "^\[  (PASSED|FAILED) |Failure|Expected|Which is" "$out/kernels.log" | head -20
L="--shape llama-2-7b --prefill 512,4096 --batches 1,32,128 --context 512 --steps 24 --graphs"
for q in none dynamic_int8; do
  step "bench llama-2-7b fp16 quantize=$q"
  # shellcheck disable=SC2086
  timeout 90 build-gpu/bin/lmx bench $L --dtype fp16 --quantize $q 2>&1 | tee -a "$out/bench.txt"
done
step "parity suite (int8 and tensor parallel included) + e2e"
LMX_GPU_TARGETS="lmx_cuda_parity_tests lmx lmx-server lmx_plugin" \
  LMX_GPU_SUITES="lmx_cuda_parity_tests e2e_families" timeout 240 bash scripts/gpu_tests.sh \
  >"$out/suite.log" 2>&1
echo "suite exit $?"; grep -vE "^\[[0-9]+/[0-9]+\]" "$out/suite.log" | tail -25
grep -E "^\[ int8" "$out/lmx_cuda_parity_tests.log" 2>/dev/null | head -40 || true
L3="--shape llama-3-8b --prefill 512 --batches 1,32 --context 512 --steps 24 --graphs --dtype bf16"
for q in none dynamic_int8; do
  step "bench llama-3-8b bf16 quantize=$q"
  # shellcheck disable=SC2086
  timeout 60 build-gpu/bin/lmx bench $L3 --quantize $q 2>&1 | tee -a "$out/bench.txt"
done
step "end"
