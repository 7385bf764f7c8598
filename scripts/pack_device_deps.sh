#!/usr/bin/env bash
# Packs what the GPU machine's image lacks into .devdeps/ (git-ignored) so a device run can carry
# it: run(..., carry=[".devdeps"]).
#   - PCRE2's header and static library (the tokenizer's regexes);
#   - ICU's headers and shared libraries (the chat engine's and the tokenizer's Unicode tables;
#     Debian's static ICU is not position-independent, so liblmx.so cannot take it), xz-packed to
#     stay inside the device's 64 MiB transfer; scripts/unpack_device_deps.sh unpacks them there
#     and writes the pkg-config file that CMake's icu-uc lookup reads.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .devdeps
mkdir -p .devdeps/include .devdeps/lib
cp /usr/include/pcre2.h .devdeps/include/
cp /usr/lib/x86_64-linux-gnu/libpcre2-8.a .devdeps/lib/
icu_version=$(pkg-config --modversion icu-uc)
echo "$icu_version" >.devdeps/icu-version
tar -cJf .devdeps/icu.tar.xz -C /usr include/unicode -C /usr/lib/x86_64-linux-gnu \
  libicuuc.so libicuuc.so.72 libicuuc.so.72.1 libicudata.so libicudata.so.72 libicudata.so.72.1
echo "packed .devdeps ($(du -sh .devdeps | cut -f1); ICU $icu_version)"
