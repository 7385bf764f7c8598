#!/usr/bin/env bash
# Prints, one a line, the Debian packages that hold the shared libraries the given binaries load
# (ldd on this machine, which built them). Libraries of the CUDA toolkit are left out: the CUDA
# flavour copies them itself (container/image/cuda_libs.sh), and libcuda.so.1 comes from the host's
# driver.
# Any library that is missing or that no Debian package owns is an error naming it.
# usage: runtime_packages.sh BINARY...
set -euo pipefail
cuda_home=$(readlink -f "${CUDA_HOME:-/usr/local/cuda}" 2>/dev/null || echo /usr/local/cuda)
search="$cuda_home/lib64:$cuda_home/lib:$cuda_home/targets/x86_64-linux/lib"
driver='^lib(cuda|nvidia-ml)\.so\.1 '

owner() {  # owner LIBRARY_PATH -> package name; dpkg knows /lib/... or /usr/lib/... (usrmerge)
  local path=$1 candidate real out
  real=$(readlink -f "$path")
  for candidate in "$path" "$real" "${path#/usr}" "${real#/usr}" "/usr$path" "/usr$real"; do
    if out=$(dpkg-query -S "$candidate" 2>/dev/null); then
      out=${out%%:*}          # "libfoo1:amd64: /path" -> "libfoo1"
      echo "${out%%,*}"
      return 0
    fi
  done
  return 1
}

declare -A packages=()
for bin in "$@"; do
  [[ -f $bin ]] || { echo "runtime_packages: $bin does not exist" >&2; exit 1; }
  while read -r line; do
    [[ $line =~ $driver ]] && continue
    if [[ $line == *"not found"* ]]; then
      echo "runtime_packages: $bin needs ${line%% *}, which is not installed here" >&2
      exit 1
    fi
    [[ $line =~ =\>\ (/[^ ]+) ]] || continue
    lib=${BASH_REMATCH[1]}
    [[ $(readlink -f "$lib") == "$cuda_home"/* ]] && continue
    if ! pkg=$(owner "$lib"); then
      echo "runtime_packages: $lib (needed by $bin) belongs to no Debian package," \
        "so the image cannot install it" >&2
      exit 1
    fi
    packages[$pkg]=1
  done < <(LD_LIBRARY_PATH="$search${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$bin")
done
printf '%s\n' "${!packages[@]}" | sort
