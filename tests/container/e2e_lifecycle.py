"""A client that disconnects mid-stream cancels its generation; SIGTERM drains in-flight
requests (they finish completely) and the server exits 0; a load that hangs past
option.model_loading_timeout fails at the deadline."""
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


def main():
    a = args_from_argv()
    c = Checks("e2e_lifecycle")
    hung_load(c, a)
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
