#!/usr/bin/env bash
# The GPU suite, for the device machine (H100/H200): builds for sm_90a and runs every CUDA test.
# Usage on the device: bash scripts/gpu_tests.sh  (logs under $OUT when set)
# A device call short of time may build and run a part, named explicitly (the default is all):
#   LMX_GPU_TARGETS="lmx_cuda_parity_tests lmx lmx-server lmx_plugin" \
#   LMX_GPU_SUITES="lmx_cuda_parity_tests e2e_families" bash scripts/gpu_tests.sh
set -euo pipefail
cd "$(dirname "$0")/.."
log_dir=${OUT:-build-gpu}
mkdir -p "$log_dir"
# The device image has no OpenBLAS, PCRE2 or ICU headers: see scripts/pack_device_deps.sh.
extra=()
if [[ -d .devdeps ]]; then
  extra+=(-DLMX_DEVDEPS="$PWD/.devdeps" -DLMX_BUILTIN_BLAS=ON)
  source scripts/unpack_device_deps.sh
fi
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLMX_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DLMX_WERROR=ON "${extra[@]}" >"$log_dir/configure.log" 2>&1 ||
  { cat "$log_dir/configure.log"; exit 1; }
ninja -C build-gpu ${LMX_GPU_TARGETS:-} 2>&1 | tail -n 30
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
# Every GPU test binary, whole (the CPU suites run in CI).
status=0
# binary[:gtest filter]: the scheduler suite runs on both backends there. Tensor parallelism needs
# 2+ GPUs: on a machine with one its tests are left out here (not skipped inside the suite, where
# a skip would read as a pass); on machines with more they run.
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
parity='lmx_cuda_parity_tests'
((gpus < 2)) && parity='lmx_cuda_parity_tests:-*TensorParallel*'
echo "GPUs: $gpus"
suites=${LMX_GPU_SUITES:-lmx_cuda_kernel_tests lmx_cuda_parity_tests lmx_unit_tests e2e_families}
echo "suites: $suites"
for entry in lmx_cuda_kernel_tests "$parity" 'lmx_unit_tests:*SchedulerTest*'; do
  t=${entry%%:*}
  [[ " $suites " == *" $t "* ]] || continue
  filter=${entry#*:}
  [[ $filter == "$entry" ]] && filter='*'
  echo "== $t ($filter)"
  build-gpu/bin/$t --gtest_brief=1 --gtest_filter="$filter" >"$log_dir/$t.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is|error" "$log_dir/$t.log" | head -40
done
# Every model family through lmx-server on the GPU (fp32: greedy ids equal transformers').
[[ " $suites " == *" e2e_families "* ]] || exit $status
echo "== e2e_families (cuda)"
LMX_E2E_DEVICE=cuda LMX_E2E_GPUS=$gpus python3 tests/container/e2e_families.py --server build-gpu/bin/lmx-server \
  --plugin build-gpu/lib/liblmx.so --fixtures tests/fixtures/parity >"$log_dir/e2e_families.log" 2>&1 ||
  status=1
grep -E "checks passed|FAIL" "$log_dir/e2e_families.log" | head -20
exit $status
