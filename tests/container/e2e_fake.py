"""lmx-server over the fake-engine plugin (tests/plugin/fake_engine.cpp): the failures a real
model cannot be made to produce on demand. A model error before the first token is a 424; after
it, the stream ends with finish_reason "error"; a full queue is a 503 with Retry-After, counted in
/metrics (lmx_rejected_total{reason="queue_full"}); output_formatter=sse
streams SSE; stop sequences never leak; /ping reports a model that failed to load."""
import json
import subprocess
import threading
import time

from harness import Checks, Server, args_from_argv, http


def post(url, body):
    return http("POST", url + "/invocations", json.dumps(body),
                {"Content-Type": "application/json"})


def rejected(url, reason):
    _, _, body = http("GET", url + "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(f'lmx_rejected_total{{reason="{reason}"}} '):
            return float(line.split()[-1])
    return None


def main():
    a = args_from_argv()
    c = Checks("e2e_fake")
    with Server(a.server, a.plugin, a.model_dir, overrides={"job_queue_size": 2}) as s:
        st, _, body = post(s.url, {"inputs": "FAIL_NOW"})
        c.check(st == 424 and b"fake model failure" in body, f"424 {st} {body}")
        st, _, body = post(s.url, {"inputs": "FAIL_NOW", "stream": True})
        c.check(st == 424, f"stream error before first chunk {st} {body}")
        st, h, body = post(s.url, {"inputs": "FAIL_LATER", "stream": True})
        lines = [json.loads(x) for x in body.decode().splitlines() if x]
        c.check(st == 200 and lines[-1]["details"]["finish_reason"] == "error" and
                lines[-1]["error"], f"error after first chunk {st} {body}")
        st, _, body = post(s.url, {"inputs": "x", "parameters": {"stop_sequences": [" t3"],
                                                                 "max_new_tokens": 9}})
        c.check(st == 200 and json.loads(body)["generated_text"] == " t0 t1 t2", f"stop {body}")
        st, _, body = post(s.url, {"inputs": "x", "stream": True,
                                   "parameters": {"stop_sequences": [" t3"], "max_new_tokens": 9}})
        text = "".join(json.loads(x).get("token", {}).get("text") or ""
                       for x in body.decode().splitlines() if x)
        c.check(text == " t0 t1 t2", f"stop in stream {text!r}")

        # Queue full: 2 slow requests hold the queue, a third gets 503 (and so does a list, a
        # stream and an OpenAI request), each with Retry-After and counted in /metrics.
        c.check(rejected(s.url, "queue_full") == 0, "no rejection counted before")
        results = []
        threads = [threading.Thread(target=lambda: results.append(
            post(s.url, {"inputs": "SLOW", "parameters": {"max_new_tokens": 20}})[0]))
            for _ in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        st, h, body = post(s.url, {"inputs": "x"})
        c.check(st == 503 and b"queue" in body, f"queue full {st} {body}")
        c.check(h.get("Retry-After") == "1", f"queue full: Retry-After {h}")
        c.check(json.loads(body).get("code") == 503, f"queue full: JSON error body {body}")
        st, h, body = post(s.url, {"inputs": "x", "stream": True})
        c.check(st == 503 and h.get("Retry-After") == "1", f"stream, queue full {st} {h} {body}")
        st, h, body = http("POST", s.url + "/v1/completions", json.dumps({"prompt": "x"}),
                           {"Content-Type": "application/json"})
        c.check(st == 503 and h.get("Retry-After") == "1", f"openai, queue full {st} {h} {body}")
        c.check(rejected(s.url, "queue_full") == 3,
                f"3 rejections counted, not {rejected(s.url, 'queue_full')}")
        for t in threads:
            t.join()
        c.check(results == [200, 200], f"slow ones answered {results}")

    with Server(a.server, a.plugin, a.model_dir,
                overrides={"option.output_formatter": "sse"}) as s:
        st, h, body = post(s.url, {"inputs": "x", "stream": True,
                                   "parameters": {"max_new_tokens": 3}})
        events = [json.loads(x[6:]) for x in body.decode().split("\n\n") if x.startswith("data: ")]
        c.check(st == 200 and "text/event-stream" in h.get("Content-Type", "") and
                len(events) == 3 and events[-1]["generated_text"] == " t0 t1 t2", f"sse {body}")

    # A model that cannot load: /ping says failed (503), generation 503, SIGTERM still clean.
    s = Server(a.server, a.plugin, "/nonexistent/model-dir")
    deadline = time.time() + 20
    st, body = 0, b""
    while time.time() < deadline:
        try:
            st, _, body = http("GET", s.url + "/ping")
            if st == 503 and b"failed" in body:
                break
        except OSError:
            pass
        time.sleep(0.1)
    c.check(st == 503 and json.loads(body)["state"] == "failed", f"failed model ping {st} {body}")
    st, h, body = post(s.url, {"inputs": "x"})
    c.check(st == 503 and json.loads(body)["state"] == "failed", f"generate on failed {st} {body}")
    c.check(h.get("Retry-After") == "1", f"503 of a failed model: Retry-After {h}")
    c.check(rejected(s.url, "not_ready") == 1, "the refusal counted as not_ready")
    s.stop()
    c.done()


if __name__ == "__main__":
    main()
