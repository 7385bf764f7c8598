#!/usr/bin/env bash
# The cuda image on a GPU machine: unpacks its root filesystem, checks with ldd (in the image, the
# host's driver mounted as the NVIDIA container runtime mounts it) that every library resolves,
# then starts it as SageMaker does (`serve`, the model at /opt/ml/model, option.device=cuda) and
# serves one request on the GPU. Exits 0 only if all of that holds.
#   bash container/gpu_image_check.sh IMAGE.tar|PACK_DIR [MODEL_DIR]
# A device call carries 64 MiB with the repository; the cuda archive is far larger (the CUDA
# libraries alone are ~800 MiB). So for the device, build it without the CUDA runtime layer and
# pack its root filesystem with xz; this script then copies that layer's libraries from the GPU
# machine's own toolkit with the script the build uses (container/image/cuda_libs.sh: the same
# CUDA 13.0 and allow-list) before checking. Here:
#   LMX_IMAGE_NVIDIA_LIBS=omit bash container/build-image.sh cuda build-image/lmx-cuda-device.tar
#   bash container/image/pack_for_device.sh build-image/lmx-cuda-device.tar .cache/device/image
#   cp -r ../shared/models/tinystories-656k .cache/device/model
# then on the device: run(command="bash container/gpu_image_check.sh .cache/device/image
#   .cache/device/model", carry=[".cache/device"])
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
[[ $# -ge 1 && $# -le 2 ]] || { echo "usage: gpu_image_check.sh IMAGE.tar|PACK_DIR [MODEL_DIR]" >&2; exit 2; }
image=$(realpath "$1")
model=$(realpath "${2:-$repo/.cache/device/model}")
[[ -e $image ]] || { echo "gpu_image_check: $1 does not exist" >&2; exit 2; }
[[ -f $model/config.json ]] || { echo "gpu_image_check: $model is not a model directory" >&2; exit 2; }
for tool in unshare python3 nvidia-smi ldconfig; do
  command -v "$tool" >/dev/null || { echo "gpu_image_check: $tool is not installed" >&2; exit 1; }
done
unshare --mount --pid --fork true ||
  { echo "gpu_image_check: this machine refuses new mount/PID namespaces (root needed)" >&2; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

work=$(mktemp -d "${TMPDIR:-/tmp}/lmx-gpu-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
flavour=$(bash "$repo/container/image/unpack.sh" "$image" "$work")
[[ $flavour == cuda ]] || { echo "gpu_image_check: $1 is the '$flavour' image, not the cuda one" >&2; exit 1; }
root="$work/rootfs"
if grep -q '"org.lmx.nvidia-libs": "omit"' "$work/image.json"; then
  echo "gpu_image_check: the image has no CUDA runtime layer; adding it from this machine's toolkit"
  # Not NCCL: the one here may need a newer libc than the image's Debian (this machine's does:
  # GLIBC_2.38), and only tensor parallelism opens it; the image build checks the NCCL it copies
  # from its own toolkit (container/image/check_rootfs.sh). This check serves on one GPU.
  export LMX_IMAGE_NCCL=omit
  bash "$repo/container/image/cuda_libs.sh" "$root/opt/lmx/lib" "$root/opt/lmx/share/licenses" \
    "$root/opt/lmx/lib/liblmx_cuda.so" "$root/opt/lmx/bin/lmx"
  ldconfig -r "$root"
fi
bash "$repo/container/image/check_rootfs.sh" "$root" cuda

# The driver, as the NVIDIA container runtime gives it: device nodes and libcuda & co. where the
# image's LD_LIBRARY_PATH looks (/usr/local/nvidia/lib64).
run_args=(--config "$work/image.json" --rootfs "$root")
for dev in /dev/nvidia[0-9]* /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia-uvm-tools; do
  if [[ -e $dev ]]; then run_args+=(--device "$dev"); fi
done
driver_libs=$(ldconfig -p | awk '$1 ~ /^lib(cuda|nvidia-ptxjitcompiler|nvidia-nvvm|nvidia-gpucomp|nvidia-ml)\.so\.[0-9.]+$/ && /x86-64/ {print $1 " " $NF}' | sort -u -k1,1)
[[ -n $driver_libs ]] || { echo "gpu_image_check: no libcuda.so.1 on this machine (ldconfig -p)" >&2; exit 1; }
while read -r name path; do
  run_args+=(-v "$path:/usr/local/nvidia/lib64/$name:ro")
done <<<"$driver_libs"
echo "driver libraries given to the container: $(awk '{print $1}' <<<"$driver_libs" | paste -sd' ')"

# libcudart loads libcuda.so.1 with dlopen (ldd of liblmx_cuda.so, the CUDA backend liblmx.so
# opens on demand, does not list it): the driver's own
# dependencies must resolve in the image too, and serving on cuda below proves it is found.
echo "== ldd in the image"
ldd_out=$(python3 "$repo/container/image/oci_run.py" "${run_args[@]}" ldd /opt/lmx/lib/liblmx.so \
  /opt/lmx/lib/liblmx_cuda.so /opt/lmx/bin/lmx-server /opt/lmx/bin/lmx /usr/local/nvidia/lib64/libcuda.so.1)
echo "$ldd_out"
if grep -q "not found" <<<"$ldd_out"; then echo "gpu_image_check: FAIL: a library is missing" >&2; exit 1; fi

echo "== serve one request on the GPU"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 "$repo/container/image/oci_run.py" "${run_args[@]}" -v "$model:/opt/ml/model:ro" \
  -e SAGEMAKER_BIND_TO_PORT="$port" -e OPTION_DEVICE=cuda -e OPTION_MAX_TOKENS=256 serve \
  >"$work/server.log" 2>&1 &
runner=$!
served=0
python3 - "$port" "$runner" <<'EOF' || served=$?
import json, sys, time, urllib.error, urllib.request
port, runner = sys.argv[1], sys.argv[2]
url = f"http://127.0.0.1:{port}"


def alive(pid):  # a finished child stays a zombie until the shell waits for it
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


deadline, ping = time.time() + 300, None
while time.time() < deadline:
    try:
        with urllib.request.urlopen(url + "/ping", timeout=5) as r:
            ping = json.loads(r.read())
            break
    except urllib.error.HTTPError as e:
        body = json.loads(e.read() or b"{}")
        if body.get("state") == "failed":
            sys.exit(f"FAIL: the model failed to load: {body}")
    except OSError:
        pass
    if not alive(runner):
        sys.exit("FAIL: the container exited before /ping said ready")
    time.sleep(0.2)
print("ping:", json.dumps(ping))
if not ping or ping.get("device") != "cuda":
    sys.exit(f"FAIL: not serving on the GPU: {ping}")
req = urllib.request.Request(url + "/invocations", method="POST",
                             data=json.dumps({"inputs": "Once upon a time",
                                              "parameters": {"max_new_tokens": 24,
                                                             "details": True}}).encode(),
                             headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=120) as r:
    out = json.loads(r.read())
print("invocation:", json.dumps(out)[:600])
if not out.get("generated_text") or out.get("details", {}).get("generated_tokens", 0) < 1:
    sys.exit("FAIL: no text generated")
EOF
kill -TERM "$runner" 2>/dev/null || true
stopped=0
wait "$runner" || stopped=$?
echo "== container log"
cat "$work/server.log"
echo "container exit status after SIGTERM: $stopped"
if ((served != 0 || stopped != 0)); then echo "gpu_image_check: FAIL" >&2; exit 1; fi
echo "gpu_image_check: the cuda image serves on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
