#!/usr/bin/env bash
# One device call for the W8A16 GEMM (kernels/byte_weight_gemm.h, issue 18). STEPS picks what runs
# (default: all of them, in this order):
#   tests   the byte-weight GEMM and int8 kernel tests;
#   gemm    lmx_bench_byte_weight_gemm --rows $BENCH_ROWS (fp16, dequantize + cuBLAS, the W8A16
#           GEMM on int8 and E4M3 weights, fp8's W8A8 projection);
#   bench   lmx bench, Llama-2-7B fp16 then dynamic_int8 in the same call (decode batches 1, 32,
#           128 and prefills of 512 / 4096), then Llama-3-8B bf16 and dynamic_int8 (batches 1, 32);
#   parity  DynamicInt8MatchesCpuInt8 (every fixture, CUDA against the CPU int8 backend);
#   splits  (not by default) the benchmark at 32 and 128 rows with the split target at 1, 2, 3
#           and 4 blocks an SM (mma.sync), then o and down at 64, 128 and 256 rows with K split
#           1, 2 and 4 ways (--splits; the wgmma tiles);
#   tiles   (not by default) the benchmark at 64, 128 and 256 rows with x-row tiles of at most 32,
#           64 and 128 rows.
#   rotate  (not by default) the benchmark at $BENCH_ROWS rows without and with each block
#           starting at its own stage of K (--no-rotate, then the default);
#   wgmma   (not by default) the benchmark at $WGMMA_ROWS (128,512,4096) rows with each tile of
#           the wgmma kernel (64x128, 128x128).
# Logs under $OUT. Carry: .devdeps, .cache/shared_models.
source "$(dirname "$0")/device_check_common.sh" byte-weight-gemm-check
steps=${STEPS:-tests gemm bench parity}
targets="lmx lmx_cuda_kernel_tests lmx_bench_byte_weight_gemm"
[[ " $steps " == *" parity "* ]] && targets+=" lmx_cuda_parity_tests"
step "build $targets"
build_gpu "$targets" "$(limit 360)" || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [[ " $steps " == *" tests "* ]]; then
  step "byte-weight GEMM + int8 kernel tests"
  timeout "$(limit 150)" build-gpu/bin/lmx_cuda_kernel_tests --gtest_brief=1 --gtest_print_time=1 \
    --gtest_filter='*ByteWeight*:*Int8*' >"$out/kernels.log" 2>&1
  echo "exit $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is" "$out/kernels.log" | head -30
fi
if [[ " $steps " == *" gemm "* ]]; then
  step "lmx_bench_byte_weight_gemm"
  timeout "$(limit 200)" build-gpu/bin/lmx_bench_byte_weight_gemm \
    --rows "${BENCH_ROWS:-16,32,64,128,256,512,4096}" >"$out/gemm.txt" 2>&1
  echo "exit $?"
  # name, M, and each column's time and speed-up over fp16
  sed -E 's/ +[0-9]+ TF +[0-9]+ GB\/s//g; s/\(tile [^)]*\)//; s/ \[fp16.*//' "$out/gemm.txt"
fi
if [[ " $steps " == *" splits "* ]]; then
  for b in 1 2 3 4; do
    step "lmx_bench_byte_weight_gemm --blocks-per-sm $b"
    timeout "$(limit 60)" build-gpu/bin/lmx_bench_byte_weight_gemm --rows 32,128 --blocks-per-sm "$b" \
      2>&1 | tee "$out/splits_$b.txt" | sed -E 's/ +[0-9]+ TF +[0-9]+ GB\/s//g; s/\| fp16.*\| int8/| int8/; s/\| e4m3.*//'
  done
  for shape in o_proj down; do
    for n in 1 2 4; do
      step "lmx_bench_byte_weight_gemm --shape $shape --splits $n"
      timeout "$(limit 60)" build-gpu/bin/lmx_bench_byte_weight_gemm --rows 64,128,256 --shape "$shape" \
        --splits "$n" 2>&1 | tee "$out/splits_${shape}_$n.txt" |
        sed -E 's/ +[0-9]+ TF +[0-9]+ GB\/s//g; s/\| dequant[^|]*//; s/\| e4m3.*//'
    done
  done
fi
if [[ " $steps " == *" tiles "* ]]; then
  for r in 32 64 128; do
    step "lmx_bench_byte_weight_gemm --max-tile-rows $r"
    timeout "$(limit 60)" build-gpu/bin/lmx_bench_byte_weight_gemm --rows 64,128,256 --max-tile-rows "$r" \
      2>&1 | tee "$out/tiles_$r.txt" | sed -E 's/ +[0-9]+ TF +[0-9]+ GB\/s//g; s/\| dequant.*\| int8/| int8/; s/\| e4m3.*//'
  done
fi
if [[ " $steps " == *" rotate "* ]]; then
  for flag in --no-rotate ""; do
    step "lmx_bench_byte_weight_gemm $flag"
    # shellcheck disable=SC2086
    timeout "$(limit 90)" build-gpu/bin/lmx_bench_byte_weight_gemm --rows "${BENCH_ROWS:-16,32,64,128,512}" \
      $flag 2>&1 | tee "$out/rotate${flag:+_off}.txt" | sed -E 's/ +[0-9]+ TF +[0-9]+ GB\/s//g; s/ \[fp16.*//; s/\| dequant[^|]*//; s/\| e4m3.*//'
  done
fi
if [[ " $steps " == *" wgmma "* ]]; then
  for t in 64x128 128x128; do
    step "lmx_bench_byte_weight_gemm --wgmma-tile $t"
    timeout "$(limit 60)" build-gpu/bin/lmx_bench_byte_weight_gemm --rows "${WGMMA_ROWS:-128,512,4096}" \
      --wgmma-tile "$t" 2>&1 | tee "$out/wgmma_$t.txt" |
      sed -E 's/ +[0-9]+ TF +[0-9]+ GB\/s//g; s/ \[fp16.*//'
  done
fi
if [[ " $steps " == *" bench "* ]]; then
  L="--shape llama-2-7b --prefill 512,4096 --batches 1,32,128 --context 512 --steps 24 --graphs"
  for q in none dynamic_int8; do
    step "lmx bench llama-2-7b fp16 --quantize $q"
    # shellcheck disable=SC2086
    timeout "$(limit 90)" build-gpu/bin/lmx bench $L --dtype fp16 --quantize $q 2>&1 |
      tee -a "$out/bench.txt" | grep -vE "^\[" | tail -12
  done
  L3="--shape llama-3-8b --prefill 512 --batches 1,32 --context 512 --steps 24 --graphs --dtype bf16"
  for q in none dynamic_int8; do
    step "lmx bench llama-3-8b bf16 --quantize $q"
    # shellcheck disable=SC2086
    timeout "$(limit 60)" build-gpu/bin/lmx bench $L3 --quantize $q 2>&1 |
      tee -a "$out/bench.txt" | grep -vE "^\[" | tail -8
  done
fi
if [[ " $steps " == *" parity "* ]]; then
  step "parity: DynamicInt8MatchesCpuInt8"
  LMX_REQUIRE_GPU=1 timeout "$(limit 200)" build-gpu/bin/lmx_cuda_parity_tests --gtest_brief=1 \
    --gtest_filter='*DynamicInt8*' >"$out/parity.log" 2>&1
  echo "exit $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is" "$out/parity.log" | head -30
fi
step "end"
