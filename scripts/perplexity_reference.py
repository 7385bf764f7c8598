#!/usr/bin/env python3
"""Independent reference for `lmx perplexity` (docs/quantization.md): a small pure-numpy Llama
forward pass that reads the safetensors checkpoint itself and scores a text with the same
protocol, in float64.

    perplexity_reference.py --model DIR --file TEXT --lmx build/bin/lmx
                            [--quantize dynamic_int8 [--quantize-group-size N]]

Prints {"paragraphs": P, "tokens": N, "nll": X, "ppl": exp(X / N)} like `lmx perplexity --json`.

Independent of LMX's forward code: only the token ids come from LMX (`lmx tokenize`), whose
tokenizer is tested against Hugging Face's elsewhere (tests/tokenizer). With --quantize the
weights are quantized here as docs/quantization.md specifies (symmetric int8 per output row or per
group of input columns, scale = max|w| / 127 in fp32, q = round-half-even(w / scale) clamped to
[-127, 127]) and the forward runs on q * scale. Llama-family models only (the two real models in
../shared/models); anything else is refused.
"""
import argparse
import json
import math
import re
import struct
import subprocess
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = data[b:end]
        if e["dtype"] == "F32":
            a = np.frombuffer(raw, "<f4")
        elif e["dtype"] == "F16":
            a = np.frombuffer(raw, "<f2").astype(np.float32)
        elif e["dtype"] == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            sys.exit(f"{path}: tensor {name} has dtype {e['dtype']}; the reference reads F32/F16/BF16")
        out[name] = a.reshape(e["shape"]).astype(np.float32)
    return out


def quantize(w, group):
    """dequant(quant(w)) as LMX stores it: w [out, in] fp32 -> q * s, fp32."""
    out_f, in_f = w.shape
    g = in_f if group is None else group
    if in_f % g:
        sys.exit(f"group size {g} does not divide {in_f}")
    wg = w.reshape(out_f, in_f // g, g)
    s = (np.abs(wg).max(axis=2, keepdims=True) / np.float32(127)).astype(np.float32)
    safe = np.where(s > 0, s, np.float32(1))
    q = np.clip(np.rint(wg / safe), -127, 127)  # np.rint: half to even; fp32 quotient like LMX
    q = np.where(s > 0, q, 0).astype(np.float32)
    return (q * s).reshape(out_f, in_f)


class Llama:
    def __init__(self, model_dir, quantize_linears, group):
        cfg = json.load(open(f"{model_dir}/config.json"))
        arch = (cfg.get("architectures") or ["?"])[0]
        if arch != "LlamaForCausalLM":
            sys.exit(f"{model_dir}: {arch}: the reference implements LlamaForCausalLM only")
        if cfg.get("rope_scaling") or (cfg.get("rope_parameters") or {}).get("rope_type", "default") != "default":
            sys.exit(f"{model_dir}: rope scaling is not implemented in the reference")
        self.H = cfg["hidden_size"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads", self.heads)
        self.hd = cfg.get("head_dim") or self.H // self.heads
        self.layers = cfg["num_hidden_layers"]
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        theta = cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0)
        self.inv_freq = 1.0 / (theta ** (np.arange(0, self.hd, 2, dtype=np.float64) / self.hd))
        self.context = cfg["max_position_embeddings"]
        t = read_safetensors(f"{model_dir}/model.safetensors")
        # Tied checkpoints may keep either side of the tie.
        embed = t.get("model.embed_tokens.weight", t.get("lm_head.weight"))
        head = t.get("lm_head.weight", embed) if not cfg.get("tie_word_embeddings", False) or "lm_head.weight" in t else embed
        q = (lambda w: quantize(w, group)) if quantize_linears else (lambda w: w)
        d = np.float64
        self.embed = embed.astype(d)  # stays full precision
        self.head = q(head).astype(d)
        self.final_norm = t["model.norm.weight"].astype(d)
        self.L = []
        for i in range(self.layers):
            p = f"model.layers.{i}."
            self.L.append({
                "in_norm": t[p + "input_layernorm.weight"].astype(d),
                "post_norm": t[p + "post_attention_layernorm.weight"].astype(d),
                "q": q(t[p + "self_attn.q_proj.weight"]).astype(d),
                "k": q(t[p + "self_attn.k_proj.weight"]).astype(d),
                "v": q(t[p + "self_attn.v_proj.weight"]).astype(d),
                "o": q(t[p + "self_attn.o_proj.weight"]).astype(d),
                "gate": q(t[p + "mlp.gate_proj.weight"]).astype(d),
                "up": q(t[p + "mlp.up_proj.weight"]).astype(d),
                "down": q(t[p + "mlp.down_proj.weight"]).astype(d),
            })

    def rms(self, x, w):
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x):  # x [T, heads, hd], Hugging Face's rotate_half convention
        T = x.shape[0]
        ang = np.arange(T, dtype=np.float64)[:, None] * self.inv_freq[None, :]
        cos = np.cos(np.concatenate([ang, ang], axis=-1))[:, None, :]
        sin = np.sin(np.concatenate([ang, ang], axis=-1))[:, None, :]
        half = self.hd // 2
        rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rot * sin

    def logits(self, ids):  # [T] -> [T, vocab], float64
        T = len(ids)
        x = self.embed[ids]
        mask = np.triu(np.full((T, T), -np.inf), 1)
        group = self.heads // self.kv_heads
        for L in self.L:
            h = self.rms(x, L["in_norm"])
            q = self.rope((h @ L["q"].T).reshape(T, self.heads, self.hd))
            k = self.rope((h @ L["k"].T).reshape(T, self.kv_heads, self.hd))
            v = (h @ L["v"].T).reshape(T, self.kv_heads, self.hd)
            k = np.repeat(k, group, axis=1)
            v = np.repeat(v, group, axis=1)
            s = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(self.hd) + mask
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            a = np.einsum("hqk,khd->qhd", s, v).reshape(T, self.heads * self.hd)
            x = x + a @ L["o"].T
            h = self.rms(x, L["post_norm"])
            g = h @ L["gate"].T
            x = x + ((g / (1 + np.exp(-g))) * (h @ L["up"].T)) @ L["down"].T
        return self.rms(x, self.final_norm) @ self.head.T


def paragraphs(text):
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def encode(lmx, model_dir, text):
    out = subprocess.run([lmx, "tokenize", "--model", model_dir, "--text", text],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["ids"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--file", required=True)
    ap.add_argument("--lmx", required=True, help="the lmx binary (for `lmx tokenize` only)")
    ap.add_argument("--quantize", choices=["none", "dynamic_int8"], default="none")
    ap.add_argument("--quantize-group-size", type=int)
    a = ap.parse_args()
    model = Llama(a.model, a.quantize == "dynamic_int8", a.quantize_group_size)
    paras = paragraphs(open(a.file, encoding="utf-8").read())
    nll, tokens = 0.0, 0
    for p in paras:
        ids = encode(a.lmx, a.model, p)[: model.context]
        if len(ids) < 2:
            continue
        z = model.logits(np.array(ids))
        m = z.max(axis=-1)
        lse = m + np.log(np.exp(z - m[:, None]).sum(axis=-1))
        nll += float(sum(lse[i] - z[i, ids[i + 1]] for i in range(len(ids) - 1)))
        tokens += len(ids) - 1
    print(json.dumps({"paragraphs": len(paras), "tokens": tokens, "nll": nll,
                      "ppl": math.exp(nll / tokens)}))


if __name__ == "__main__":
    main()
