"""A client that disconnects mid-stream cancels its generation (100 at once: the KV blocks in use
return to their idle value); SIGTERM drains in-flight requests (they finish completely) and the
server exits 0; a load that hangs past option.model_loading_timeout fails at the deadline;
requests past option.request_timeout end with an error naming it and free their KV blocks."""
import http.client
import json
import os
import shutil
import signal
import socket
import tempfile
import threading
import time

from harness import Checks, Server, args_from_argv, http as http_call


def metric(url, name):
    _, _, body = http_call("GET", url + "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.split()[-1])
    return None


def stream_request(tokens):
    body = json.dumps({"inputs": "Once upon a time", "stream": True,
                       "parameters": {"max_new_tokens": tokens, "ignore_eos": True}})
    return (f"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n{body}").encode()


def hung_load(c, a):
    """The model's weights are a named pipe: opening it blocks, as a read from a hung network file
    system does. With option.model_loading_timeout=1 the load fails after 1 s, naming the key."""
    tmp = tempfile.mkdtemp(prefix="lmx_hung_load_")
    try:
        for name in os.listdir(a.model_dir):
            if name != "model.safetensors":
                shutil.copy(os.path.join(a.model_dir, name), tmp)
        pipe = os.path.join(tmp, "model.safetensors")
        os.mkfifo(pipe)
        with open(os.path.join(tmp, "serving.properties"), "w") as f:
            f.write("option.model_loading_timeout=1\n")
        s = Server(a.server, a.plugin, tmp)
        started, st, body = time.time(), 0, {}
        while time.time() < started + 10:
            try:
                st, _, raw = http_call("GET", s.url + "/ping", timeout=2)
                body = json.loads(raw)
                if body.get("state") == "failed":
                    break
            except OSError:
                pass
            time.sleep(0.1)
        elapsed = time.time() - started
        c.check(st == 503 and body.get("state") == "failed" and
                "option.model_loading_timeout=1 s (from line 1 of " in body.get("error", ""),
                f"hung load: /ping {st} {body} after {elapsed:.1f} s")
        c.check(elapsed < 6, f"hung load failed at the deadline, not {elapsed:.1f} s later")
        # Let the blocked open() return (the abandoned load then ends) and stop the server.
        for _ in range(500):
            try:
                os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
                break
            except OSError:
                time.sleep(0.01)
        s.stop()
        c.check("option.model_loading_timeout=1" in s.logs(), "the log names the timeout")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def wait_idle(c, url, idle_kv, within, what):
    """Polls /metrics until nothing runs or waits and lmx_kv_blocks_used is back at idle_kv."""
    started = time.time()
    kv = running = waiting = None
    while time.time() < started + within:
        kv = metric(url, "lmx_kv_blocks_used")
        running = metric(url, "lmx_running_requests")
        waiting = metric(url, "lmx_queue_depth")
        if kv == idle_kv and running == 0 and waiting == 0:
            break
        time.sleep(0.02)
    elapsed = time.time() - started
    c.check(kv == idle_kv and running == 0 and waiting == 0,
            f"{what}: KV blocks used {kv} (idle {idle_kv}), running {running}, waiting {waiting} "
            f"after {elapsed:.2f} s")
    return elapsed


def hundred_hangups(c, s):
    """100 clients stream at once, each hangs up after its first token: every generation is
    cancelled and lmx_kv_blocks_used returns to its idle value (the cache is freed, not left to
    the end of 100 x 480 tokens)."""
    idle_kv = metric(s.url, "lmx_kv_blocks_used")
    c.check(idle_kv == 0, f"idle KV blocks used {idle_kv}")
    cancelled0 = metric(s.url, "lmx_cancelled_total") or 0
    generated0 = metric(s.url, "lmx_generated_tokens_total") or 0
    n, tokens = 100, 480
    socks = []
    for _ in range(n):
        sock = socket.create_connection(("127.0.0.1", s.port))
        sock.sendall(stream_request(tokens))
        socks.append(sock)
    started = 0
    for sock in socks:
        sock.settimeout(30)
        got = b""
        try:
            while b'"token"' not in got:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                got += chunk
        except OSError:
            pass
        started += b"200 OK" in got and b'"token"' in got
    c.check(started == n, f"{started} of {n} streams started")
    busy = metric(s.url, "lmx_kv_blocks_used") or 0
    c.check(busy > idle_kv, f"KV blocks in use while streaming: {busy}")
    for sock in socks:
        sock.close()
    elapsed = wait_idle(c, s.url, idle_kv, 10, f"{n} clients hung up mid-stream")
    deadline = time.time() + 10
    while time.time() < deadline and (metric(s.url, "lmx_cancelled_total") or 0) < cancelled0 + n:
        time.sleep(0.02)
    c.check((metric(s.url, "lmx_cancelled_total") or 0) - cancelled0 == n,
            f"{n} cancels counted: {(metric(s.url, 'lmx_cancelled_total') or 0) - cancelled0}")
    generated = (metric(s.url, "lmx_generated_tokens_total") or 0) - generated0
    c.check(generated < n * tokens / 4,
            f"the {n} generations stopped early: {generated} of {n * tokens} tokens")
    print(f"{n} hang-ups: KV blocks {busy} in use -> {idle_kv} within {elapsed:.2f} s, "
          f"{generated:.0f} of {n * tokens} tokens generated", flush=True)


def request_timeout(c, a):
    """option.request_timeout=1 with more work queued than 1 s can run (16 sequences at once):
    every request completes whole or ends, within a step of its deadline, with an error naming
    the key (a final stream event, or the 424 JSON error before any token); KV returns to idle."""
    timeout_text = "option.request_timeout=1 s"
    with Server(a.server, a.plugin, a.model_dir,
                overrides={"option.request_timeout": 1, "option.max_rolling_batch_size": 16}) as s:
        idle_kv = metric(s.url, "lmx_kv_blocks_used")
        results = []
        lock = threading.Lock()

        def one(i, stream):
            body = json.dumps({"inputs": f"Once upon a time {i}", "stream": stream,
                               "parameters": {"max_new_tokens": 480, "ignore_eos": True}})
            t0 = time.time()
            st, _, raw = http_call("POST", s.url + "/invocations", body,
                                   {"Content-Type": "application/json"}, timeout=60)
            with lock:
                results.append((stream, st, raw, time.time() - t0))

        threads = [threading.Thread(target=one, args=(i, i % 3 != 0)) for i in range(96)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        kinds = {"complete": 0, "stream_event": 0, "error_json": 0, "other": 0}
        late = []
        for stream, st, raw, elapsed in results:
            if stream and st == 200:
                lines = [json.loads(x) for x in raw.decode().splitlines() if x]
                last = lines[-1]
                reason = last.get("details", {}).get("finish_reason")
                if reason == "length" and last["details"]["generated_tokens"] == 480:
                    kinds["complete"] += 1
                    continue
                if reason == "error" and timeout_text in last.get("error", ""):
                    kinds["stream_event"] += 1
                else:
                    kinds["other"] += 1
                    print("unexpected stream end:", str(last)[:300], flush=True)
            elif st == 200:
                kinds["complete"] += 1
                continue
            elif st == 424 and timeout_text in json.loads(raw).get("error", ""):
                kinds["error_json"] += 1
            else:
                kinds["other"] += 1
                print("unexpected answer:", st, raw[:300], flush=True)
            if elapsed > 3:
                late.append(elapsed)
        print(f"request_timeout: {kinds}", flush=True)
        c.check(len(results) == 96 and kinds["other"] == 0, f"every answer accounted for {kinds}")
        c.check(kinds["stream_event"] > 0, "a stream cut by the deadline ends with an event naming it")
        c.check(kinds["error_json"] > 0, "a request that timed out before any token: 424 naming it")
        c.check(not late, f"timed-out requests answered within a step of 1 s, not {late[:5]}")
        timed_out = kinds["stream_event"] + kinds["error_json"]
        c.check(metric(s.url, "lmx_timed_out_total") == timed_out,
                f"lmx_timed_out_total {metric(s.url, 'lmx_timed_out_total')} != {timed_out}")
        wait_idle(c, s.url, idle_kv, 5, "after the timeouts")
        st, _, raw = http_call("POST", s.url + "/invocations",
                               json.dumps({"inputs": "Once upon a time",
                                           "parameters": {"max_new_tokens": 8}}),
                               {"Content-Type": "application/json"})
        c.check(st == 200, f"serving after the timeouts: {st} {raw[:200]}")


def main():
    a = args_from_argv()
    c = Checks("e2e_lifecycle")
    hung_load(c, a)
    request_timeout(c, a)
    with Server(a.server, a.plugin, a.model_dir) as s:
        # 1. Disconnect after the first streamed token, several times: a disconnect can land
        #    while a chunk is being written (that once corrupted the server's heap).
        disconnects = 8
        for _ in range(disconnects):
            sock = socket.create_connection(("127.0.0.1", s.port))
            sock.sendall(stream_request(400))
            got = b""
            while b'"token"' not in got:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                got += chunk
            c.check(b"200 OK" in got, f"stream started: {got[:100]!r}")
            sock.close()
        # Each cancelled request's final chunk comes back with a few tokens, not 400.
        deadline = time.time() + 15
        while time.time() < deadline:
            if (metric(s.url, "lmx_cancelled_total") or 0) >= disconnects and \
                    (metric(s.url, "lmx_generated_tokens_total") or 0) > 0:
                break
            time.sleep(0.05)
        c.check((metric(s.url, "lmx_cancelled_total") or 0) >= disconnects,
                "every disconnect counted as a cancel")
        generated = metric(s.url, "lmx_generated_tokens_total") or 0
        c.check(0 < generated < 100 * disconnects,
                f"generation stopped early ({generated} tokens of {400 * disconnects})")
        status, _, _ = http_call("GET", s.url + "/ping")
        c.check(status == 200, "healthy after the disconnect")
        wait_idle(c, s.url, 0, 10, "after the disconnects")

        # 1a. 100 clients hang up mid-stream at once.
        hundred_hangups(c, s)

        # 1b. A list of 128 inputs whose client hangs up: every sequence is cancelled.
        cancelled0 = metric(s.url, "lmx_cancelled_total") or 0
        generated0 = metric(s.url, "lmx_generated_tokens_total") or 0
        n, tokens = 128, 200
        body = json.dumps({"inputs": [f"Once upon a time {i}" for i in range(n)],
                           "parameters": {"max_new_tokens": tokens, "ignore_eos": True}})
        sock = socket.create_connection(("127.0.0.1", s.port))
        sock.sendall((f"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}"
                      f"\r\n\r\n{body}").encode())
        time.sleep(0.5)
        sock.close()
        deadline = time.time() + 15
        while time.time() < deadline and \
                (metric(s.url, "lmx_cancelled_total") or 0) < cancelled0 + n:
            time.sleep(0.05)
        c.check((metric(s.url, "lmx_cancelled_total") or 0) >= cancelled0 + n,
                f"a list of {n}: every sequence cancelled on disconnect")
        generated = (metric(s.url, "lmx_generated_tokens_total") or 0) - generated0
        c.check(generated < n * tokens / 2, f"the list stopped early ({generated} tokens)")

        # 2. SIGTERM while a stream is in flight: it completes, then the server exits 0.
        result = {}

        def client():
            hc = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
            body = json.dumps({"inputs": "Once upon a time", "stream": True,
                               "parameters": {"max_new_tokens": 80, "ignore_eos": True}})
            hc.request("POST", "/invocations", body, {"Content-Type": "application/json"})
            r = hc.getresponse()
            first = r.readline()
            result["first"] = first
            started.set()
            rest = r.read()
            lines = [json.loads(x) for x in (first + rest).decode().splitlines() if x]
            result["status"] = r.status
            result["last"] = lines[-1]

        started = threading.Event()
        t = threading.Thread(target=client)
        t.start()
        c.check(started.wait(30), "drain stream started")
        s.proc.send_signal(signal.SIGTERM)
        t.join(120)
        last = result.get("last", {})
        c.check(result.get("status") == 200 and
                last.get("details", {}).get("finish_reason") == "length" and
                last.get("details", {}).get("generated_tokens") == 80,
                f"in-flight stream completed during drain: {str(last)[:300]}")
        rc = s.proc.wait(timeout=60)
        c.check(rc == 0, f"exit code after SIGTERM {rc}")
        try:
            socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
            c.check(False, "still accepting after exit")
        except OSError:
            pass
    c.done()


if __name__ == "__main__":
    main()
