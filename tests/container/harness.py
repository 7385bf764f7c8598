"""Starts build/bin/lmx-server on a free loopback port and stops it with SIGTERM (checking that
it exits cleanly). Shared by the end-to-end suites in this folder."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

SKIP = 77  # CTest SKIP_RETURN_CODE


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`launcher`: words before the server's command line (e.g. mpirun -np 2): self.proc is then
    the launcher's process."""

    def __init__(self, server, plugin, model_dir, overrides=None, extra=(), launcher=()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [*launcher, server, "--model-dir", model_dir, "--port", str(self.port),
                "--host", "127.0.0.1", "--plugin", plugin, "--threads", "4", *extra]
        if overrides:
            args += ["--overrides", json.dumps(overrides)]
        self.log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                     f"lmx-server-{self.port}.log"), "w+")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self.model = os.path.basename(os.path.normpath(model_dir))

    def wait_ready(self, timeout=90):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited with {self.proc.returncode}:\n{self.logs()}")
            try:
                with urllib.request.urlopen(self.url + "/ping", timeout=2) as r:
                    if r.status == 200:
                        return json.loads(r.read())
            except urllib.error.HTTPError as e:
                last = (e.code, e.read().decode())
                assert e.code == 503, last
                body = json.loads(last[1])
                assert body["state"] in ("loading", "failed"), body
                if body["state"] == "failed":
                    raise AssertionError(f"model failed to load: {body}")
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"server not ready after {timeout}s (last {last}):\n{self.logs()}")

    def logs(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-5000:]

    def stop(self, timeout=60):
        """SIGTERM; the server must drain and exit 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("server did not exit after SIGTERM:\n" + self.logs())
        assert rc == 0, f"server exited with {rc} after SIGTERM:\n{self.logs()}"

    def __enter__(self):
        try:
            self.wait_ready()
        except BaseException:
            self.kill()
            raise
        return self

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.stop()
        else:
            self.kill()
            sys.stderr.write("---- server log ----\n" + self.logs() + "\n")
        return False


def http(method, url, body=None, headers=None, timeout=60):
    """(status, headers, body bytes) without raising on 4xx/5xx."""
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def args_from_argv():
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--plugin", required=True)
    p.add_argument("--model-dir", required=True)
    return p.parse_args()


class Checks:
    def __init__(self, name):
        self.name, self.failed, self.count = name, 0, 0

    def check(self, cond, what):
        self.count += 1
        if not cond:
            self.failed += 1
            print(f"FAIL: {what}", flush=True)

    def done(self):
        print(f"{self.name}: {self.count - self.failed}/{self.count} checks passed", flush=True)
        sys.exit(1 if self.failed else 0)
