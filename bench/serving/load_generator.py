#!/usr/bin/env python3
"""Serving load generator for lmx-server (Python 3 standard library only).

Drives POST /invocations with N concurrent streaming clients (closed loop: each client sends its
next request when the previous answer has ended) over a fixed workload: R requests, prompts of
about P tokens, max_new_tokens M, greedy, ignore_eos (every request generates exactly M tokens).
Every streamed answer is checked (JSON lines, one token per line, final line with generated_text
and details, token texts concatenate to generated_text, generated_tokens == M, no error).

Reports output tokens/s, requests/s, TTFT p50/p99 (request sent -> first token line) and TPOT
p50/p99 (per request: (last token - first token) / (tokens - 1)) as JSON (--out) and a table.

Clients are threads with one keep-alive connection each, spread over --procs processes so that
the GIL does not serialize the reading of 128 streams (timestamps are taken as each line is read).

  python3 bench/serving/load_generator.py --url http://127.0.0.1:8080 \\
      --requests 256 --concurrency 128 --prompt-tokens 512 --max-new-tokens 128 --out a.json
"""

import argparse
import http.client
import json
import multiprocessing as mp
import pathlib
import random
import sys
import threading
import time
import urllib.parse

# Prompts are random sequences of the words in prompt_words.txt (one Llama-2 token each).
WORDS = [
    w
    for line in (pathlib.Path(__file__).with_name("prompt_words.txt")).read_text().splitlines()
    if not line.startswith("#")
    for w in line.split()
]


