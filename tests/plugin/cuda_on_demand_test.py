#!/usr/bin/env python3
"""The CUDA backend is opened on demand (plugin/cuda_backend_loader.cpp), in a CUDA build:

  - liblmx.so needs no CUDA library, and liblmx_cuda.so exports only its two functions;
  - the loader, run by cuda_loader_probe beside liblmx_cuda.so: nothing CUDA is mapped before,
    the library loads (its build stamp matches), the backend is made (a GPU) or says there is no
    GPU, and the CUDA libraries are mapped only now;
  - the probe copied alone into an empty directory: the load fails naming the missing
    liblmx_cuda.so, and nothing CUDA gets mapped.

usage: cuda_on_demand_test.py --lib-dir DIR --model DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def probe(path, model):
    out = subprocess.run([path, model], capture_output=True, text=True, timeout=300)
    check(out.returncode == 0, f"{path} exited {out.returncode}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib-dir", required=True)
    ap.add_argument("--model", required=True)
    a = ap.parse_args()
    plugin = os.path.join(a.lib_dir, "liblmx.so")
    cuda = os.path.join(a.lib_dir, "liblmx_cuda.so")
    probe_path = os.path.join(a.lib_dir, "cuda_loader_probe")

    needed = subprocess.run(["readelf", "-d", plugin], capture_output=True, text=True,
                            check=True).stdout
    check(not any(x in needed for x in ("libcudart", "libcublas", "libnccl")),
          f"liblmx.so needs a CUDA library:\n{needed}")
    exported = subprocess.run(["nm", "-D", "--defined-only", cuda], capture_output=True,
                              text=True, check=True).stdout.split()
    names = sorted(x for x in exported if x.startswith("lmx_") or x.startswith("_Z"))
    check(names == ["lmx_cuda_backend_v1", "lmx_cuda_build_stamp"],
          f"liblmx_cuda.so exports {names}")

    beside = probe(probe_path, a.model)
    print("beside liblmx_cuda.so:", beside, file=sys.stderr)
    check(beside["mapped_before"] == [], f"CUDA mapped before the load: {beside}")
    check(beside["load"] == "ok", f"the loader did not open {cuda}: {beside['load']}")
    check(beside["backend"] == "ok" or "GPU" in str(beside["backend"]),
          f"the backend is made, or says that there is no GPU: {beside['backend']}")
    check("libcudart" in beside["mapped_after"], f"CUDA not mapped after the load: {beside}")

    with tempfile.TemporaryDirectory() as d:
        alone_path = os.path.join(d, "cuda_loader_probe")
        shutil.copy2(probe_path, alone_path)
        alone = probe(alone_path, a.model)
        print("alone:", alone, file=sys.stderr)
        check(os.path.join(d, "liblmx_cuda.so") in alone["load"] and
              "could not be loaded" in alone["load"],
              f"without liblmx_cuda.so the error names it: {alone['load']}")
        check(alone["mapped_after"] == [], f"CUDA mapped although nothing loaded: {alone}")
    print(f"{len(failures)} failed" if failures else "all checks passed", file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
