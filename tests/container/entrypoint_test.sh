#!/usr/bin/env bash
# The container entrypoint's logic outside Docker: `serve`, no argument, other commands,
# SAGEMAKER_BIND_TO_PORT, LMX_MODEL_DIR, bad ports and a missing model store.
# usage: entrypoint_test.sh path/to/container/entrypoint.sh
set -uo pipefail
EP="$1"
fails=0
model="$(mktemp -d)"
trap 'rm -rf "$model"' EXIT

expect() {  # expect NAME WANT_RC WANT_SUBSTRING -- env/args...
  local name="$1" want_rc="$2" want="$3"
  shift 4
  local out rc
  out="$(env LMX_DRY_RUN=1 LMX_MODEL_DIR="$model" "$@" 2>&1)"
  rc=$?
  if [[ $rc != "$want_rc" || "$out" != *"$want"* ]]; then
    echo "FAIL $name: rc=$rc (want $want_rc) output: $out (want: $want)"
    fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}

expect "serve default port" 0 "lmx-server --model-dir $model --port 8080" -- bash "$EP" serve
expect "no argument serves" 0 "lmx-server --model-dir $model --port 8080" -- bash "$EP"
expect "SageMaker port" 0 "--port 9999" -- SAGEMAKER_BIND_TO_PORT=9999 bash "$EP" serve
expect "extra serve args" 0 "--port 8080 --threads 4" -- bash "$EP" serve --threads 4
expect "LMX_SERVER_ARGS" 0 "--drain-timeout 5" -- LMX_SERVER_ARGS="--drain-timeout 5" bash "$EP" serve
expect "server override" 0 "/x/lmx-server --model-dir" -- LMX_SERVER=/x/lmx-server bash "$EP" serve
expect "other command" 0 "echo hello" -- bash "$EP" echo hello
expect "bad port" 2 "SAGEMAKER_BIND_TO_PORT" -- SAGEMAKER_BIND_TO_PORT=http bash "$EP" serve
expect "port range" 2 "SAGEMAKER_BIND_TO_PORT" -- SAGEMAKER_BIND_TO_PORT=70000 bash "$EP" serve
expect "missing model" 2 "does not exist" -- LMX_MODEL_DIR=/nonexistent bash "$EP" serve
# Without dry run the command is exec'd: exit status and output are the command's.
out="$(LMX_MODEL_DIR="$model" bash "$EP" sh -c 'echo ran; exit 3')"; rc=$?
if [[ $rc != 3 || "$out" != ran ]]; then echo "FAIL exec: rc=$rc out=$out"; fails=$((fails + 1)); else echo "ok   exec"; fi

if ((fails)); then echo "$fails failure(s)"; exit 1; fi
echo "entrypoint: all passed"