def make_prompt(n_words, seed):
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def percentile(values, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    v = sorted(values)
    pos = (len(v) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def summary(values):
    if not values:
        return {"p50": None, "p90": None, "p99": None, "mean": None, "max": None}
    return {
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "mean": sum(values) / len(values),
        "max": max(values),
    }


class Client:
    def __init__(self, url, timeout):
        u = urllib.parse.urlparse(url)
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or 80
        self.timeout = timeout
        self.conn = None

    def _connect(self):
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def get(self, path):
        if self.conn is None:
            self._connect()
        try:
            self.conn.request("GET", path)
            r = self.conn.getresponse()
            return r.status, r.read().decode("utf-8", "replace")
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = None
            raise

    def stream(self, prompt, max_new_tokens, expect_tokens):
        """One streamed request. Returns a record dict (error set when anything was wrong)."""
        body = json.dumps(
            {
                "inputs": prompt,
                "parameters": {"max_new_tokens": max_new_tokens, "do_sample": False, "ignore_eos": True},
                "stream": True,
            }
        ).encode()
        rec = {"error": None, "ttft": None, "tpot": None, "tokens": 0, "prompt_tokens": None}
        if self.conn is None:
            self._connect()
        t0 = time.perf_counter()
        rec["start_wall"] = time.time()
        token_times = []
        texts = []
        final = None
        try:
            self.conn.request(
                "POST", "/invocations", body=body, headers={"Content-Type": "application/json"}
            )
            r = self.conn.getresponse()
            if r.status != 200:
                rec["error"] = "HTTP %d: %s" % (r.status, r.read()[:300].decode("utf-8", "replace"))
                if r.getheader("connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return self._end(rec, t0)
            ctype = r.getheader("content-type", "")
            if "jsonlines" not in ctype:
                rec["error"] = "unexpected content type %r" % ctype
            while True:
                line = r.readline()
                if not line:
                    break
                now = time.perf_counter()
                line = line.strip()
                if not line:
                    continue
                obj = json.loads(line)
                if "token" in obj:
                    tok = obj["token"]
                    if not isinstance(tok, dict) or "text" not in tok:
                        raise ValueError("malformed token object: %r" % (tok,))
                    texts.append(tok.get("text") or "")
                    if tok.get("id") is not None:
                        token_times.append(now)
                if "generated_text" in obj:
                    if final is not None:
                        raise ValueError("two final lines")
                    final = obj
        except (OSError, http.client.HTTPException, ValueError) as e:
            rec["error"] = "%s: %s" % (type(e).__name__, e)
            try:
                self.conn.close()
            finally:
                self.conn = None
            return self._end(rec, t0)
        n = len(token_times)
        rec["tokens"] = n
        if n:
            rec["ttft"] = token_times[0] - t0
        if n > 1:
            rec["tpot"] = (token_times[-1] - token_times[0]) / (n - 1)
        if rec["error"] is None:
            rec["error"] = check_final(final, texts, n, expect_tokens)
        if final is not None:
            rec["prompt_tokens"] = (final.get("details") or {}).get("prompt_tokens")
        return self._end(rec, t0)

    @staticmethod
    def _end(rec, t0):
        rec["latency"] = time.perf_counter() - t0
        rec["end_wall"] = rec["start_wall"] + rec["latency"]
        return rec


def check_final(final, texts, n_tokens, expect_tokens):
    if final is None:
        return "stream ended without a final line (generated_text)"
    if "error" in final:
        return "engine error: %s" % final["error"]
    d = final.get("details")
    if not isinstance(d, dict):
        return "final line without details"
    if d.get("finish_reason") != "length":
        return "finish_reason %r (expected 'length' with ignore_eos)" % d.get("finish_reason")
    if d.get("generated_tokens") != n_tokens:
        return "details.generated_tokens %r != %d token lines" % (d.get("generated_tokens"), n_tokens)
    if expect_tokens is not None and n_tokens != expect_tokens:
        return "%d tokens, expected %d" % (n_tokens, expect_tokens)
    if "".join(texts) != final.get("generated_text"):
        return "token texts do not concatenate to generated_text"
    return None


def worker_proc(args, jobs, out_q):
    """One process: len(jobs) requests over its share of client threads."""
    jobs = list(jobs)
    lock = threading.Lock()
    results = []

    def client_thread():
        c = Client(args.url, args.timeout)
        while True:
            with lock:
                if not jobs:
                    return
                idx, prompt = jobs.pop(0)
            rec = c.stream(prompt, args.max_new_tokens, args.max_new_tokens)
            rec["index"] = idx
            with lock:
                results.append(rec)

    threads = [threading.Thread(target=client_thread, daemon=True) for _ in range(args._threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out_q.put(results)


def run_phase(args, prompts, concurrency):
    """Runs all prompts with `concurrency` clients over up to args.procs processes."""
    procs = max(1, min(args.procs, concurrency))
    per = [concurrency // procs + (1 if i < concurrency % procs else 0) for i in range(procs)]
    # Requests are dealt to processes in proportion to their clients (round robin by client).
    shares = [[] for _ in range(procs)]
    slot_owner = [p for p in range(procs) for _ in range(per[p])]
    for i, pr in enumerate(prompts):
        shares[slot_owner[i % len(slot_owner)]].append((i, pr))
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    ps = []
    for p in range(procs):
        a = argparse.Namespace(**vars(args))
        a._threads = per[p]
        ps.append(ctx.Process(target=worker_proc, args=(a, shares[p], q)))
    t0 = time.time()
    for p in ps:
        p.start()
    results = []
    for _ in ps:
        results.extend(q.get())
    for p in ps:
        p.join()
    t1 = time.time()
    return results, t0, t1


def calibrate(args):
    """Finds the word count whose prompts the server counts as ~P tokens (details.prompt_tokens)."""
    c = Client(args.url, args.timeout)
    n_words = max(1, args.prompt_tokens - 1)  # guess: one token per word plus BOS
    measured = None
    for _ in range(4):
        counts = []
        for s in range(3):
            rec = c.stream(make_prompt(n_words, 10_000 + s), 1, None)
            if rec["error"] or rec["prompt_tokens"] is None:
                raise SystemExit("calibration request failed: %s" % rec["error"])
            counts.append(rec["prompt_tokens"])
        measured = sum(counts) / len(counts)
        if abs(measured - args.prompt_tokens) <= 1:
            break
        n_words = max(1, round(n_words * (args.prompt_tokens - 1) / max(1.0, measured - 1)))
    return n_words, measured


def wait_ready(args):
    deadline = time.time() + args.wait
    last = None
    while time.time() < deadline:
        try:
            st, body = Client(args.url, 5).get("/ping")
            if st == 200:
                return
            last = body
            if '"failed"' in body:
                raise SystemExit("server failed to load: %s" % body)
        except (OSError, http.client.HTTPException) as e:
            last = str(e)
        time.sleep(0.5)
    raise SystemExit("server not ready after %ds: %s" % (args.wait, last))


def fmt(v, scale=1.0, digits=1):
    return "-" if v is None else ("%.*f" % (digits, v * scale))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=-1,
                    help="warm-up requests before measuring (default: concurrency: fills every batch size, so CUDA graphs are captured before), same shape")
    ap.add_argument("--procs", type=int, default=0, help="client processes (default: min(8, cores))")
    ap.add_argument("--timeout", type=float, default=600.0, help="socket timeout per request, s")
    ap.add_argument("--wait", type=float, default=300.0, help="seconds to wait for /ping")
    ap.add_argument("--label", default="")
    ap.add_argument("--out", help="write the JSON result here")
    args = ap.parse_args()
    if args.procs <= 0:
        args.procs = max(1, min(8, mp.cpu_count()))

    wait_ready(args)
    n_words, measured = calibrate(args)
    print("prompt: %d words -> %.1f tokens (server count, target %d)" % (n_words, measured, args.prompt_tokens),
          file=sys.stderr)

    warmup = args.concurrency if args.warmup < 0 else args.warmup
    if warmup:
        wres, _, _ = run_phase(args, [make_prompt(n_words, 20_000 + i) for i in range(warmup)], args.concurrency)
        werr = [r["error"] for r in wres if r["error"]]
        if werr:
            print("warm-up errors (%d): %s" % (len(werr), werr[0]), file=sys.stderr)

    prompts = [make_prompt(n_words, i) for i in range(args.requests)]
    results, t0, t1 = run_phase(args, prompts, args.concurrency)
    ok = [r for r in results if r["error"] is None]
    errors = [r for r in results if r["error"] is not None]
    # Duration: first request sent -> last answer ended (the run's wall time, process start-up excluded).
    start = min(r["start_wall"] for r in results)
    end = max(r["end_wall"] for r in results)
    duration = end - start
    out_tokens = sum(r["tokens"] for r in ok)
    ptoks = [r["prompt_tokens"] for r in ok if r["prompt_tokens"] is not None]
    res = {
        "tool": "load_generator.py",
        "target": "http",
        "label": args.label,
        "url": args.url,
        "workload": {
            "requests": args.requests,
            "concurrency": args.concurrency,
            "prompt_tokens": args.prompt_tokens,
            "max_new_tokens": args.max_new_tokens,
            "greedy": True,
            "ignore_eos": True,
            "warmup_requests": warmup,
            "client_processes": min(args.procs, args.concurrency),
        },
        "prompt_tokens_measured": {
            "min": min(ptoks) if ptoks else None,
            "mean": (sum(ptoks) / len(ptoks)) if ptoks else None,
            "max": max(ptoks) if ptoks else None,
        },
        "completed": len(ok),
        "errors": len(errors),
        "error_samples": sorted({r["error"] for r in errors})[:5],
        "duration_s": duration,
        "harness_wall_s": t1 - t0,
        "output_tokens": out_tokens,
        "output_tokens_per_s": out_tokens / duration if duration > 0 else None,
        "total_tokens_per_s": (out_tokens + sum(ptoks)) / duration if duration > 0 else None,
        "requests_per_s": len(ok) / duration if duration > 0 else None,
        "ttft_ms": {k: (v * 1e3 if v is not None else None) for k, v in summary([r["ttft"] for r in ok]).items()},
        "tpot_ms": {k: (v * 1e3 if v is not None else None) for k, v in summary([r["tpot"] for r in ok if r["tpot"] is not None]).items()},
        "latency_s": summary([r["latency"] for r in ok]),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=2)
    print_table(res)
    return 0 if not errors else 1


def print_table(res):
    w = res["workload"]
    print("%s %s: %d req, %d conc, prompt %s tok, %d new tok" % (
        res["target"], res["label"], w["requests"], w["concurrency"],
        fmt(res["prompt_tokens_measured"]["mean"]), w["max_new_tokens"]))
    print("  %-22s %s" % ("completed / errors", "%d / %d" % (res["completed"], res["errors"])))
    print("  %-22s %s s" % ("duration", fmt(res["duration_s"], digits=2)))
    print("  %-22s %s" % ("output tokens/s", fmt(res["output_tokens_per_s"])))
    print("  %-22s %s" % ("requests/s", fmt(res["requests_per_s"], digits=2)))
    print("  %-22s p50 %s  p99 %s ms" % ("TTFT", fmt(res["ttft_ms"]["p50"]), fmt(res["ttft_ms"]["p99"])))
    print("  %-22s p50 %s  p99 %s ms" % ("TPOT", fmt(res["tpot_ms"]["p50"], digits=2), fmt(res["tpot_ms"]["p99"], digits=2)))
    for e in res["error_samples"]:
        print("  error: %s" % e)


if __name__ == "__main__":
    sys.exit(main())
