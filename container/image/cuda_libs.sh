#!/usr/bin/env bash
# Copies the CUDA runtime libraries that the given binaries load (ldd, transitively) from the
# toolkit into LIB_DIR, and NVIDIA's licence texts for them into LICENSE_DIR. Only the
# redistributable runtime is allowed (cudart, cuBLAS, cuBLASLt, NCCL); a binary that needs any
# other toolkit library is an error naming it, so the toolkit itself never enters the image.
# NCCL is not a link dependency (liblmx_cuda.so opens it for tensor parallelism): it is copied
# from the toolkit, else from the system's libraries, unless LMX_IMAGE_NCCL=omit.
# libcuda.so.1 belongs to the driver: the container runtime mounts it from the host.
# Run where the binaries were built, or on a GPU machine to complete an image built with
# LMX_IMAGE_NVIDIA_LIBS=omit (container/gpu_image_check.sh).
# usage: cuda_libs.sh LIB_DIR LICENSE_DIR BINARY...
# env:   CUDA_HOME (default /usr/local/cuda)
set -euo pipefail
[[ $# -ge 3 ]] || { echo "usage: cuda_libs.sh LIB_DIR LICENSE_DIR BINARY..." >&2; exit 2; }
lib_dir=$1 license_dir=$2
shift 2
cuda_home=$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")
[[ -d $cuda_home ]] || { echo "cuda_libs: no CUDA toolkit at ${CUDA_HOME:-/usr/local/cuda}" >&2; exit 1; }
search="$cuda_home/lib64:$cuda_home/lib:$cuda_home/targets/x86_64-linux/lib"
redistributable='^lib(cudart|cublas|cublasLt|nccl)\.so\.[0-9]+$'
mkdir -p "$lib_dir" "$license_dir"

declare -A copied=()
for bin in "$@"; do
  [[ -f $bin ]] || { echo "cuda_libs: $bin does not exist" >&2; exit 1; }
  while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue
    if [[ $path == not ]]; then  # "libX.so.1 => not found"
      # Only CUDA's own are this script's business (on a GPU machine completing an image, the
      # image's Debian libraries are absent from the host); check_rootfs.sh checks the rest.
      if [[ $name =~ $redistributable ]]; then
        echo "cuda_libs: $bin needs $name, which is not in $cuda_home" >&2
        exit 1
      fi
      continue
    fi
    [[ $(readlink -f "$path") == "$cuda_home"/* ]] || continue
    if ! [[ $name =~ $redistributable ]]; then
      echo "cuda_libs: $bin needs $name from the CUDA toolkit, which is not one of the" \
        "redistributable runtime libraries the image may hold (cudart, cublas, cublasLt, nccl)" >&2
      exit 1
    fi
    if [[ -z ${copied[$name]:-} ]]; then
      cp -L "$path" "$lib_dir/$name"
      copied[$name]=$(stat -c %s "$lib_dir/$name")
    fi
  done < <(LD_LIBRARY_PATH="$search${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$bin")
done
((${#copied[@]})) || { echo "cuda_libs: $* load(s) no CUDA library: not a CUDA build" >&2; exit 1; }
if [[ ${LMX_IMAGE_NCCL:-include} != omit ]]; then
  nccl=
  for d in ${search//:/ }; do [[ -f $d/libnccl.so.2 ]] && { nccl=$d/libnccl.so.2; break; }; done
  # NCCL is its own NVIDIA package: beside the toolkit on some machines, in the system's
  # libraries on others.
  [[ -n $nccl ]] || nccl=$(ldconfig -p | awk '$1 == "libnccl.so.2" {print $NF; exit}')
  [[ -n $nccl ]] || { echo "cuda_libs: no libnccl.so.2 in $cuda_home or the system's libraries" >&2; exit 1; }
  cp -L "$nccl" "$lib_dir/libnccl.so.2"
  copied[libnccl.so.2]=$(stat -c %s "$lib_dir/libnccl.so.2")
fi
for name in "${!copied[@]}"; do
  echo "cuda_libs: $name ($(awk -v b="${copied[$name]}" 'BEGIN {printf "%.1f", b / 1048576}') MiB)" >&2
done

# Licences: the wheel-style toolkit keeps them per package, the runfile install in EULA.txt.
found=0
for d in "$cuda_home"/dist-info/nvidia_{cuda_runtime,cublas,nccl}*.dist-info/licenses; do
  [[ -d $d ]] || continue
  pkg=$(basename "$(dirname "$d")" .dist-info)
  for f in "$d"/*; do cp "$f" "$license_dir/${pkg%%-*}-$(basename "$f")" && found=1; done
done
if [[ -f $cuda_home/EULA.txt ]]; then cp "$cuda_home/EULA.txt" "$license_dir/NVIDIA-CUDA-EULA.txt"; found=1; fi
((found)) || echo "cuda_libs: warning: no NVIDIA licence text found in $cuda_home" >&2
