#!/usr/bin/env bash
# The sanitizer pass of CI (issue 23, docs/testing.md): the CPU engine, plugin, server and CLI
# built with AddressSanitizer + UndefinedBehaviorSanitizer (LMX_SANITIZE, CUDA off) into
# build-asan/, then the unit suites and the end-to-end server tests run on that build. Any
# sanitizer report (leaks included) fails the run.
#   bash scripts/sanitize.sh            build and run everything below
#   LMX_SANITIZE_TESTS='regex' ...      only the CTest tests matching the regex
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLMX_WITH_CUDA=OFF \
  -DLMX_SANITIZE=ON -DLMX_WERROR=ON >/dev/null
ninja -C build-asan
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Unit suites (every gtest binary of the CPU build) and the end-to-end server tests (lmx-server
# and the plugin under their own clients). plugin.ctypes_host loads liblmx.so into Debian's
# python3, which is not built with ASan (the runtime must come first in a process): it runs in
# the plain build only.
regex=${LMX_SANITIZE_TESTS:-'.'}
ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -R "$regex" \
  -E '^plugin\.ctypes_host$|^container\.(image|serving_bench)|perplexity_reference|chat_differential'
