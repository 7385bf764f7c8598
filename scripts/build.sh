#!/usr/bin/env bash
# Configures and builds LMX into build/ (Ninja, Release). Extra arguments go to CMake, e.g.
#   scripts/build.sh -DLMX_WITH_CUDA=OFF
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
ninja -C build
