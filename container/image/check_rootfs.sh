#!/usr/bin/env bash
# Checks an image's root filesystem holds what runs and nothing of the build:
#   - every library lmx-server, lmx, liblmx.so (and for cuda liblmx_cuda.so) load resolves inside
#     it (ldd in a chroot), the CUDA runtime from /opt/lmx/lib; only the driver's libcuda.so.1 may
#     come from the host; liblmx.so loads no CUDA library in either flavour (it opens
#     liblmx_cuda.so on demand), and NCCL, which liblmx_cuda.so opens for tensor parallelism,
#     is in /opt/lmx/lib with its libraries resolving;
#   - lmx-server and lmx start in it as the unprivileged user (uid 1000);
#   - no compiler, linker, CUDA toolkit, headers or sources.
# usage: check_rootfs.sh ROOTFS cpu|cuda      (root: it uses chroot)
set -euo pipefail
root=$1 flavour=$2
fails=0
fail() { echo "check_rootfs: $*" >&2; fails=$((fails + 1)); }
libs=(/opt/lmx/bin/lmx-server /opt/lmx/bin/lmx /opt/lmx/lib/liblmx.so)
[[ $flavour == cuda ]] && libs+=(/opt/lmx/lib/liblmx_cuda.so)
for b in "${libs[@]}" /opt/lmx/bin/entrypoint.sh; do [[ -f $root$b ]] || fail "$b is missing"; done
((fails == 0)) || exit 1

for b in "${libs[@]}"; do
  out=$(chroot "$root" /usr/bin/ldd "$b" 2>&1) || fail "ldd $b failed: $out"
  while read -r line; do
    [[ $line == *"not found"* ]] || continue
    [[ $flavour == cuda && $line == libcuda.so.1* ]] && continue  # the host driver's
    fail "$b: ${line%% =>*} is not in the image"
  done <<<"$out"
  if [[ $flavour == cuda && $b == */liblmx_cuda.so ]]; then
    for lib in libcudart libcublas libcublasLt; do
      grep -Eq "^\s*$lib\.so\.[0-9]+ => /opt/lmx/lib/" <<<"$out" ||
        fail "$b does not load $lib from /opt/lmx/lib: $(grep "$lib\." <<<"$out" || echo absent)"
    done
  fi
  if [[ $flavour == cpu || $b == */liblmx.so ]] && grep -Eq 'libcu(da|dart|blas)' <<<"$out"; then
    fail "$b of the $flavour image loads CUDA libraries"
  fi
done

# NCCL: opened by liblmx_cuda.so when a model is split over GPUs (not a link dependency): it must
# be in /opt/lmx/lib with its own libraries resolving, unless the image was completed without it
# (LMX_IMAGE_NCCL=omit: container/gpu_image_check.sh on a host whose NCCL needs a newer libc).
if [[ $flavour == cuda && ${LMX_IMAGE_NCCL:-include} != omit ]]; then
  nccl=$(cd "$root/opt/lmx/lib" && ls libnccl.so.[0-9]* 2>/dev/null | head -1)
  if [[ -z $nccl ]]; then
    fail "/opt/lmx/lib has no libnccl.so.N (tensor parallelism opens it)"
  else
    out=$(chroot "$root" /usr/bin/ldd "/opt/lmx/lib/$nccl" 2>&1) || fail "ldd $nccl failed: $out"
    while read -r line; do  # a missing library or a libc too old for it
      [[ $line == *"not found"* && $line != libcuda.so.1* ]] && fail "/opt/lmx/lib/$nccl: $line"
    done <<<"$out"
  fi
fi

grep -q '^lmx:x:1000:1000:' "$root/etc/passwd" || fail "no user lmx (uid 1000) in /etc/passwd"
for cmd in "/opt/lmx/bin/lmx-server --help" "/opt/lmx/bin/lmx --help"; do
  # shellcheck disable=SC2086
  out=$(chroot --userspec=1000:1000 "$root" $cmd 2>&1) || fail "'$cmd' as uid 1000 failed: $out"
done

for tool in gcc g++ cc c++ cpp clang clang++ ld as make cmake ninja nvcc; do
  for dir in /usr/bin /usr/local/bin /bin /opt/lmx/bin; do
    [[ -L $root$dir ]] && continue  # /bin -> usr/bin
    [[ -e $root$dir/$tool || -L $root$dir/$tool ]] && fail "the image holds a build tool: $dir/$tool"
  done
done
[[ -e $root/usr/local/cuda || -L $root/usr/local/cuda ]] && fail "the image holds /usr/local/cuda"
found=$(find "$root" -xdev \( -name '*.cpp' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \
  -o -name '*.h' -o -name '*.hpp' -o -name '*.a' -o -name CMakeLists.txt \) -print -quit)
[[ -z $found ]] || fail "the image holds sources, headers or static libraries: ${found#"$root"}"

if ((fails)); then echo "check_rootfs: $fails problem(s) in $root" >&2; exit 1; fi
echo "check_rootfs: $flavour rootfs ok (libraries resolve, starts as uid 1000, no build tools or sources)" >&2
