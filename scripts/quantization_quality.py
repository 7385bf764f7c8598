#!/usr/bin/env python3
"""The quality figures of docs/quantization.md, on the CPU reference (fp32 activations):

    scripts/quantization_quality.py [--lmx build/bin/lmx] [--models ../shared/models]
                                    [--text tests/fixtures/perplexity/text.txt] [--new-tokens 128]
                                    [--agreement-on cuda --dtype fp16|bf16]

For each real model: `lmx perplexity` in fp32, dynamic_int8 per channel and dynamic_int8 grouped
(128 where every projection's input size allows, else the largest power of two that divides them
all, printed), smoothquant (W8A8) with the searched alpha (the alphas chosen per layer, from the
log) and with each fixed alpha of the grid 0.3..0.9, and the greedy agreement of each int8
variant with fp32: for prompts made of the first four words of each paragraph, `lmx generate
--greedy --ignore-eos` for --new-tokens tokens, counting the tokens generated before the first
one that differs. Prints Markdown tables. smoothquant's calibration cache goes to a temporary
LMX_CACHE_DIR (so the figures are those of a fresh calibration).

--agreement-on cuda --dtype D: only the greedy agreement, on the GPU with D activations, of
dynamic_int8, smoothquant (searched alpha) and fp8 with the unquantized model in D (the issues'
"greedy agreement with fp16 over 128 tokens").
"""
import argparse
import json
import math
import os
import re
import subprocess
import tempfile

GRID = ["0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"]


def run_json(cmd):
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def group_for(model_dir):
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    ins = [cfg["hidden_size"], heads * head_dim, cfg["intermediate_size"]]
    g = 0
    for n in ins:
        g = math.gcd(g, n)
    best = 4
    while best * 2 <= min(g, 128) and g % (best * 2) == 0:
        best *= 2
    return best if g % best == 0 else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lmx", default="build/bin/lmx")
    ap.add_argument("--models", default="../shared/models")
    ap.add_argument("--text", default="tests/fixtures/perplexity/text.txt")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--agreement-on", choices=["cuda"], help="only the greedy agreement, on the GPU")
    ap.add_argument("--dtype", choices=["fp16", "bf16", "fp32"], default="fp16")
    a = ap.parse_args()
    text = open(a.text, encoding="utf-8").read()
    prompts = [" ".join(p.split()[:4]) for p in re.split(r"\n\s*\n", text) if len(p.split()) >= 4]
    os.environ["LMX_CACHE_DIR"] = tempfile.mkdtemp(prefix="lmx-quality-")
    if a.agreement_on:
        return agreement_on_gpu(a, prompts)
    ppl_rows, sq_rows, agree_rows = [], [], []
    for name in ("stories260k", "tinystories-656k"):
        model = os.path.join(a.models, name)
        group = group_for(model)
        variants = [("fp32", []), ("dynamic_int8", ["--quantize", "dynamic_int8"])]
        if group:
            variants.append((f"dynamic_int8, group {group}",
                             ["--quantize", "dynamic_int8", "--quantize-group-size", str(group)]))
        variants.append(("smoothquant", ["--quantize", "smoothquant"]))
        variants += [(f"smoothquant, alpha {x}", ["--quantize", "smoothquant", "--smoothquant-alpha", x])
                     for x in GRID]
        ppl = {}
        for label, flags in variants:
            ppl[label] = run_json([a.lmx, "perplexity", "--model", model, "--file", a.text, "--json"] + flags)
        base = ppl["fp32"]["ppl"]

        def cell(label):
            return f"{ppl[label]['ppl']:.4f} ({100 * (ppl[label]['ppl'] / base - 1):+.2f}%)"

        int8 = [l for l, _ in variants[1:] if l.startswith("dynamic_int8")]
        ppl_rows.append(f"| {name} | {ppl['fp32']['tokens']} | {base:.4f} | "
                        + " | ".join(cell(l) + (l[l.index(","):] if "," in l else "") for l in int8)
                        + " |")
        log = subprocess.run([a.lmx, "perplexity", "--model", model, "--file", a.text, "--json",
                              "--quantize", "smoothquant", "--verbose"],
                             check=True, capture_output=True, text=True)
        log = log.stdout + log.stderr  # spdlog writes to stdout
        alphas = re.search(r"alpha per layer \(searched\): ([0-9. ]+);", log).group(1)
        best = min(GRID, key=lambda x: ppl[f"smoothquant, alpha {x}"]["ppl"])
        sq_rows.append(f"| {name} | {base:.4f} | {cell('smoothquant')} | {alphas} | "
                       + " | ".join(cell(f"smoothquant, alpha {x}") for x in GRID)
                       + f" | {best} |")
        variants = [v for v in variants
                    if not v[0].startswith("smoothquant, alpha") or v[0] in ("smoothquant, alpha 0.5",
                                                                               "smoothquant, alpha 0.8")]

        agree_rows += agreement_rows(a, name, model, prompts, variants[1:], [])
    print("| model | predicted tokens | fp32 | dynamic_int8 (per channel) | dynamic_int8 (grouped) |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(ppl_rows))
    print()
    print("| model | fp32 | smoothquant, searched alpha | alphas chosen (layer 0, 1, ...) | "
          + " | ".join(f"alpha {x}" for x in GRID) + " | best fixed |")
    print("| --- " * (5 + len(GRID)) + "|")
    print("\n".join(sq_rows))
    print()
    print_agreement(a, agree_rows)


def agreement_rows(a, name, model, prompts, variants, common):
    """One table row per variant: its greedy tokens against the reference's (`common` flags,
    unquantized), counting the tokens generated before the first that differs."""
    def generate(flags, prompt):
        return run_json([a.lmx, "generate", "--model", model, "--prompt", prompt, "--greedy",
                         "--ignore-eos", "--max-new-tokens", str(a.new_tokens), "--json"]
                        + common + flags)["token_ids"]

    reference = {p: generate([], p) for p in prompts}
    rows = []
    for label, flags in variants:
        prefix, full = [], 0
        for p in prompts:
            got = generate(flags, p)
            n = next((i for i, (x, y) in enumerate(zip(got, reference[p])) if x != y), len(got))
            prefix.append(n)
            full += n == len(got)
        rows.append(f"| {name} | {label} | {sum(prefix)} / {len(prompts) * a.new_tokens} "
                    f"({100 * sum(prefix) / (len(prompts) * a.new_tokens):.1f}%) | "
                    f"{full} / {len(prompts)} | {', '.join(map(str, prefix))} |")
    return rows


def print_agreement(a, rows):
    print(f"| model | variant | tokens before the first difference (of {a.new_tokens} a prompt) "
          "| prompts identical to the end | first difference, per prompt |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(rows))


def agreement_on_gpu(a, prompts):
    common = ["--device", a.agreement_on, "--dtype", a.dtype]
    variants = [("dynamic_int8", ["--quantize", "dynamic_int8"]),
                ("smoothquant (searched alpha)", ["--quantize", "smoothquant"]),
                ("fp8", ["--quantize", "fp8"])]
    rows = []
    for name in ("stories260k", "tinystories-656k"):
        rows += agreement_rows(a, name, os.path.join(a.models, name), prompts, variants, common)
    print(f"Greedy agreement with the unquantized model, {a.agreement_on} {a.dtype}:")
    print_agreement(a, rows)


if __name__ == "__main__":
    main()
