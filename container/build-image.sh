#!/usr/bin/env bash
# Builds the LMX serving image as an OCI archive, without Docker (debootstrap + umoci):
#   bash container/build-image.sh [cpu|cuda] OUTPUT.tar      (cpu is the default flavour)
# Layers: a minimal Debian base with the runtime libraries (cached, container/image/base.sh),
# for cuda the CUDA runtime libraries (container/image/cuda_libs.sh), then lmx-server, liblmx.so
# (and for cuda liblmx_cuda.so, the CUDA backend liblmx.so opens on demand), lmx and the
# entrypoint under /opt/lmx. Run: entrypoint + `serve`, as uid 1000, port 8080.
# env: LMX_IMAGE_BUILD_DIR   use this build of lmx (its flavour is checked) instead of building
#                            build-image/<flavour> here
#      LMX_CUDA_ARCHITECTURES  cuda flavour's GPUs (default "80;86;89;90a", as the Dockerfile;
#                            90a alone builds for Hopper only, faster)
#      LMX_IMAGE_NVIDIA_LIBS=omit  leave the CUDA runtime layer out (a small archive that
#                            container/gpu_image_check.sh completes from the GPU machine's toolkit)
#      LMX_IMAGE_CACHE, LMX_DEBIAN_MIRROR: see container/image/base.sh
set -euo pipefail
umask 022
repo=$(cd "$(dirname "$0")/.." && pwd)
image_dir="$repo/container/image"

