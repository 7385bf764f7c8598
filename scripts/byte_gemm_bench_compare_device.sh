#!/usr/bin/env bash
# One device call: a GEMM benchmark on the working tree and on BASE_SRC (an earlier commit's
# `git archive`, e.g. .cache/base-src) and VARIANT_SRC (another source tree) when set, built side
# by side and run alternating (base, tree, variant; twice), so a kernel change is judged against
# its base in the same lease. BENCH_BIN picks the benchmark: lmx_bench_byte_weight_gemm (the
# W8A16 GEMM, default) or lmx_bench_int8_gemm (the W8A8 GEMMs); the tree's kernel tests of that
# GEMM run first. BENCH_ROWS (default 64,128,256,512,4096) and BENCH_ARGS go to every run.
# Logs under $OUT (gemm-<build>-<round>.txt). Carry: .devdeps and the source trees named.
source "$(dirname "$0")/device_check_common.sh" byte-gemm-compare
bench=${BENCH_BIN:-lmx_bench_byte_weight_gemm}
tests='*ByteWeight*:*Int8*'
[[ $bench == lmx_bench_int8_gemm ]] && tests='*W8A8*:*Int8Gemm*'
builds=(build-gpu)
configure_tree . build-gpu
[[ -n ${BASE_SRC:-} ]] && configure_tree "$BASE_SRC" build-base && builds=(build-base "${builds[@]}")
[[ -n ${VARIANT_SRC:-} ]] && configure_tree "$VARIANT_SRC" build-variant && builds+=(build-variant)
step "build ${builds[*]}"
for b in "${builds[@]}"; do
  targets=$bench
  [[ $b == build-gpu ]] && targets+=" lmx_cuda_kernel_tests"
  # shellcheck disable=SC2086
  ninja -C "$b" $targets >"$out/ninja-$b.log" 2>&1 &
done
wait
for b in "${builds[@]}"; do
  [[ -x $b/bin/$bench ]] || { tail -30 "$out/ninja-$b.log"; exit 1; }
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
step "kernel tests $tests (tree)"
timeout "$(limit 150)" build-gpu/bin/lmx_cuda_kernel_tests --gtest_brief=1 --gtest_filter="$tests" \
  >"$out/kernels.log" 2>&1
echo "exit $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is" "$out/kernels.log" | head -20
IFS=';' read -ra variants <<<"${BENCH_VARIANTS:-${BENCH_ARGS:-}}"
[[ ${#variants[@]} -gt 0 ]] || variants=("")
for round in 1 2; do
  for b in "${builds[@]}"; do
    for v in "${variants[@]}"; do
      step "round $round: $b $v"
      # shellcheck disable=SC2086
      timeout "$(limit 90)" "$b/bin/$bench" --rows "${BENCH_ROWS:-64,128,256,512,4096}" $v \
        >"$out/run.txt" 2>&1
      cat "$out/run.txt" >>"$out/gemm-$b-$round.txt"
      # name, M, the one-byte kernels' times and their speed-up over fp16 (no fp8 lines)
      sed -E 's/ +[0-9]+ TF +[0-9]+ GB\/s//g; s/ \[fp16.*//; s/\| dequant[^|]*//; s/\| fp8 W8A8.*//' "$out/run.txt" |
        grep -vE '\| fp8 ' || true
    done
  done
done
rm -f "$out/run.txt"
step end
