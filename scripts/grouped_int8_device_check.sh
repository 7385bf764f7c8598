#!/usr/bin/env bash
# One device call for grouped scales on CUDA (dynamic_int8 with option.quantize_group_size, the
# scales of a block-scaled fp8 checkpoint; issues 18, 26): builds the GPU targets, runs the
# one-byte weight kernel tests (per-row and grouped scales), the dynamic_int8 parity tests
# (per channel and grouped by 64), then benches Llama-2-7B fp16 decode per channel against group
# sizes 128 and 64 in the same call. Each step is bounded; logs under $OUT (all.txt: the summary).
# Carry: .devdeps, .cache/shared_models.
source "$(dirname "$0")/device_check_common.sh" grouped-int8-check
step "build"
build_gpu "lmx_cuda_kernel_tests lmx_cuda_parity_tests lmx" "$(limit 300)" || exit 1
step "one-byte weight kernel tests (per-row and grouped scales)"
timeout "$(limit 150)" build-gpu/bin/lmx_cuda_kernel_tests --gtest_brief=1 \
  --gtest_filter='*ByteWeight*:*Int8*:*Gemv*:*RowDots*:*Fp8Linear*:*Quantiz*' >"$out/kernels.log" 2>&1
echo "exit $?"
grep -E "^\[  (PASSED|FAILED) |Failure|Expected|Which is|tests ran" "$out/kernels.log" | head -30
step "parity: dynamic_int8 per channel and grouped"
timeout "$(limit 150)" build-gpu/bin/lmx_cuda_parity_tests --gtest_brief=1 \
  --gtest_filter='*DynamicInt8*' >"$out/parity.log" 2>&1
echo "exit $?"
grep -E "^\[  (PASSED|FAILED) |Failure|tests ran" "$out/parity.log" | cut -c1-200 | head -30
grep -E "^\[ int8 grouped" "$out/parity.log" | head -30
L="--shape llama-2-7b --dtype fp16 --prefill 512,4096 --batches 1,8,32,128 --context 512 --steps 24 --graphs"
for g in none 128 64 none 128; do
  step "bench llama-2-7b fp16 dynamic_int8 group $g"
  extra=(); [[ $g != none ]] && extra=(--quantize-group-size "$g")
  # shellcheck disable=SC2086
  timeout "$(limit 60)" build-gpu/bin/lmx bench $L --quantize dynamic_int8 "${extra[@]}" 2>&1 |
    grep -vE "^\[" | tee -a "$out/bench.txt"
done
step "end"
