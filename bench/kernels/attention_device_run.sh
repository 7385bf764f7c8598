#!/usr/bin/env bash
# The attention kernels' test and benchmark with tuning variants, in one device call: builds
# lmx_cuda_kernel_tests and the benchmark BENCH (default lmx_bench_attention; any kernel
# benchmark target, e.g. lmx_bench_int8_gemm) (Release, sm_90a, build-gpu/), then for each
# variant recompiles the attention sources with its -D flags (the exact nvcc commands ninja uses)
# and links them ahead of the kernel library into a test and a benchmark of its own. Runs the
# attention tests (TEST_FILTER) and the benchmark (BENCH_ARGS) of the tree, then of each variant.
# Usage on the device:
#   bench/kernels/attention_device_run.sh "-DLMX_FOO=1" "-DLMX_FOO=1 -DLMX_BAR=2" ...
#   SOURCES=w8a8_wgmma TEST_FILTER='*W8A8*:*Int8Gemm*' BENCH=lmx_bench_int8_gemm \
#     BENCH_ARGS="--rows 512,4096" bench/kernels/attention_device_run.sh "-DLMX_W8A8_CLUSTER=21"
# SOURCES (default: the prefill sources) are the kernels/cuda/*.cu recompiled per variant. Logs go
# to $OUT (or devcmd/); each variant's objects under /tmp/attn_v<i>.
source "$(dirname "$0")/../../scripts/device_check_common.sh" devcmd
sources=${SOURCES:-attention_prefill attention_prefill_wgmma}
filter=${TEST_FILTER:-*PagedAttention*Prefill*:*ScaledFp8*}
bench=${BENCH:-lmx_bench_attention}
bench_args=${BENCH_ARGS:---prefill}
step "build"
configure_tree . build-gpu || { tail -20 "$out/configure-build-gpu.log"; exit 1; }
ninja -C build-gpu lmx_cuda_kernel_tests "$bench" >"$out/build.log" 2>&1 ||
  { tail -30 "$out/build.log"; exit 1; }
link_bench=$(ninja -C build-gpu -t commands "$bench" | tail -1)
link_test=$(ninja -C build-gpu -t commands lmx_cuda_kernel_tests | tail -1)

# variant DIR FLAGS: DIR/bench and DIR/test with the sources built with FLAGS.
variant() {
  local dir=$1 flags=$2 objects="" src cc
  mkdir -p "$dir"
  for src in $sources; do
    cc=$(ninja -C build-gpu -t commands lmx_kernels_cuda | grep nvcc | grep "cuda/$src.cu.o" |
      tail -1)
    [[ -n $cc ]] || { echo "no compile command for $src"; return 1; }
    cc=${cc/ -o kernels\/CMakeFiles\/lmx_kernels_cuda.dir\/cuda\/$src.cu.o/ $flags -o $dir/$src.o}
    (cd build-gpu && eval "$cc") >>"$dir/build.log" 2>&1 || { tail -20 "$dir/build.log"; return 1; }
    objects+=" $dir/$src.o"
  done
  (cd build-gpu &&
    eval "${link_bench/ -o bin\/$bench/$objects -o $dir/bench}" &&
    eval "${link_test/ -o bin\/lmx_cuda_kernel_tests/$objects -o $dir/test}") \
    >>"$dir/build.log" 2>&1 || { tail -20 "$dir/build.log"; return 1; }
}
step "variants"
i=0
for flags in "$@"; do
  i=$((i + 1))
  variant "/tmp/attn_v$i" "$flags" &
done
wait

# run NAME TEST BENCH
run() {
  [[ -x $2 && -x $3 ]] || { echo "== $1: not built"; return; }
  LMX_REQUIRE_GPU=1 timeout "$(limit 120)" "$2" --gtest_filter="$filter" >"$out/test_$1.log" 2>&1
  echo "== $1: tests rc $? ($(grep -cE 'rel L2' "$out/test_$1.log") checks)" \
    "$(grep -E '^\[  (PASSED|FAILED)' "$out/test_$1.log" | tr '\n' ' ')"
  grep -E "Failure|SKIPPED" "$out/test_$1.log" | head -5
  timeout "$(limit 90)" "$3" $bench_args >"$out/bench_$1.log" 2>&1
  cat "$out/bench_$1.log"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
step "tree"
run tree build-gpu/bin/lmx_cuda_kernel_tests "build-gpu/bin/$bench"
i=0
for flags in "$@"; do
  i=$((i + 1))
  step "v$i: $flags"
  run "v$i" "/tmp/attn_v$i/test" "/tmp/attn_v$i/bench"
done
step end
