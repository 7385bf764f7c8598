"""A bounded load run: 200 requests at 16 concurrency over keep-alive connections, mixing
/invocations (plain and streamed) and /v1/completions; every answer must be well-formed and the
server must stay up. Prints the throughput."""
import concurrent.futures
import http.client
import json
import threading
import time

from harness import Checks, Server, args_from_argv

TOTAL, CONCURRENCY = 200, 16
local = threading.local()


def conn(port):
    if getattr(local, "c", None) is None:
        local.c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    return local.c


def one(port, i):
    kind = i % 4
    if kind == 3:
        path, body = "/v1/completions", {"prompt": f"Story {i}: once", "max_tokens": 8,
                                         "temperature": 0.7, "seed": i}
    else:
        body = {"inputs": f"Story {i}: once upon a time",
                "parameters": {"max_new_tokens": 8, "do_sample": i % 2 == 0, "seed": i}}
        if kind == 2:
            body["stream"] = True
        path = "/invocations"
    for attempt in range(2):
        c = conn(port)
        try:
            c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read().decode()
            break
        except (ConnectionError, http.client.HTTPException):
            local.c = None  # server closed an idle keep-alive connection: reconnect once
            if attempt:
                raise
    if r.status != 200:
        return f"{path} -> {r.status} {data[:200]}"
    if kind == 3:
        j = json.loads(data)
        ok = j["choices"][0]["finish_reason"] in ("length", "stop")
    elif kind == 2:
        lines = [json.loads(x) for x in data.splitlines() if x]
        ok = lines and "generated_text" in lines[-1] and \
            "".join(x["token"]["text"] for x in lines if "token" in x) == lines[-1]["generated_text"]
    else:
        ok = isinstance(json.loads(data)["generated_text"], str)
    return None if ok else f"{path} malformed: {data[:200]}"


def main():
    a = args_from_argv()
    c = Checks("e2e_load")
    with Server(a.server, a.plugin, a.model_dir) as s:
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as ex:
            results = list(ex.map(lambda i: one(s.port, i), range(TOTAL)))
        dt = time.time() - t0
        errors = [r for r in results if r]
        for e in errors[:5]:
            print("error:", e)
        c.check(not errors, f"{len(errors)} of {TOTAL} requests failed")
        print(f"{TOTAL} requests at concurrency {CONCURRENCY}: {dt:.1f} s, {TOTAL / dt:.1f} req/s")
        hc = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        hc.request("GET", "/ping")
        c.check(hc.getresponse().status == 200, "server up after the load run")
        hc.close()
        hc = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        hc.request("GET", "/metrics")
        m = hc.getresponse().read().decode()
        served = sum(int(float(line.split()[-1])) for line in m.splitlines()
                     if line.startswith("lmx_requests_total") and 'code="200"' in line and
                     ("invocations" in line or "completions" in line))
        c.check(served >= TOTAL, f"metrics count {served} successful generations")
    c.done()


if __name__ == "__main__":
    main()
