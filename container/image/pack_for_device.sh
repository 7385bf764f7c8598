#!/usr/bin/env bash
# Packs an image for a machine that takes only a small transfer (the GPU machine: 64 MiB with the
# repository): its root filesystem as unpacked by umoci, xz-compressed, and its config blob.
# container/gpu_image_check.sh (through container/image/unpack.sh) takes the folder in place of
# the archive.
#   bash container/image/pack_for_device.sh IMAGE.tar OUT_DIR     (OUT_DIR: rootfs.tar.xz, image.json)
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: pack_for_device.sh IMAGE.tar OUT_DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/lmx-pack.XXXXXX")
trap 'rm -rf "$work"' EXIT
flavour=$(bash "$here/unpack.sh" "$1" "$work/image")
mkdir -p "$2"
cp "$work/image/image.json" "$2/image.json"
tar --numeric-owner -C "$work/image/rootfs" -cf - . | xz -T0 -9 >"$2/rootfs.tar.xz"  # -9: its 64 MiB window finds the CUDA kernels lmx and liblmx.so share
echo "pack_for_device: $2: $flavour image, rootfs $(du -m "$2/rootfs.tar.xz" | cut -f1) MiB (xz)"
