#!/bin/bash
# Builds the attention kernels, their test and benchmark directly with nvcc (only these files,
# in parallel) and runs them; extra benchmark builds take tuning -D flags. Device machine:
#   bench/kernels/attention_device_run.sh "-DLMX_ATTN_PREFILL_BN=32 -DLMX_ATTN_PREFILL_MIN_BLOCKS=3" ...
# Logs go to $OUT (or /tmp/attn_out).
set -u
OUT=${OUT:-/tmp/attn_out}
B=/tmp/attn_build
mkdir -p "$B" "$OUT"
F="-std=c++17 -gencode=arch=compute_90a,code=sm_90a -O3 -I."
build() {  # build DIR "flags"
  local d=$B/$1
  mkdir -p "$d"
  nvcc $F $2 -c kernels/cuda/attention_decode.cu -o "$d/d.o" &
  nvcc $F $2 -c kernels/cuda/attention_prefill.cu -o "$d/p.o" &
  nvcc $F $2 -c kernels/cuda/attention_generic.cu -o "$d/g.o" &
  wait
  nvcc -gencode=arch=compute_90a,code=sm_90a "$B/b.o" "$d/d.o" "$d/p.o" "$d/g.o" -o "$d/bench"
  nvcc -gencode=arch=compute_90a,code=sm_90a "$B/t.o" "$d/d.o" "$d/p.o" "$d/g.o" "$B/c.o" -lgtest \
    -lgtest_main -Xcompiler -fopenmp -o "$d/test"
}
nvcc $F -c tests/kernels/attention_cuda_test.cu -o $B/t.o &
nvcc $F -c bench/kernels/attention_bench.cu -o $B/b.o &
g++ -std=c++20 -O3 -fopenmp -I. -c kernels/cpu/attention.cpp -o $B/c.o &
wait
i=0
build v0 "" &
for flags in "$@"; do i=$((i + 1)); build v$i "$flags" & done
wait
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
timeout 400 $B/v0/test > "$OUT/test.log" 2>&1
echo "test rc $?"
grep -E "^\[  |Failure|Expected|which is" "$OUT/test.log" | grep -v "RUN  " | tail -30
echo "== v0 (default)"
timeout 60 $B/v0/bench | tee "$OUT/bench_v0.log"
i=0
for flags in "$@"; do
  i=$((i + 1))
  echo "== v$i $flags"
  timeout 60 $B/v$i/test --gtest_filter='*Prefill*:*DecodeMatches*' > "$OUT/test_v$i.log" 2>&1
  echo "test v$i rc $? $(grep -cE 'rel L2' "$OUT/test_v$i.log") checks, $(grep -c FAILED "$OUT/test_v$i.log") failed lines"
  timeout 60 $B/v$i/bench | tee "$OUT/bench_v$i.log" | grep -E "ctx  8192|ctx   512|prefill"
done
