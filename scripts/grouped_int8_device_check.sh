#!/usr/bin/env bash
# One device call for grouped scales on CUDA (dynamic_int8 with option.quantize_group_size, the
# scales of a block-scaled fp8 checkpoint; issues 18, 26): builds the GPU targets (and, with
# BASE_SRC, `lmx` of an earlier commit), runs the one-byte weight kernel tests (per-row and grouped
# scales), the grouped parity tests (dynamic_int8 grouped by 64 against the CPU, the block-scaled
# fp8 checkpoint), then benches Llama-2-7B fp16 dynamic_int8: per channel on the base and the
# tree alternating, and grouped by 128 on the tree. Each step is bounded; logs under $OUT
# (all.txt: the summary). Carry: .devdeps, .cache/shared_models (and BASE_SRC).
source "$(dirname "$0")/device_check_common.sh" grouped-int8-check
step "build"
build_gpu "lmx_cuda_kernel_tests lmx_cuda_parity_tests lmx" "$(limit 300)" || exit 1
if [[ -n ${BASE_SRC:-} ]]; then step "build base"; build_base; fi
step "one-byte weight kernel tests (per-row and grouped scales)"
timeout "$(limit 150)" build-gpu/bin/lmx_cuda_kernel_tests --gtest_brief=1 \
  --gtest_filter='*ByteWeight*:*Int8*:*Gemv*:*RowDots*:*Fp8Linear*:*Quantiz*' >"$out/kernels.log" 2>&1
echo "exit $?"
grep -E "^\[  (PASSED|FAILED) |Failure|Expected|Which is|tests ran" "$out/kernels.log" | head -30
step "parity: grouped int8, block-scaled fp8 checkpoints"
timeout "$(limit 150)" build-gpu/bin/lmx_cuda_parity_tests --gtest_brief=1 \
  --gtest_filter='*DynamicInt8Grouped*:*CudaFp8Checkpoint*' >"$out/parity.log" 2>&1
echo "exit $?"
grep -E "^\[  (PASSED|FAILED) |Failure|Expected|Which is|tests ran" "$out/parity.log" | cut -c1-200 | head -30
L="--shape llama-2-7b --dtype fp16 --prefill 512,4096 --batches 1,8,32,128 --context 512 --steps 24 --graphs --quantize dynamic_int8"
bench() {  # BUILD [ARGS...]
  local b=$1; shift
  step "bench $b $*"
  # shellcheck disable=SC2086
  timeout "$(limit 60)" "$b/bin/lmx" bench $L "$@" 2>&1 | grep -vE "^\[" | tee -a "$out/bench.txt"
}
for round in 1 2; do
  [[ -x build-base/bin/lmx ]] && bench build-base
  bench build-gpu
  bench build-gpu --quantize-group-size 128
done
step "end"
