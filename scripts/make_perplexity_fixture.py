#!/usr/bin/env python3
"""Transformers' fp32 perplexity of the real models on the project's text, for `lmx perplexity`
(tests/fixtures/perplexity/expected.json; docs/quantization.md).

It needs torch + transformers, which only the GPU machine has (this workplace has neither): run
it there, carrying the real models, and commit the file it writes (last made 2026-11-26,
transformers 5.17.0, torch 2.11.0):

  # here: cp -r ../shared/models .cache/shared_models   (carried as for the parity fixtures)
  # on the device (fp32 on its CPU with eager attention; the GPU is not used):
  python3 scripts/make_perplexity_fixture.py --models .cache/shared_models \
      --text tests/fixtures/perplexity/text.txt --out $OUT/expected.json

Protocol (the same as `lmx perplexity`, cli/perplexity.h): paragraphs at blank lines (lines of
whitespace only), each stripped; encoded with the tokenizer's default special tokens (BOS for
these Llama tokenizers); truncated to max_position_embeddings; the sum over every predicted token
of -log_softmax(fp32 logits) in fp64, natural log. For each model the file records paragraphs,
tokens, nll, ppl, the token ids of every paragraph (so a tokenizer difference shows as such, not
as a perplexity difference) and the library versions. tests/quant/perplexity_test.py compares
`lmx perplexity` on the CPU with it (1e-4 relative).
"""
import argparse
import json
import math
import os
import re

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

MODELS = ("stories260k", "tinystories-656k")


def paragraphs(text):
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def score(model_dir, paras):
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    context = model.config.max_position_embeddings
    nll, tokens, all_ids = 0.0, 0, []
    for p in paras:
        ids = tok(p, add_special_tokens=True)["input_ids"][:context]
        all_ids.append(ids)
        if len(ids) < 2:
            continue
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float()  # [T, vocab] fp32
        logp = torch.log_softmax(logits.double(), dim=-1)
        target = torch.tensor(ids[1:])
        nll += float(-logp[:-1].gather(1, target[:, None]).sum())
        tokens += len(ids) - 1
    return {"paragraphs": len(paras), "tokens": tokens, "nll": nll, "ppl": math.exp(nll / tokens),
            "ids": all_ids}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, help="folder with stories260k/ and tinystories-656k/")
    ap.add_argument("--text", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.manual_seed(0)
    paras = paragraphs(open(a.text, encoding="utf-8").read())
    out = {"text": os.path.basename(a.text), "transformers": transformers.__version__,
           "torch": torch.__version__, "models": {}}
    for name in MODELS:
        out["models"][name] = score(os.path.join(a.models, name), paras)
        r = out["models"][name]
        print(f"{name}: paragraphs {r['paragraphs']} tokens {r['tokens']} nll {r['nll']:.6f} "
              f"ppl {r['ppl']:.6f}")
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
