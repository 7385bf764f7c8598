#!/usr/bin/env python3
"""`lmx perplexity` against scripts/perplexity_reference.py (an independent numpy forward pass) on
the two real models in ../shared/models and the project's text: fp32 and dynamic_int8 (per
channel and grouped) agree to 1e-4 relative in nll, with the same paragraph and token counts;
bad inputs end with one clear error line."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

REL = 1e-4
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def lmx_json(args, model, extra):
    r = run([args.lmx, "perplexity", "--model", model, "--file", args.text, "--json"] + extra)
    if r.returncode != 0:
        failures.append(f"lmx perplexity {model} {extra}: {r.stderr.strip()}")
        return None
    return json.loads(r.stdout)


def reference(args, model, extra):
    r = run([sys.executable, args.reference, "--model", model, "--file", args.text, "--lmx", args.lmx]
            + extra)
    if r.returncode != 0:
        failures.append(f"reference {model} {extra}: {r.stderr.strip()}")
        return None
    return json.loads(r.stdout)


def expect_error(args, cmd, needle, what):
    r = run([args.lmx] + cmd)
    lines = r.stderr.strip().splitlines()
    # Case-insensitive: "--device cuda: ..." without CUDA in the build, "no CUDA GPU ..." without a
    # GPU, the backend's own refusal with one; each names it.
    ok = r.returncode != 0 and lines and needle.lower() in lines[-1].lower() and "error" in lines[-1]
    check(ok, f"{what}: rc {r.returncode}, stderr {r.stderr.strip()!r} (wanted {needle!r})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lmx", required=True)
    ap.add_argument("--reference", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--expected", help="transformers' figures (scripts/make_perplexity_fixture.py)")
    args = ap.parse_args()

    # Transformers' fp32 figure, once made on the GPU machine: the issue's 1e-4 relative.
    if args.expected and os.path.exists(args.expected):
        expected = json.load(open(args.expected))["models"]
        for name, want in expected.items():
            got = lmx_json(args, os.path.join(args.models, name), [])
            if got is None:
                continue
            rel = abs(got["nll"] - want["nll"]) / abs(want["nll"])
            print(f"{name} vs transformers: lmx nll {got['nll']} transformers {want['nll']} (rel {rel:.2e})")
            check(got["tokens"] == want["tokens"], f"{name}: {got['tokens']} tokens vs transformers' {want['tokens']}")
            check(rel <= REL, f"{name}: nll {got['nll']} vs transformers' {want['nll']} (rel {rel:.2e})")
    else:
        print("no transformers fixture yet (scripts/make_perplexity_fixture.py runs on the GPU machine)")

    # Group sizes: 128 where every projection's input size allows it (tinystories-656k: 128,
    # 384); stories260k's down projection has 172 inputs, so its largest power-of-two group is 4.
    groups = {"stories260k": "4", "tinystories-656k": "128"}
    for name, group in groups.items():
        model = os.path.join(args.models, name)
        for extra in ([], ["--quantize", "dynamic_int8"],
                      ["--quantize", "dynamic_int8", "--quantize-group-size", group]):
            got, want = lmx_json(args, model, extra), reference(args, model, extra)
            if got is None or want is None:
                continue
            print(f"{name} {' '.join(extra) or 'fp32'}: lmx {got} reference {want}")
            check(list(got) == ["paragraphs", "tokens", "nll", "ppl"], f"key order {list(got)}")
            check(got["paragraphs"] == want["paragraphs"] and got["tokens"] == want["tokens"],
                  f"{name} {extra}: counts {got} vs {want}")
            rel = abs(got["nll"] - want["nll"]) / abs(want["nll"])
            check(rel <= REL, f"{name} {extra}: nll {got['nll']} vs {want['nll']} (rel {rel:.2e})")

    small = os.path.join(args.models, "stories260k")
    text = ["--file", args.text]
    expect_error(args, ["perplexity", "--model", small, "--file", "/nonexistent/text.txt"],
                 "cannot read --file /nonexistent/text.txt", "missing file")
    expect_error(args, ["perplexity", "--model", small] + text + ["--quantize", "int4"],
                 "--quantize must be dynamic_int8, smoothquant, fp8 or none, got 'int4'", "unknown method")
    expect_error(args, ["perplexity", "--model", small] + text + ["--quantize", "dynamic_int8",
                 "--quantize-group-size", "128"],
                 "layer 0 qkv (model.layers.0.self_attn.q_proj.weight, weight [128, 64]): "
                 "quantization group size 128 does not divide its 64 input columns",
                 "group that does not divide")
    expect_error(args, ["perplexity", "--model", small] + text + ["--quantize", "dynamic_int8",
                 "--quantize-group-size", "48"], "quantization group size 48 is not a power of two",
                 "group not a power of two")
    expect_error(args, ["perplexity", "--model", small] + text + ["--quantize-group-size", "4"],
                 "--quantize-group-size applies to --quantize dynamic_int8", "group without method")
    with tempfile.TemporaryDirectory() as tmp:
        empty = os.path.join(tmp, "empty.txt")
        with open(empty, "w") as f:
            f.write("\n  \n\t\n")
        expect_error(args, ["perplexity", "--model", small, "--file", empty],
                     "holds no text (only whitespace)", "empty text")
        bare = os.path.join(tmp, "no_tokenizer")
        os.mkdir(bare)
        for f in ("config.json", "model.safetensors"):
            os.symlink(os.path.join(small, f), os.path.join(bare, f))
        expect_error(args, ["perplexity", "--model", bare] + text,
                     "perplexity encodes text with the model's tokenizer", "no tokenizer")
        quantized = os.path.join(tmp, "quantized")
        shutil.copytree(small, quantized, symlinks=True)
        cfg = json.load(open(os.path.join(quantized, "config.json")))
        cfg["quantization_config"] = {"quant_method": "gptq", "bits": 4}
        json.dump(cfg, open(os.path.join(quantized, "config.json"), "w"))
        expect_error(args, ["perplexity", "--model", quantized] + text + ["--quantize", "dynamic_int8"],
                     "already quantized (quantization_config.quant_method = 'gptq')",
                     "already-quantized checkpoint")
    # --device cuda: on a machine with a GPU, fp32 on the GPU gives the CPU's figures (1e-4
    # relative, plain and dynamic_int8); without one (CI), or in a build without the CUDA backend,
    # a clear error that names it.
    gpu = shutil.which("nvidia-smi") and run(["nvidia-smi", "-L"]).returncode == 0
    if gpu:
        for extra in ([], ["--quantize", "dynamic_int8"]):
            cpu = lmx_json(args, small, extra)
            cuda = lmx_json(args, small, extra + ["--device", "cuda", "--dtype", "fp32"])
            if cpu is None or cuda is None:
                continue
            print(f"stories260k {' '.join(extra) or 'fp32'} on the GPU: {cuda} (CPU {cpu})")
            rel = abs(cuda["nll"] - cpu["nll"]) / abs(cpu["nll"])
            check(cuda["tokens"] == cpu["tokens"] and rel <= REL,
                  f"--device cuda {extra}: {cuda} vs the CPU's {cpu} (rel {rel:.2e})")
    else:
        expect_error(args, ["perplexity", "--model", small] + text + ["--device", "cuda"], "cuda",
                     "device cuda")
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("perplexity: all checks passed")


if __name__ == "__main__":
    main()
