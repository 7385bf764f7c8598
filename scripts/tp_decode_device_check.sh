#!/usr/bin/env bash
# One call on a 4-GPU kind for decode under tensor parallelism against an earlier commit (issue
# 22, run 4): builds lmx from the tree and from BASE_SRC (`git archive <commit>` unpacked into
# .cache/base-src and carried) side by side, with the CUDA kernel and parity tests of the tree;
# then, alternating base and tree (two rounds of the first), `lmx bench` of Llama-2-70B fp16 at
# degree 4 (random weights made in GPU memory), of one degree-4 rank's shard of it at degree 1
# (.cache/shard70b: 16 heads, 2 KV heads, intermediate 7168) and of Llama-3-8B bf16 at degree 1;
# then the attention kernel
# tests and the parity tests (every non-quantized one; the tensor-parallel fp32 ones at degrees
# 2..4). Each step is bounded so the call ends inside the device's 10 minutes; logs under $OUT.
# Carry: .devdeps, .cache/shared_models, .cache/base-src, .cache/shard70b.
source "$(dirname "$0")/device_check_common.sh" tp-decode-check
nvidia-smi --query-gpu=name --format=csv,noheader | uniq -c
step "build tree and base"
build_base &
build_gpu "lmx lmx_cuda_kernel_tests lmx_cuda_parity_tests" "$(limit 300)" || exit 1
wait
[[ -x build-base/bin/lmx ]] || { tail -20 "$out/build-base.log"; exit 1; }
S="--context 512 --prefill 512 --steps 16 --graphs"
specs=("--shape llama-2-70b --dtype fp16 --batches 1,32 --tensor-parallel-degree 4 $S"
       "--model .cache/shard70b --dtype fp16 --batches 1,32 $S"
       "--shape llama-3-8b --dtype bf16 --batches 1,32 $S")
for round in 1 2; do  # the second round: Llama-2-70B again
  ((round == 2)) && specs=("${specs[0]}")
  for spec in "${specs[@]}"; do
    for b in build-base build-gpu; do
      step "$b round $round: lmx bench $spec"
      # shellcheck disable=SC2086
      timeout "$(limit 60)" "$b/bin/lmx" bench $spec 2>&1 | grep -E "^decode|^prefill" |
        tee -a "$out/bench-$b.txt"
    done
  done
done
step "kernel tests: attention"
LMX_REQUIRE_GPU=1 timeout "$(limit 60)" build-gpu/bin/lmx_cuda_kernel_tests --gtest_brief=1 \
  --gtest_filter='*Attention*' 2>&1 | tail -4
step "parity: non-quantized, tensor-parallel fp32 at degrees 2..4"
LMX_REQUIRE_GPU=1 timeout "$(limit 150)" build-gpu/bin/lmx_cuda_parity_tests --gtest_brief=1 \
  --gtest_filter='-*Int8*:*SmoothQuant*:*Fp8Matches*:*TensorParallelHalf*:*TensorParallelDraws*' \
  >"$out/parity.log" 2>&1
echo "exit $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|tests ran" "$out/parity.log" | cut -c1-160 | head -20
step "end"
