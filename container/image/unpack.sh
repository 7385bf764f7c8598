#!/usr/bin/env bash
# Unpacks an image for running it (container/image/oci_run.py --config DEST/image.json
# --rootfs DEST/rootfs). SOURCE is an OCI archive from container/build-image.sh (unpacked with
# umoci) or a folder from container/image/pack_for_device.sh (rootfs.tar.xz + image.json).
#   bash container/image/unpack.sh SOURCE DEST      (root: the files keep their owners)
# DEST gets rootfs/ and image.json (the image's config blob); prints the image's flavour.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: unpack.sh IMAGE.tar|PACK_DIR DEST" >&2; exit 2; }
src=$1 dest=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dest"
if [[ -f $src ]]; then
  command -v umoci >/dev/null || { echo "unpack: umoci is not installed (scripts/setup.sh)" >&2; exit 1; }
  mkdir "$dest/layout"
  tar -xf "$src" -C "$dest/layout"
  ref=$(umoci ls --layout "$dest/layout")
  [[ -n $ref && $ref != *$'\n'* ]] || { echo "unpack: $src must hold one image, it has: '$ref'" >&2; exit 1; }
  umoci unpack --image "$dest/layout:$ref" "$dest/bundle" >/dev/null
  mv "$dest/bundle/rootfs" "$dest/rootfs"
  python3 -c 'import json, sys
sys.path.insert(0, sys.argv[1])
from oci_run import config_blob
json.dump(config_blob(sys.argv[2], sys.argv[3]), open(sys.argv[4], "w"))' \
    "$here" "$dest/layout" "$ref" "$dest/image.json"
  rm -rf "$dest/bundle" "$dest/layout"
elif [[ -f $src/rootfs.tar.xz && -f $src/image.json ]]; then
  mkdir "$dest/rootfs"
  tar --numeric-owner -xJf "$src/rootfs.tar.xz" -C "$dest/rootfs"
  cp "$src/image.json" "$dest/image.json"
else
  echo "unpack: $src is neither an OCI archive nor a folder with rootfs.tar.xz and image.json" >&2
  exit 1
fi
python3 -c 'import json, sys
print(json.load(open(sys.argv[1])).get("config", {}).get("Labels", {}).get("org.lmx.flavour", "unknown"))' \
  "$dest/image.json"
