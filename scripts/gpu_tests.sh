#!/usr/bin/env bash
# The GPU suite, for the device machine (H100/H200): builds for sm_90a and runs every CUDA test.
# Usage on the device: bash scripts/gpu_tests.sh  (logs under $OUT when set)
# A device call short of time may build and run a part, named explicitly (the default is all):
#   LMX_GPU_SUITES="lmx_cuda_parity_tests e2e_families" bash scripts/gpu_tests.sh
# (LMX_GPU_TARGETS overrides the ninja targets, by default those the chosen suites need.)
# On 4 GPUs lmx_cuda_parity_tests alone takes ~10 minutes (its tensor-parallel and quantized
# suites run at every degree up to the GPU count: 2026-11-26, 4 H100s), more than one device call:
# run the other suites in one call and the parity binary in two, split by --gtest_filter.
# A suite passes only if its binary exits 0 AND no test in it skipped: LMX_REQUIRE_GPU=1 makes
# every GPU test fail where it would skip for want of a GPU, and any "[  SKIPPED ]" line left in
# a log counts as a failure here, so a skip can never read as a pass on the device. Each test's
# time is in its log; the 15 slowest of each binary are printed. A binary that runs past
# LMX_GPU_SUITE_TIMEOUT seconds (default 420) is stopped and fails, naming the test it was in.
set -euo pipefail
export LMX_REQUIRE_GPU=1
limit=${LMX_GPU_SUITE_TIMEOUT:-420}  # seconds a test binary (or e2e_families) may run
cd "$(dirname "$0")/.."
log_dir=${OUT:-build-gpu}
mkdir -p "$log_dir"
# The parity tests read ../shared/models: on the device it comes carried as .cache/shared_models.
if [[ -d .cache/shared_models && ! -d ../shared/models ]]; then
  mkdir -p ../shared && cp -r .cache/shared_models ../shared/models
fi
# The device image has no OpenBLAS, PCRE2 or ICU headers: see scripts/pack_device_deps.sh.
extra=()
if [[ -d .devdeps ]]; then
  extra+=(-DLMX_DEVDEPS="$PWD/.devdeps" -DLMX_BUILTIN_BLAS=ON)
  source scripts/unpack_device_deps.sh
fi
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLMX_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DLMX_WERROR=ON "${extra[@]}" >"$log_dir/configure.log" 2>&1 ||
  { cat "$log_dir/configure.log"; exit 1; }
suites=${LMX_GPU_SUITES:-lmx_cuda_kernel_tests lmx_cuda_parity_tests lmx_unit_tests e2e_families}
# Only what the suites run (not the benchmarks, fuzz targets and CPU-only suites CI builds).
targets=${LMX_GPU_TARGETS:-$(for s in $suites; do
  case $s in e2e_families) echo lmx-server lmx_plugin ;; lmx_*) echo "$s" ;; esac
done | tr '\n' ' ')}
echo "targets: $targets"
build_start=$SECONDS
if ! ninja -C build-gpu $targets 2>&1 | tail -n 30; then echo "build failed"; exit 1; fi
echo "build: $((SECONDS - build_start)) s"
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
echo "suites: $suites"
for entry in lmx_cuda_kernel_tests "$parity" 'lmx_unit_tests:*SchedulerTest*'; do
  t=${entry%%:*}
  [[ " $suites " == *" $t "* ]] || continue
  filter=${entry#*:}
  [[ $filter == "$entry" ]] && filter='*'
  echo "== $t ($filter)"
  log="$log_dir/$t.log"
  start=$SECONDS
  # A hung test (a kernel that never returns) ends at the limit, naming the test it was in.
  rc=0
  timeout -k 10 "$limit" build-gpu/bin/$t --gtest_filter="$filter" --gtest_print_time=1 >"$log" 2>&1 ||
    rc=$?
  echo "$t: $((SECONDS - start)) s"
  ((rc == 0)) || status=1
  if ((rc == 124 || rc == 137)); then
    echo "FAILED: $t ran past ${limit} s, in: $(grep '^\[ RUN ' "$log" | tail -n 1 || true)"
  fi
  if grep -q '^\[  SKIPPED \]' "$log"; then
    echo "FAILED: $t skipped tests (a skip on the device is a failure):"
    status=1
  fi
  # (The display pipes end in `|| true`: under pipefail an empty grep or a closed pipe would
  # otherwise end the script.)
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is|error" "$log" | head -40 || true
  # The 15 slowest tests: gtest ends each with "[       OK ] Suite.Test (N ms)" (or FAILED).
  echo "-- slowest tests of $t (ms):"
  sed -nE 's/^\[ +(OK|FAILED) +\] (.+) \(([0-9]+) ms\)$/\3 \2 \1/p' "$log" | sort -rn | head -15 || true
done
# Every model family through lmx-server on the GPU (fp32: greedy ids equal transformers').
[[ " $suites " == *" e2e_families "* ]] || exit $status
echo "== e2e_families (cuda)"
start=$SECONDS
LMX_E2E_DEVICE=cuda LMX_E2E_GPUS=$gpus timeout -k 10 "$limit" python3 tests/container/e2e_families.py --server build-gpu/bin/lmx-server \
  --plugin build-gpu/lib/liblmx.so --fixtures tests/fixtures/parity >"$log_dir/e2e_families.log" 2>&1 ||
  status=1
echo "e2e_families: $((SECONDS - start)) s"
grep -E "checks passed|FAIL" "$log_dir/e2e_families.log" | head -20 || true
# lmx-server under mpirun, each process on its own GPU (NCCL between processes): 2+ GPUs.
if ((gpus >= 2)); then
  echo "== e2e_mpi (cuda)"
  start=$SECONDS
  LMX_E2E_DEVICE=cuda timeout -k 10 "$limit" python3 tests/container/e2e_mpi.py \
    --server build-gpu/bin/lmx-server --plugin build-gpu/lib/liblmx.so \
    --model-dir ../shared/models/tinystories-656k >"$log_dir/e2e_mpi.log" 2>&1 || status=1
  echo "e2e_mpi: $((SECONDS - start)) s"
  grep -E "checks passed|FAIL|answers:" "$log_dir/e2e_mpi.log" | head -20 || true
fi
exit $status
