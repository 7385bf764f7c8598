#!/usr/bin/env python3
"""Hugging Face transformers baseline on the device machine (eager generate, the way a user runs it).

Random-weight model of a named shape in fp16 on one GPU; reports prefill time for given prompt
lengths and decode time per step at given batch sizes (prompts of --context tokens), as JSON.
Run: python3 bench/hf_baseline.py --shape llama-2-7b --out $OUT/hf.json
"""
import argparse, json, time

import torch
import transformers

SHAPES = {
    "llama-2-7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=32, vocab_size=32000),
    "llama-3-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                       rope_theta=500000.0),
    "mistral-7b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, vocab_size=32000),
}


def timed(fn, repeat=3):
    times = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="llama-2-7b")
    ap.add_argument("--prefill", default="512,4096")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--out")
    a = ap.parse_args()

    cfg = transformers.LlamaConfig(max_position_embeddings=8192, **SHAPES[a.shape])
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(cfg).to(torch.float16).eval()
    model.generation_config.pad_token_id = 0
    res = {"shape": a.shape, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "transformers": transformers.__version__, "attn": "eager-default (sdpa)", "prefill_ms": {},
           "decode_ms_per_step": {}, "static_batch_output_tokens_per_s": {}}
    vocab = cfg.vocab_size
    with torch.no_grad():
        for n in map(int, a.prefill.split(",")):
            ids = torch.randint(3, vocab, (1, n), device="cuda")
            res["prefill_ms"][n] = 1e3 * timed(lambda: model(ids, use_cache=False))
        for b in map(int, a.batches.split(",")):
            ids = torch.randint(3, vocab, (b, a.context), device="cuda")
            gen = lambda k: model.generate(ids, max_new_tokens=k, min_new_tokens=k, do_sample=False)
            t1 = timed(lambda: gen(1), repeat=2)
            tn = timed(lambda: gen(a.new_tokens + 1), repeat=2)
            res["decode_ms_per_step"][b] = 1e3 * (tn - t1) / a.new_tokens
            res["static_batch_output_tokens_per_s"][b] = b * (a.new_tokens + 1) / tn
            print(json.dumps(res), flush=True)
    print(json.dumps(res, indent=1))
    if a.out:
        json.dump(res, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
