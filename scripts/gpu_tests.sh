#!/usr/bin/env bash
# The GPU suite, for the device machine (H100/H200): builds for sm_90a and runs every CUDA test.
# Usage on the device: bash scripts/gpu_tests.sh  (logs under $OUT when set)
set -euo pipefail
cd "$(dirname "$0")/.."
log_dir=${OUT:-build-gpu}
mkdir -p "$log_dir"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLMX_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DLMX_WERROR=ON >"$log_dir/configure.log"
ninja -C build-gpu 2>&1 | tail -n 20
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
ctest --test-dir build-gpu --output-on-failure -R 'cuda|Cuda|CUDA' 2>&1 | tee "$log_dir/gpu_tests.log"
