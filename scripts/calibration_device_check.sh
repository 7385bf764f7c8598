#!/usr/bin/env bash
# smoothquant calibration on the GPU (issue 19), for the device machine: builds, runs the CUDA
# parity suite (CPU-vs-GPU calibration among it) and the calibration kernel tests, then times a
# Llama-2-7B-shape calibration (lmx_bench_calibration) in fp16 and bf16, and end to end on a
# sparse 7B checkpoint (CALIBRATION_E2E=0: not). Logs under $OUT.
# Usage on the device: bash scripts/calibration_device_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build-gpu}
mkdir -p "$out"
LMX_GPU_SUITES="lmx_cuda_parity_tests" \
  LMX_GPU_TARGETS="lmx lmx_cuda_parity_tests lmx_cuda_kernel_tests lmx_bench_calibration" \
  bash scripts/gpu_tests.sh
echo "gpu_tests rc=$?"
[[ -d .devdeps ]] && source scripts/unpack_device_deps.sh
LMX_REQUIRE_GPU=1 build-gpu/bin/lmx_cuda_kernel_tests --gtest_filter='*Calibration*' \
  >"$out/calibration_kernels.log" 2>&1
echo "calibration kernel tests rc=$?"; tail -n 3 "$out/calibration_kernels.log"
grep '\[ calibration \]' "$out/lmx_cuda_parity_tests.log" | sort -t' ' -k6 -g | tail -n 8
for dtype in ${CALIBRATION_DTYPES:-fp16 bf16}; do
  build-gpu/bin/lmx_bench_calibration --shape llama-2-7b --dtype "$dtype" ${CALIBRATION_ARGS:-}
done
# End to end on a Llama-2-7B-shaped checkpoint (scripts/make_sparse_checkpoint.py: real sizes,
# every value 0.0, read from file holes) with stories260k's tokenizer: option.quantize=smoothquant
# as lmx generate runs it, calibrating on the built-in text (the 16-bit model loaded on the GPU,
# the samples run, alpha searched), then the quantized load; then again from the cache.
if [[ ${CALIBRATION_E2E:-1} == 1 ]]; then
  build-gpu/bin/lmx shapes --config llama-2-7b >"$out/llama-2-7b.json"
  rm -rf /tmp/sparse && python3 scripts/make_sparse_checkpoint.py "$out/llama-2-7b.json" /tmp/sparse
  cp ../shared/models/stories260k/tokenizer*.json /tmp/sparse/
  export LMX_CACHE_DIR=/tmp/lmx-cache
  rm -rf "$LMX_CACHE_DIR"
  for run in calibrate cached; do
    echo "== e2e ($run)"
    timeout 300 build-gpu/bin/lmx generate --model /tmp/sparse --device cuda --dtype fp16 \
      --quantize smoothquant --prompt-ids 1,2,3 --max-new-tokens 2 --report-load --verbose 2>&1 |
      grep -E 'smoothquant|load|error|Error' | cut -c1-400 | tail -n 12
  done
  rm -rf /tmp/sparse
fi
