#!/usr/bin/env bash
# The serving benchmark's tooling end to end on the CPU with the tiny model: the load generator
# over HTTP against lmx-server, the engine-API bench, the summary (scripts/serving_bench_device.sh
# with small settings). Checks that every request of every phase was answered in full, with the
# same prompt words on both sides (bench/serving/prompt_words.txt); the figures are not checked.
# Usage: serving_bench_smoke.sh REPO_ROOT BIN_DIR MODEL_DIR
set -euo pipefail
root=$1 bin=$2 model=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
requests=8 new=4
cd "$root"
if ! OPTION_DEVICE=cpu OPTION_DTYPE=fp32 OPTION_ENABLE_CUDA_GRAPH=false BENCH_SKIP_BUILD=1 \
  BENCH_BIN="$bin" BENCH_MODEL="$model" BENCH_REQUESTS=$requests BENCH_PROMPT=32 BENCH_NEW=$new \
  BENCH_CONC_A=4 BENCH_CONC_B=2 BENCH_PORT="$port" OUT="$work/out" \
  bash scripts/serving_bench_device.sh >"$work/log" 2>&1; then
  tail -n 40 "$work/log"
  exit 1
fi
python3 - "$work/out" "$requests" "$new" <<'PY'
import json, os, sys
out, requests, new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for name in ("http_a", "http_b", "engine_c", "engine_d"):
    path = os.path.join(out, name + ".json")
    assert os.path.exists(path), f"{name}: no result"
    r = json.load(open(path))
    assert r["errors"] == 0, f"{name}: {r['errors']} errors: {r['error_samples']}"
    assert r["completed"] == requests, f"{name}: {r['completed']} of {requests} completed"
    assert r["output_tokens"] == requests * new, f"{name}: {r['output_tokens']} tokens"
print(open(os.path.join(out, "summary.txt")).read())
PY
