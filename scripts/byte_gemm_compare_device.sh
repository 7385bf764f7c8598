#!/usr/bin/env bash
# One device call: the W8A16 GEMM kernel tests on the tree, then Llama-2-7B dynamic_int8 and fp16
# `lmx bench` on BASE_SRC (.cache/base-src, built beside the tree) and on the tree, alternating.
# Logs under $OUT (all.txt). Carry: .devdeps, .cache/shared_models, .cache/base-src.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
source scripts/unpack_device_deps.sh
export NCCL_NVLS_ENABLE=0
(cmake -S .cache/base-src -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLMX_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DLMX_DEVDEPS="$PWD/.devdeps" -DLMX_BUILTIN_BLAS=ON > $OUT/cfg-base.log 2>&1 && ninja -C build-base lmx > $OUT/ninja-base.log 2>&1; echo "base build $?" >> $OUT/all.txt) &
STEPS="tests" CALL_BUDGET=330 bash scripts/byte_weight_gemm_device_check.sh >> $OUT/all.txt 2>&1
wait
I8="--shape llama-2-7b --dtype fp16 --quantize dynamic_int8 --prefill 512,4096 --batches 1,32,128 --context 512 --steps 24 --graphs"
F16="--shape llama-2-7b --dtype fp16 --prefill 512,4096 --batches 1,32,128 --context 512 --steps 24 --graphs"
BASE_SRC=.cache/base-src timeout 250 bash scripts/bench_compare_device.sh "$I8" "$F16" >> $OUT/all.txt 2>&1
