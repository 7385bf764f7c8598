#!/usr/bin/env python3
"""A Llama-shaped fp16 safetensors checkpoint whose tensor data are file holes: the real file
sizes, headers and index of a Hugging Face checkpoint, on no disk space and written in a second.
It loads like any checkpoint (every value reads as 0.0), so the loader's host memory and time can
be measured at sizes that do not fit the machine's disk (Llama-2-70B: 138 GB). Reading holes costs
no disk I/O: load times measured on it are the loader's own, not the disk's.

  lmx shapes --config llama-2-70b > cfg.json
  python3 scripts/make_sparse_checkpoint.py cfg.json OUTDIR [--shard-gib 5]
"""
import argparse
import json
import os
import struct
import sys


def llama_tensors(c):
    """(name, shape) of every tensor of a LlamaForCausalLM checkpoint, in file order."""
    H, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    heads = c["num_attention_heads"]
    kv = c.get("num_key_value_heads", heads)
    d = c.get("head_dim", H // heads)
    yield "model.embed_tokens.weight", [V, H]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        yield p + "input_layernorm.weight", [H]
        yield p + "self_attn.q_proj.weight", [heads * d, H]
        yield p + "self_attn.k_proj.weight", [kv * d, H]
        yield p + "self_attn.v_proj.weight", [kv * d, H]
        yield p + "self_attn.o_proj.weight", [H, heads * d]
        yield p + "post_attention_layernorm.weight", [H]
        yield p + "mlp.gate_proj.weight", [I, H]
        yield p + "mlp.up_proj.weight", [I, H]
        yield p + "mlp.down_proj.weight", [H, I]
    yield "model.norm.weight", [H]
    if not c.get("tie_word_embeddings", False):
        yield "lm_head.weight", [V, H]


def write_shard(path, tensors):
    """A safetensors file of F16 tensors whose data section is a hole."""
    header, offset = {}, 0
    for name, shape in tensors:
        n = 2
        for s in shape:
            n *= s
        header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # the data section 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        f.truncate(8 + len(blob) + offset)
    return offset


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", help="config.json of the shape (lmx shapes --config NAME)")
    ap.add_argument("out", help="model directory to write")
    ap.add_argument("--shard-gib", type=float, default=5.0, help="bytes a shard (default 5 GiB)")
    a = ap.parse_args()
    with open(a.config) as f:
        c = json.load(f)
    if c.get("architectures") != ["LlamaForCausalLM"]:
        sys.exit(f"{a.config}: architectures {c.get('architectures')}: only LlamaForCausalLM is written")
    c.pop("lmx_random_weights", None)  # the weights are these files
    c["torch_dtype"] = "float16"
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c, f, indent=1)
    limit = int(a.shard_gib * 2**30)
    shards, current, size = [], [], 0
    for name, shape in llama_tensors(c):
        n = 2
        for s in shape:
            n *= s
        if current and size + n > limit:
            shards.append(current)
            current, size = [], 0
        current.append((name, shape))
        size += n
    shards.append(current)
    weight_map, total = {}, 0
    for i, tensors in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        total += write_shard(os.path.join(a.out, file), tensors)
        weight_map.update({name: file for name, _ in tensors})
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    print(f"{a.out}: {len(weight_map)} tensors, {total / 1e9:.2f} GB in {len(shards)} sparse shards")


if __name__ == "__main__":
    main()
