#!/usr/bin/env bash
# The serving benchmark, for the device machine (H100): builds lmx-server, liblmx.so and
# lmx_serving_bench for sm_90a, serves the Llama-2-7B-shaped random-weight model and runs
#   (a) 256 requests, 512-token prompts, 128 new tokens, 128 concurrent clients (HTTP)
#   (b) the same with 16 concurrent clients (HTTP)
#   (c) (a) against the engine API in-process (lmx_serving_bench, no HTTP); (d) the same for (b)
# writing JSON + logs under $OUT (or build-gpu/serving-bench). The model directory is made on the
# dev machine (no network here) and carried:
#   bash scripts/make_bench_model.sh llama-2-7b .cache/bench_model
#   run(command="bash scripts/serving_bench_device.sh", carry=[".devdeps", ".cache/bench_model"])
# Env: BENCH_MODEL (model dir), BENCH_PHASES (default "a b c"), BENCH_REQUESTS (256),
#      BENCH_PROMPT (512), BENCH_NEW (128), BENCH_CONC_A (128), BENCH_CONC_B (16), BENCH_PORT (8080),
#      BENCH_SKIP_BUILD=1 with BENCH_BIN=DIR (binaries, default build-gpu/bin). CPU smoke test:
#   OPTION_DEVICE=cpu OPTION_DTYPE=fp32 OPTION_ENABLE_CUDA_GRAPH=false BENCH_SKIP_BUILD=1 \
#   BENCH_BIN=build/bin BENCH_MODEL=../shared/models/tinystories-656k BENCH_REQUESTS=20 \
#   BENCH_PROMPT=64 BENCH_NEW=16 BENCH_CONC_A=4 BENCH_CONC_B=2 OUT=/tmp/sb bash scripts/serving_bench_device.sh
source "$(dirname "$0")/device_check_common.sh" build-gpu/serving-bench  # configure_tree, $out
model=${BENCH_MODEL:-.cache/bench_model}
phases=${BENCH_PHASES:-a b c d}
requests=${BENCH_REQUESTS:-256}
port=${BENCH_PORT:-8080}
[[ -f $model/config.json ]] || { echo "no $model/config.json: make it with scripts/make_bench_model.sh and carry it" >&2; exit 1; }

prompt=${BENCH_PROMPT:-512}
new=${BENCH_NEW:-128}
conc_a=${BENCH_CONC_A:-128}
conc_b=${BENCH_CONC_B:-16}
bin=${BENCH_BIN:-build-gpu/bin}
# The benchmark's serving settings (values already in the environment win, for CPU smoke tests).
export OPTION_DEVICE=${OPTION_DEVICE:-cuda} OPTION_DTYPE=${OPTION_DTYPE:-fp16}
export OPTION_MAX_ROLLING_BATCH_SIZE=${OPTION_MAX_ROLLING_BATCH_SIZE:-128}
export OPTION_MAX_TOKENS=${OPTION_MAX_TOKENS:-640}
export OPTION_MAX_ROLLING_BATCH_PREFILL_TOKENS=${OPTION_MAX_ROLLING_BATCH_PREFILL_TOKENS:-4096}
export OPTION_ENABLE_CUDA_GRAPH=${OPTION_ENABLE_CUDA_GRAPH:-true}
export SERVING_JOB_QUEUE_SIZE=${SERVING_JOB_QUEUE_SIZE:-1000}

{ date -u; git rev-parse --short HEAD 2>/dev/null; git status --short 2>/dev/null | head -20
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  nproc; env | grep -E '^(OPTION_|SERVING_)' | sort; } >"$out/env.txt" 2>&1
cat "$out/env.txt"

