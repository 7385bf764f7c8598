#!/usr/bin/env bash
# Container entrypoint, SageMaker conventions:
#   docker run IMAGE serve     -> lmx-server on the model store (SageMaker calls exactly this)
#   docker run IMAGE           -> the same
#   docker run IMAGE CMD ...   -> runs CMD (e.g. bash, or `lmx config --model-dir /opt/ml/model`)
# Environment: SAGEMAKER_BIND_TO_PORT (default 8080), LMX_MODEL_DIR (default /opt/ml/model),
# LMX_SERVER (default lmx-server on PATH), LMX_SERVER_ARGS (extra flags), OPTION_* / SERVING_* /
# HF_MODEL_ID ... (read by the plugin, see docs/configuration.md). LMX_DRY_RUN=1 prints the
# command instead of running it (used by tests/container/entrypoint_test.sh).
set -euo pipefail

run() {
  if [[ "${LMX_DRY_RUN:-0}" == 1 ]]; then
    printf '%q ' "$@"
    printf '\n'
    exit 0
  fi
  exec "$@"
}

serve() {
  local port="${SAGEMAKER_BIND_TO_PORT:-8080}"
  if ! [[ "$port" =~ ^[0-9]+$ ]] || ((port < 1 || port > 65535)); then
    echo "entrypoint: SAGEMAKER_BIND_TO_PORT must be a port number (1-65535), got '$port'" >&2
    exit 2
  fi
  local model_dir="${LMX_MODEL_DIR:-/opt/ml/model}"
  if [[ ! -d "$model_dir" ]]; then
    echo "entrypoint: model directory $model_dir does not exist (mount the model there or set" \
      "LMX_MODEL_DIR)" >&2
    exit 2
  fi
  local extra=()
  if [[ -n "${LMX_SERVER_ARGS:-}" ]]; then read -r -a extra <<<"$LMX_SERVER_ARGS"; fi
  run "${LMX_SERVER:-lmx-server}" --model-dir "$model_dir" --port "$port" "${extra[@]}" "$@"
}

if [[ $# -eq 0 ]]; then
  serve
elif [[ "$1" == serve ]]; then
  shift
  serve "$@"
else
  run "$@"
fi
