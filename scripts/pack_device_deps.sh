#!/usr/bin/env bash
# Packs what the GPU machine's image lacks (PCRE2's header and static library) into .devdeps/
# (git-ignored) so a device run can carry it: run(..., carry=[".devdeps"]).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .devdeps/include .devdeps/lib
cp /usr/include/pcre2.h .devdeps/include/
cp /usr/lib/x86_64-linux-gnu/libpcre2-8.a .devdeps/lib/
echo "packed .devdeps ($(du -sh .devdeps | cut -f1))"
