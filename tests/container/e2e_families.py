"""Every model family serves through lmx-server: one parity fixture per family (tiny random
weights, vocabulary of 256) behind a byte-level tokenizer written here (id i = byte i, no merges,
so the text "\\u0001" is the fixture's one-token prompt [1]). The greedy ids the server returns
(`details`) must equal transformers' for that prompt. The device comes from LMX_E2E_DEVICE (cpu
here and in CI; cuda on the GPU machine, where fp32 keeps greedy ids exact). On cpu each family
is also served split over tensor-parallel ranks (threads), and on cuda over 2 GPUs (NCCL) when
LMX_E2E_GPUS says the machine has 2 or more; /health must report the split. On cuda the server
runs its default option.max_replicas (as many copies as the GPUs hold: GPUs / degree), which
/health must report too. At every degree, six prompts streamed at once (spread over the replicas)
must each give the tokens that prompt gives alone."""
import argparse
import concurrent.futures
import json
import os
import shutil
import tempfile

from harness import Checks, Server, http

# One fixture per family (tests/fixtures/parity/).
# Degrees that split each fixture (heads, KV heads or their replication, MLP); Bloom's 6 heads at 3
# also pad its 256-row vocabulary.
DEGREES = {"llama_gqa_llama3_bias": 4, "bloom_6heads_bf16": 3}
FIXTURES = ["llama_gqa_llama3_bias", "mistral_sliding", "qwen2_bias_tied", "gpt2",
            "gptj_partial_rotary", "gpt_neox_parallel", "gpt_neo_mixed_local", "opt_post_ln_proj",
            "bloom_6heads_bf16"]


def byte_unicode():
    """GPT-2's byte -> printable character table (what ByteLevel pre-tokenizers map bytes to)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_tokenizer(d):
    table = byte_unicode()
    tok = {"version": "1.0", "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                             "use_regex": False},
           "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                       "use_regex": False},
           "model": {"type": "BPE", "vocab": {table[b]: b for b in range(256)}, "merges": [],
                     "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False}}
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast"}, f)


def serve_one(c, a, d, name, expected, case, overrides, replicas):
    degree = overrides["option.tensor_parallel_degree"]
    label = f"{name} at degree {degree}"
    with Server(a.server, a.plugin, d, overrides=overrides) as s:
        status, _, body = http("GET", s.url + "/health")
        health = json.loads(body) if status == 200 else {}
        c.check(status == 200, f"{label}: /health {status} {body[:200]!r}")
        split = health.get("tensor_parallel", {})
        c.check(split.get("degree") == degree, f"{label}: /health tensor_parallel {split}")
        count = health.get("replica_count", 1)  # absent: one engine
        c.check(count == replicas, f"{label}: /health replica_count {count}, want {replicas}")
        print(f"{label}: {expected['architecture']} path {health.get('path')}, "
              f"{split.get('heads_per_rank')} heads a rank, {count} replica(s)", flush=True)
        req = {"inputs": "\u0001", "parameters": {
            "max_new_tokens": len(case["greedy_ids"]), "do_sample": False,
            "ignore_eos": True, "details": True}}
        status, _, body = http("POST", s.url + "/invocations", json.dumps(req),
                               {"Content-Type": "application/json"})
        ok = status == 200
        ids = [t["id"] for t in json.loads(body)["details"]["tokens"]] if ok else None
        c.check(ok and ids == case["greedy_ids"],
                f"{label}: greedy ids {ids} != transformers' {case['greedy_ids']} "
                f"({status} {body[:200]!r})")
        concurrent_streams_match_alone(c, s, label)


# Prompts of different lengths and lengths of answer, so the batch changes shape as requests
# join and leave it.
CONCURRENT = [("\u0001", 12), ("ab", 5), ("hello world", 9), ("\u0002\u0003\u0004", 3),
              ("the cat sat", 11), ("x", 7)]


def greedy_request(prompt, new_tokens, stream):
    return json.dumps({"inputs": prompt, "stream": stream, "parameters": {
        "max_new_tokens": new_tokens, "do_sample": False, "ignore_eos": True, "details": True}})


def streamed_ids(url, prompt, new_tokens):
    """The token ids of one streamed greedy request (jsonlines), or the failure as a string."""
    status, _, body = http("POST", url + "/invocations", greedy_request(prompt, new_tokens, True),
                           {"Content-Type": "application/json"}, timeout=120)
    if status != 200:
        return f"{status} {body[:200]!r}"
    lines = [json.loads(x) for x in body.decode().splitlines() if x.strip()]
    return [x["token"]["id"] for x in lines if "token" in x]


def concurrent_streams_match_alone(c, s, label):
    """Each prompt's greedy ids, asked alone, then all prompts streamed at once: every stream's
    tokens equal its prompt's alone (the batch's other rows change nothing)."""
    alone = []
    for prompt, n in CONCURRENT:
        status, _, body = http("POST", s.url + "/invocations", greedy_request(prompt, n, False),
                               {"Content-Type": "application/json"})
        alone.append([t["id"] for t in json.loads(body)["details"]["tokens"]]
                     if status == 200 else f"{status} {body[:200]!r}")
    with concurrent.futures.ThreadPoolExecutor(len(CONCURRENT)) as pool:
        streams = list(pool.map(lambda pn: streamed_ids(s.url, *pn), CONCURRENT))
    for (prompt, n), one, streamed in zip(CONCURRENT, alone, streams):
        c.check(isinstance(one, list) and len(one) == n and streamed == one,
                f"{label}: {prompt!r} streamed beside {len(CONCURRENT) - 1} others gave "
                f"{streamed}, alone {one}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--plugin", required=True)
    p.add_argument("--fixtures", required=True)
    a = p.parse_args()
    device = os.environ.get("LMX_E2E_DEVICE", "cpu")
    c = Checks(f"e2e_families ({device})")
    for name in FIXTURES:
        src = os.path.abspath(os.path.join(a.fixtures, name))
        expected = json.load(open(os.path.join(src, "expected.json")))
        case = next(x for x in expected["cases"] if x["prompt_ids"] == [1])
        with tempfile.TemporaryDirectory() as d:
            for f in os.listdir(src):
                if f != "expected.json":
                    os.symlink(os.path.join(src, f), os.path.join(d, f))
            write_tokenizer(d)
            gpus = int(os.environ.get("LMX_E2E_GPUS", "1"))
            if device == "cpu":
                degrees = [1, DEGREES.get(name, 2)]
            else:
                degrees = [1, 2] if gpus >= 2 else [1]
            for degree in degrees:
                overrides = {"option.device": device, "option.dtype": "fp32",
                             "option.max_tokens": 64, "option.tensor_parallel_degree": degree}
                replicas = max(1, gpus // degree) if device == "cuda" else 1
                serve_one(c, a, d, name, expected, case, overrides, replicas)
    c.done()


if __name__ == "__main__":
    main()
