#!/usr/bin/env bash
# CI's image step (scripts/test.sh): builds the cpu image with container/build-image.sh and runs
# tests/container/image_test.sh on it with tinystories-656k. Where the machine cannot (no root,
# debootstrap, umoci or namespaces) it says SKIP and why, and exits 0; any other failure fails.
# The image goes to build-image/lmx-cpu.tar; the Debian base is cached (container/image/base.sh).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
model=${LMX_IMAGE_TEST_MODEL:-$repo/../shared/models/tinystories-656k}
skip() { echo "SKIP: container image test: $*"; exit 0; }
if [[ $(id -u) != 0 ]]; then  # as scripts/setup.sh does: sudo where it is allowed
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then exec sudo -n -E bash "$0" "$@"; fi
  skip "needs root or sudo (debootstrap, chroot, mount namespaces)"
fi
for tool in debootstrap umoci unshare; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (scripts/setup.sh installs it)"
done
unshare --mount --pid --fork true 2>/dev/null || skip "this machine refuses new mount/PID namespaces"

started=$SECONDS
image="$repo/build-image/lmx-cpu.tar"
bash "$repo/container/build-image.sh" cpu "$image" || { echo "FAIL: container/build-image.sh cpu"; exit 1; }
built=$SECONDS
bash "$repo/tests/container/image_test.sh" "$image" "$model"
rc=$?
echo "container image: build $((built - started)) s, test $((SECONDS - built)) s"
if ((rc == 77)); then exit 0; fi  # image_test.sh printed SKIP and why
if ((rc != 0)); then echo "FAIL: tests/container/image_test.sh (exit $rc)"; fi
exit $rc