if [[ -z ${BENCH_SKIP_BUILD:-} ]]; then
  t0=$(date +%s)
  configure_tree . build-gpu || { tail -n 40 "$out/configure-build-gpu.log"; exit 1; }
  ninja -C build-gpu lmx-server lmx_plugin >"$out/build.log" 2>&1 ||
    { grep -E "error|Error" "$out/build.log" | head -40; tail -n 20 "$out/build.log"; exit 1; }
  # The engine-API bench separately: if it fails, the HTTP runs still happen.
  ninja -C build-gpu lmx_serving_bench >>"$out/build.log" 2>&1 ||
    { grep -E "error|Error" "$out/build.log" | head -20; phases=${phases//[cd]/}; }
  echo "build: $(( $(date +%s) - t0 )) s"
fi

server_pid=
# GET a path from the server and print the body (any status); python3 so curl is not needed.
hget() {
  python3 -c '
import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen("http://127.0.0.1:%s%s" % (sys.argv[1], sys.argv[2]), timeout=10).read().decode(), end="")
except urllib.error.HTTPError as e:
    print(e.read().decode(), end="")
except Exception:
    pass
' "$port" "$1"
}
stop_server() {
  [[ -n $server_pid ]] || return 0
  hget /metrics >"$out/metrics_final.txt" 2>/dev/null
  kill -TERM "$server_pid" 2>/dev/null
  for _ in $(seq 60); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.5; done
  kill -KILL "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  server_pid=
}
trap stop_server EXIT

metrics_summary() {  # the server's own view: queue, running, KV, tokens
  hget /metrics | grep -E '^lmx_(queue_depth|running_requests|kv_blocks|generated_tokens_total|prompt_tokens_total|requests_in_flight|cancelled_total|requests_total)' | head -20
}

sample_metrics() {  # every 0.5 s while a phase runs: running/waiting over time
  while sleep 0.5; do
    printf '%s ' "$(date +%s.%N | cut -c1-14)"
    hget /metrics | grep -E '^lmx_(queue_depth|running_requests|kv_blocks_used|generated_tokens_total) ' | awk '{printf "%s=%s ", $1, $2}'
    echo
  done
}

http_phase() {  # name concurrency
  local name=$1 conc=$2 sampler
  echo "== ($name) HTTP: $requests requests, $prompt-token prompts, $new new tokens, $conc concurrent"
  sample_metrics >"$out/metrics_timeline_$name.txt" 2>&1 &
  sampler=$!
  timeout 240 python3 bench/serving/load_generator.py --url "http://127.0.0.1:$port" \
    --requests "$requests" --concurrency "$conc" --prompt-tokens "$prompt" --max-new-tokens "$new" \
    --label "$name" --out "$out/http_$name.json" 2>&1 | tee "$out/http_$name.txt"
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  metrics_summary
}

if [[ $phases == *a* || $phases == *b* ]]; then
  t0=$(date +%s)
  $bin/lmx-server --model-dir "$model" --port "$port" >"$out/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 240); do
    st=$(hget /ping || true)
    [[ $st == *'"ready"'* ]] && break
    [[ $st == *failed* ]] && { echo "load failed: $st"; tail -n 30 "$out/server.log"; exit 1; }
    kill -0 "$server_pid" 2>/dev/null || { echo "server exited"; tail -n 30 "$out/server.log"; exit 1; }
    sleep 0.5
  done
  echo "server ready after $(( $(date +%s) - t0 )) s: $(hget /ping)"
  hget /models; echo
  [[ $phases == *a* ]] && http_phase a "$conc_a"
  [[ $phases == *b* ]] && http_phase b "$conc_b"
  echo "== /metrics"
  hget /metrics | tee "$out/metrics.txt" | grep -v '^#' | grep -v '_bucket{' | head -60
  stop_server
  tail -n 5 "$out/server.log"
fi

engine_phase() {  # name concurrency
  local name=$1 conc=$2
  echo "== ($name) engine API: $requests requests, $prompt-token prompts, $new new tokens, $conc concurrent"
  timeout 240 $bin/lmx_serving_bench --model-dir "$model" --requests "$requests" --concurrency "$conc" \
    --prompt-tokens "$prompt" --max-new-tokens "$new" --label "$name" --out "$out/engine_$name.json" \
    --step-log "$out/steps_$name.log" 2>&1 | tee "$out/engine_$name.txt"
  step_summary "$out/steps_$name.log" | tee -a "$out/engine_$name.txt"
}
# Where the engine's time went in a phase, from its step trace: steps by what they fed the model.
step_summary() {
  python3 - "$1" <<'EOF'
import re, sys
kinds = {}
pat = re.compile(r"step: (\d+) decode \+ (\d+) prompt tokens, ([\d.]+) ms, ([\d.]+) ms since")
for line in open(sys.argv[1]):
    m = pat.search(line)
    if not m:
        continue
    d, p, ms, gap = int(m[1]), int(m[2]), float(m[3]), float(m[4])
    kind = ("with prompt tokens" if p else "decode only, %s sequences" %
            ("128" if d == 128 else "65-127" if d > 64 else "1-64"))
    k = kinds.setdefault(kind, [0, 0.0, 0.0, 0, 0])
    k[0] += 1; k[1] += ms; k[2] += gap; k[3] += d; k[4] += p
total = sum(k[1] + k[2] for k in kinds.values())
print("steps by kind: count, step ms (sum / mean), gaps before them (ms), decode / prompt tokens")
for kind, (n, ms, gap, d, p) in sorted(kinds.items()):
    print("  %-32s %4d  %8.1f / %6.2f  %7.1f  %6d / %6d" % (kind, n, ms, ms / n, gap, d, p))
print("  total %.1f ms" % total)
EOF
}
[[ $phases == *c* ]] && engine_phase c "$conc_a"
[[ $phases == *d* ]] && engine_phase d "$conc_b"  # (b) without HTTP: what TPOT the engine itself gives

python3 - "$out" <<'EOF' 2>&1 | tee "$out/summary.txt"
import json, os, sys
out = sys.argv[1]
rows = []
for name in ("http_a", "http_b", "engine_c", "engine_d"):
    p = os.path.join(out, name + ".json")
    if os.path.exists(p):
        rows.append((name, json.load(open(p))))
print("%-9s %5s %7s %10s %7s %9s %9s %8s %8s" % ("run", "conc", "errors", "out tok/s", "req/s",
      "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99"))
for n, r in rows:
    print("%-9s %5d %7d %10.0f %7.2f %9.1f %9.1f %8.2f %8.2f" % (n, r["workload"]["concurrency"], r["errors"],
          r["output_tokens_per_s"], r["requests_per_s"], r["ttft_ms"]["p50"] or 0, r["ttft_ms"]["p99"] or 0,
          r["tpot_ms"]["p50"] or 0, r["tpot_ms"]["p99"] or 0))
d = dict(rows)
for http, engine in (("http_a", "engine_c"), ("http_b", "engine_d")):
    if http in d and engine in d:
        h, e = d[http]["output_tokens_per_s"], d[engine]["output_tokens_per_s"]
        print("HTTP overhead vs engine API at %d concurrent: %.1f%% of throughput"
              % (d[http]["workload"]["concurrency"], 100 * (1 - h / e)))
EOF
# The device returns few files: JSON results and the summary stay, the logs go into one tarball.
(cd "$out" && mkdir -p logs && for f in *; do
   case $f in *.json|summary.txt|logs|logs.tar.gz) ;; *) mv "$f" logs/ ;; esac
 done && tar czf logs.tar.gz logs && rm -rf logs)