flavour=cpu
if [[ ${1:-} == cpu || ${1:-} == cuda ]]; then flavour=$1; shift; fi
[[ $# -eq 1 && -n $1 ]] || { echo "usage: build-image.sh [cpu|cuda] OUTPUT.tar" >&2; exit 2; }
output=$(realpath -m "$1")
nvidia_libs=${LMX_IMAGE_NVIDIA_LIBS:-include}
[[ $nvidia_libs == include || $nvidia_libs == omit ]] ||
  { echo "build-image: LMX_IMAGE_NVIDIA_LIBS must be include or omit, got '$nvidia_libs'" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "build-image: needs root (debootstrap, chroot, file ownership)" >&2; exit 1; }
for tool in umoci debootstrap tar chroot ldconfig; do
  command -v "$tool" >/dev/null ||
    { echo "build-image: $tool is not installed (scripts/setup.sh installs it)" >&2; exit 1; }
done
started=$SECONDS

# ---- 1. lmx itself -----------------------------------------------------------------------------
build=${LMX_IMAGE_BUILD_DIR:-$repo/build-image/$flavour}
if [[ -z ${LMX_IMAGE_BUILD_DIR:-} ]]; then
  cuda_flags=(-DLMX_WITH_CUDA=OFF)
  [[ $flavour == cuda ]] && cuda_flags=(-DLMX_WITH_CUDA=ON
    -DCMAKE_CUDA_ARCHITECTURES="${LMX_CUDA_ARCHITECTURES:-80;86;89;90a}")
  # No MPI: lmx-server does not run under mpirun, and Open MPI would double the image.
  mkdir -p "$build"
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLMX_BUILD_TESTS=OFF \
    -DLMX_WITH_MPI=OFF "${cuda_flags[@]}" >"$build.configure.log" 2>&1 ||
    { tail -n 30 "$build.configure.log" >&2; echo "build-image: cmake failed" >&2; exit 1; }
  echo "build-image: building lmx-server, lmx, liblmx.so ($flavour) in $build" >&2
  ninja -C "$build" lmx-server lmx lmx_plugin >&2
fi
bins=("$build/bin/lmx-server" "$build/bin/lmx" "$build/lib/liblmx.so")
# The flavour of the build: lmx links the CUDA backend in a CUDA build (liblmx.so never does: it
# opens liblmx_cuda.so beside it on demand, which a CUDA build must then have).
libs=$(ldd "${bins[1]}")  # not piped into grep -q: under pipefail its early exit fails ldd
if [[ $libs == *libcudart* ]]; then built=cuda; else built=cpu; fi
[[ $built == cuda ]] && bins+=("$build/lib/liblmx_cuda.so")
for f in "${bins[@]}"; do [[ -f $f ]] || { echo "build-image: $f is missing" >&2; exit 1; }; done
[[ $built == "$flavour" ]] ||
  { echo "build-image: $build is a $built build, not $flavour" >&2; exit 1; }

# ---- 2. the layers -----------------------------------------------------------------------------
mapfile -t packages < <(bash "$image_dir/runtime_packages.sh" "${bins[@]}")
base_tar=$(bash "$image_dir/base.sh" "${packages[@]}")
work=$(mktemp -d "${TMPDIR:-/tmp}/lmx-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root" "$work/lmx" "$work/nvidia"
tar -xf "$base_tar" -C "$work/root"

lmx="$work/lmx"
install -D -m 755 "${bins[0]}" "$lmx/opt/lmx/bin/lmx-server"
install -D -m 755 "${bins[1]}" "$lmx/opt/lmx/bin/lmx"
install -D -m 755 "${bins[2]}" "$lmx/opt/lmx/lib/liblmx.so"
[[ $flavour == cuda ]] && install -D -m 755 "${bins[3]}" "$lmx/opt/lmx/lib/liblmx_cuda.so"
strip --strip-unneeded "$lmx"/opt/lmx/bin/* "$lmx"/opt/lmx/lib/liblmx*.so
install -D -m 755 "$repo/container/entrypoint.sh" "$lmx/opt/lmx/bin/entrypoint.sh"
install -D -m 644 "$repo/container/serving.properties.example" \
  "$lmx/opt/lmx/share/serving.properties.example"
install -d -m 755 "$lmx/opt/ml/model" "$lmx/etc/ld.so.conf.d"
echo /opt/lmx/lib >"$lmx/etc/ld.so.conf.d/lmx.conf"
layers=(nvidia lmx)
if [[ $flavour == cuda ]]; then
  bash "$image_dir/cuda_libs.sh" "$work/nvidia/opt/lmx/lib" "$work/nvidia/opt/lmx/share/licenses" \
    "${bins[@]}"
  [[ $nvidia_libs == omit ]] && layers=(lmx)
else
  layers=(lmx)
fi
cp -a "$work/nvidia/." "$work/lmx/." "$work/root/"
ldconfig -r "$work/root"
install -m 644 "$work/root/etc/ld.so.cache" "$lmx/etc/ld.so.cache"

# ---- 3. what the image may hold, checked in it -------------------------------------------------
bash "$image_dir/check_rootfs.sh" "$work/root" "$flavour"

# ---- 4. the OCI image --------------------------------------------------------------------------
layout="$work/layout"
revision=$(git -C "$repo" describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
created=$(git -C "$repo" log -1 --format=%cI 2>/dev/null || date -u +%FT%TZ)
umoci init --layout "$layout"
umoci new --image "$layout:$flavour"
umoci raw add-layer --image "$layout:$flavour" --history.created_by "container/image/base.sh" \
  --history.comment "Debian $(basename "$base_tar") with: ${packages[*]}" "$base_tar"
for layer in "${layers[@]}"; do
  mapfile -t entries < <(ls -A "$work/$layer")  # not ".": the layer must not set /'s mode
  tar --numeric-owner --owner=0 --group=0 --sort=name -C "$work/$layer" -cf "$work/$layer.tar" \
    "${entries[@]}"
  umoci raw add-layer --image "$layout:$flavour" --history.created_by "container/build-image.sh" \
    --history.comment "$layer" "$work/$layer.tar"
done
env_args=(--config.env "PATH=/opt/lmx/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
if [[ $flavour == cuda ]]; then
  # What the NVIDIA container runtime reads to give the container the GPUs and the driver
  # (libcuda.so.1), which it mounts where LD_LIBRARY_PATH looks, as in NVIDIA's own images.
  env_args+=(--config.env NVIDIA_VISIBLE_DEVICES=all
    --config.env "NVIDIA_DRIVER_CAPABILITIES=compute,utility"
    --config.env LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib)
fi
umoci config --image "$layout:$flavour" --created "$created" --author "LMX" \
  --config.entrypoint /opt/lmx/bin/entrypoint.sh --config.cmd serve \
  --config.user 1000:1000 --config.workingdir / --config.exposedports 8080/tcp \
  --config.stopsignal SIGTERM "${env_args[@]}" \
  --config.label org.opencontainers.image.title=lmx \
  --config.label org.opencontainers.image.revision="$revision" \
  --config.label org.lmx.flavour="$flavour" \
  --config.label org.lmx.nvidia-libs="$([[ $flavour == cuda ]] && echo "$nvidia_libs" || echo none)"
umoci gc --layout "$layout"
mkdir -p "$(dirname "$output")"
tar --sort=name -C "$layout" -cf "$output.tmp" oci-layout index.json blobs
mv "$output.tmp" "$output"
if command -v skopeo >/dev/null; then  # a reader we did not write must accept it
  skopeo inspect "oci-archive:$output:$flavour" >/dev/null ||
    { echo "build-image: skopeo cannot read $output" >&2; exit 1; }
fi
unpacked=$(stat -c %s "$base_tar")  # the layers' uncompressed tars
for layer in "${layers[@]}"; do unpacked=$((unpacked + $(stat -c %s "$work/$layer.tar") )); done
echo "build-image: $output: $flavour image, $(du -m "$output" | cut -f1) MiB archive," \
  "$((unpacked / 1048576)) MiB of layers unpacked (base ${layers[*]})" \
  "($((SECONDS - started)) s)"
