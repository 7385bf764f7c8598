# Sourced by the scripts/*_device_check.sh scripts and bench_compare_device.sh (one device call
# each): the repository root as working directory, NVLink multicast off, $out for the logs ($OUT
# on the device, else the name given), step() to stamp each step with the seconds since the
# start, ../shared/models from the carried copy, build_gpu TARGETS SECONDS (scripts/gpu_tests.sh's
# build into build-gpu/, no suite; its log in $out/build.log; returns 1 when lmx was not built),
# configure_tree SRC BUILD (a Release sm_90a configure of a source tree), build_base (lmx from
# BASE_SRC, an earlier commit's `git archive` carried as .cache/base-src, into build-base/), and
# limit SECONDS: a step's own time limit, or what is left of the call's CALL_BUDGET (default 570 s,
# inside the device's 10 minutes) less a margin; with .devdeps carried, its ICU / PCRE2 unpacked
# and on the paths (scripts/unpack_device_deps.sh).
# Usage: source scripts/device_check_common.sh NAME   (NAME: the local log folder without $OUT)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared hosts (device KINDS.md)
out=${OUT:-$1}
mkdir -p "$out"
started=$SECONDS
budget=${CALL_BUDGET:-570}
limit() { local left=$((budget - (SECONDS - started) - 10)); ((left < $1)) && echo $((left > 0 ? left : 1)) || echo "$1"; }
step() { echo "== [$((SECONDS - started)) s] $*"; }
if [[ -d .cache/shared_models && ! -d ../shared/models ]]; then
  mkdir -p ../shared && cp -r .cache/shared_models ../shared/models
fi
# The carried ICU / PCRE2 (scripts/pack_device_deps.sh), once for the whole call: the pkg-config
# paths every configure needs and the library path of every program run.
if [[ -d .devdeps ]]; then source scripts/unpack_device_deps.sh; fi
build_gpu() {
  LMX_GPU_TARGETS="$1" LMX_GPU_SUITES="none" timeout "$2" bash scripts/gpu_tests.sh \
    >"$out/build.log" 2>&1
  [[ -x build-gpu/bin/lmx ]] || { tail -30 "$out/build.log"; return 1; }
}
# A Release sm_90a configure of source tree $1 into build dir $2, its log in $out, against the
# carried .devdeps when there is one. build-gpu (the working tree) gets gpu_tests.sh's flags
# (warnings as errors): a call that runs both builds once.
configure_tree() {
  local extra=()
  [[ -d $PWD/.devdeps ]] && extra+=(-DLMX_DEVDEPS="$PWD/.devdeps" -DLMX_BUILTIN_BLAS=ON)
  [[ $(basename "$2") == build-gpu ]] && extra+=(-DLMX_WERROR=ON)
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLMX_WITH_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a "${extra[@]}" >"$out/configure-$(basename "$2").log" 2>&1
}
build_base() {
  configure_tree "${BASE_SRC:-.cache/base-src}" build-base &&
    ninja -C build-base lmx >"$out/build-base.log" 2>&1
  echo "base build exit $?"
}
