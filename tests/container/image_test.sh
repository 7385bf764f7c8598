#!/usr/bin/env bash
# The serving image, unpacked and started as SageMaker starts it, driven by boto3:
#   bash tests/container/image_test.sh IMAGE.tar MODEL_DIR
# IMAGE.tar comes from `container/build-image.sh cpu IMAGE.tar` (or is a folder from
# container/image/pack_for_device.sh); MODEL_DIR is mounted read-only
# at /opt/ml/model (e.g. ../shared/models/tinystories-656k). Exits 0 only if every check holds,
# 77 (with a line saying why) where this machine cannot run it: not root, no umoci, no
# namespaces, no boto3.
set -euo pipefail
if [[ $# -ne 2 ]]; then echo "usage: image_test.sh IMAGE.tar MODEL_DIR" >&2; exit 2; fi
image=$(realpath "$1")
model=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
[[ -e $image ]] || { echo "image_test: $1 does not exist" >&2; exit 2; }
[[ -f $model/config.json ]] || { echo "image_test: $2 is not a model directory (no config.json)" >&2; exit 2; }

skip() { echo "SKIP: image_test: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "needs root (mount namespaces and chroot)"
for tool in umoci unshare chroot; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (scripts/setup.sh installs it)"
done
python3 -c 'import boto3' 2>/dev/null || skip "python3 has no boto3 (apt-get install python3-boto3)"
unshare --mount --pid --fork true 2>/dev/null || skip "this machine refuses new mount/PID namespaces"

work=$(mktemp -d "${TMPDIR:-/tmp}/lmx-image-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
flavour=$(bash "$repo/container/image/unpack.sh" "$image" "$work")
if [[ $flavour != cpu ]]; then
  echo "image_test: $1 is the '$flavour' image, not the cpu one; the cuda image runs on a GPU" \
    "machine (container/gpu_image_check.sh)" >&2
  exit 1
fi
bash "$repo/container/image/check_rootfs.sh" "$work/rootfs" cpu
cd "$here"
python3 image_sagemaker.py --runner "$repo/container/image/oci_run.py" \
  --image-json "$work/image.json" --rootfs "$work/rootfs" --model "$model"
