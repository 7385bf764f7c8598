#!/usr/bin/env bash
# The tensor-core grouped-KV decode attention (kernels/cuda/attention_decode_mma.cu, issue 26), for
# the device machine, against a base tree built in the same lease (BASE_SRC, default
# .cache/base-src: `git archive` of the commit before it). Logs under $OUT.
#   PHASE=all (default): build, then bench, in one call.
#   PHASE=build: both trees built (tree: lmx, the kernel tests, the attention benchmark; base: lmx
#                and the benchmark), the attention kernel tests, one --gqa-sweep each.
#   PHASE=bench: Llama-3-8B-shape decode steps over 2048-token contexts, base / tree / base / tree:
#                a bf16 cache at batch 32 and 128, an fp8 cache at 32 and 256 (256 x 2k of bf16
#                K/V, 67 GB, does not fit an H100 beside the weights).
source "$(dirname "$0")/device_check_common.sh" decode-mma
base_src=${BASE_SRC:-.cache/base-src}
case ${PHASE:-all} in
build | all)
  step "build tree and base"
  (configure_tree "$base_src" build-base &&
    ninja -C build-base lmx lmx_bench_attention >"$out/build-base.log" 2>&1
    echo "base build exit $?") &
  build_gpu "lmx lmx_cuda_kernel_tests lmx_bench_attention" "$(limit 400)" || exit 1
  wait
  step "attention kernel tests"
  LMX_REQUIRE_GPU=1 timeout "$(limit 200)" build-gpu/bin/lmx_cuda_kernel_tests \
    --gtest_filter='PagedAttentionCuda*' >"$out/attention_tests.log" 2>&1
  echo "exit $?"
  grep -E "^\[  (PASSED|FAILED) |Failure|worst|tests ran" "$out/attention_tests.log" | cut -c1-200 | head -30
  for b in build-base build-gpu; do
    step "gqa sweep $b"
    timeout "$(limit 90)" "$b/bin/lmx_bench_attention" --gqa-sweep >"$out/sweep-$b.txt" 2>&1
    echo "exit $?"
  done
  ;;&
bench | all)
  for b in build-base build-gpu build-base build-gpu; do
    for run in "auto 32,128" "fp8 32,256"; do
      set -- $run
      step "$b llama-3-8b bf16 kv $1"
      timeout "$(limit 90)" "$b/bin/lmx" bench --shape llama-3-8b --dtype bf16 --prefill 512 \
        --batches "$2" --context 2048 --steps 16 --graphs --kv-cache-dtype "$1" 2>&1 |
        grep -E 'decode batch|prefill'
    done
  done
  ;;
esac
