"""The image started the way SageMaker starts it, driven by boto3's sagemaker-runtime client.
Run by image_test.sh on an unpacked image (container/image/oci_run.py is the runtime):
  1. the config: entrypoint + `serve`, a non-root user, port 8080;
  2. the model at /opt/ml/model with OPTION_MAX_TOKENS and SAGEMAKER_BIND_TO_PORT, the image's
     files read-only: /ping is 503
     until the model is loaded, then 200; invoke_endpoint and invoke_endpoint_with_response_stream;
     the max_tokens limit from the environment; SIGTERM with a stream in flight: it completes
     and the container exits 0; every stdout line one log record, nothing on stderr;
  3. HF_MODEL_ID naming a local directory instead of /opt/ml/model;
  4. a bad configuration: /ping never 200, the errors logged on one line, SIGTERM exits 0."""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from harness import Checks, free_port

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] \[(trace|debug|info|warning|"
                      r"error|critical)\] \S")
MAX_TOKENS = 256


class Container:
    """One run of the image (oci_run.py) with stdout and stderr kept apart."""

    def __init__(self, a, volumes, env, port, read_only=False):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.out = tempfile.TemporaryFile("w+")
        self.err = tempfile.TemporaryFile("w+")
        cmd = [sys.executable, a.runner, "--config", a.image_json, "--rootfs", a.rootfs]
        if read_only:
            cmd.append("--read-only")
        for v in volumes:
            cmd += ["-v", v]
        for k, v in {**env, "SAGEMAKER_BIND_TO_PORT": str(port)}.items():
            cmd += ["-e", f"{k}={v}"]
        self.proc = subprocess.Popen(cmd + ["serve"], stdout=self.out, stderr=self.err)

    def read(self, f):
        f.flush()
        f.seek(0)
        return f.read()

    def stdout(self):
        return self.read(self.out)

    def stderr(self):
        return self.read(self.err)

    def ping(self):
        """(status, body) or (None, error) while nothing listens."""
        try:
            with urllib.request.urlopen(self.url + "/ping", timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")
        except OSError as e:
            return None, str(e)

    def wait_for(self, ready, timeout=120):
        """Polls /ping from the start; returns every answer up to the one ready() accepts."""
        seen = []
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the container exited with {self.proc.returncode}\n"
                                     f"stdout:\n{self.stdout()}\nstderr:\n{self.stderr()}")
            status, body = self.ping()
            if status is not None:
                seen.append((status, body))
                if ready(status, body):
                    return seen
            time.sleep(0.05)
        raise AssertionError(f"no ready /ping after {timeout}s: {seen[-3:]}\n{self.stdout()}")

    def stop(self, timeout=90):
        """SIGTERM to the runtime, which passes it to the container's PID 1 (docker stop)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return "did not exit"

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def client(url):
    return boto3.client("sagemaker-runtime", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 1}, read_timeout=120))


def stream(sm, tokens, on_event=None):
    """invoke_endpoint_with_response_stream; returns the JSON lines of the payload."""
    r = sm.invoke_endpoint_with_response_stream(
        EndpointName="lmx", ContentType="application/json",
        Body=json.dumps({"inputs": "Once upon a time",
                         "parameters": {"max_new_tokens": tokens, "ignore_eos": True}}))
    data = b""
    for event in r["Body"]:
        if "PayloadPart" in event:
            data += event["PayloadPart"]["Bytes"]
            if on_event:
                on_event()
    return [json.loads(x) for x in data.decode().splitlines() if x]


def check_logs(c, run, name):
    out, err = run.stdout(), run.stderr()
    lines = out.splitlines()
    bad = [x for x in lines if not LOG_LINE.match(x)]
    c.check(lines and not bad, f"{name}: every stdout line is one log record: {bad[:3]}")
    c.check(err == "", f"{name}: nothing on stderr: {err[:500]}")
    return lines


def check_config(c, a):
    with open(a.image_json) as f:
        cfg = json.load(f).get("config", {})
    c.check(cfg.get("Entrypoint") == ["/opt/lmx/bin/entrypoint.sh"], f"entrypoint {cfg}")
    c.check(cfg.get("Cmd") == ["serve"], f"command {cfg.get('Cmd')}")
    user = (cfg.get("User") or "0").split(":")[0]
    c.check(user not in ("", "0", "root"), f"runs as a non-root user: '{cfg.get('User')}'")
    c.check("8080/tcp" in (cfg.get("ExposedPorts") or {}), f"exposes 8080: {cfg.get('ExposedPorts')}")


def sagemaker_run(c, a):
    # Read-only files, as SageMaker may run it: the server writes nothing outside /tmp.
    run = Container(a, [f"{a.model}:/opt/ml/model:ro"], {"OPTION_MAX_TOKENS": MAX_TOKENS},
                    free_port(), read_only=True)
    try:
        seen = run.wait_for(lambda s, b: s == 200)
        early = [x for x in seen[:-1] if x[0] != 503 or x[1].get("state") != "loading"]
        c.check(not early, f"/ping before the model is loaded: only 503 'loading': {early[:3]}")
        c.check(seen[-1][1].get("state") == "ready", f"/ping 200 says ready: {seen[-1][1]}")
        sm = client(run.url)
        r = sm.invoke_endpoint(EndpointName="lmx", ContentType="application/json",
                               Body=json.dumps({"inputs": "Once upon a time",
                                                "parameters": {"max_new_tokens": 12,
                                                               "details": True}}))
        out = json.loads(r["Body"].read())
        details = out.get("details", {})
        c.check(isinstance(out.get("generated_text"), str) and
                (details.get("generated_tokens") == 12 or details.get("finish_reason") == "eos_token"),
                f"invoke_endpoint: {out}")
        r = sm.invoke_endpoint_with_response_stream(
            EndpointName="lmx", ContentType="application/json",
            Body=json.dumps({"inputs": "Once upon a time", "parameters": {"max_new_tokens": 12}}))
        data = b"".join(e["PayloadPart"]["Bytes"] for e in r["Body"] if "PayloadPart" in e)
        lines = [json.loads(x) for x in data.decode().splitlines() if x]
        c.check(lines and lines[-1].get("generated_text") == out.get("generated_text"),
                f"the stream's text equals invoke_endpoint's (greedy): {lines[-1:]}")
        c.check("".join(x["token"]["text"] for x in lines if "token" in x) ==
                out.get("generated_text"), "the streamed tokens add up to the text")
        too_long = json.dumps({"inputs": "Once upon a time",
                               "parameters": {"max_new_tokens": MAX_TOKENS}})
        try:
            sm.invoke_endpoint(EndpointName="lmx", ContentType="application/json", Body=too_long)
            c.check(False, "OPTION_MAX_TOKENS: a request past it was accepted")
        except ClientError as e:
            status = e.response["ResponseMetadata"]["HTTPStatusCode"]
            c.check(status == 400, f"a request past OPTION_MAX_TOKENS: {status} {e}")
        # boto3 keeps no body of a 4xx that has no "message": read the error itself.
        req = urllib.request.Request(run.url + "/invocations", data=too_long.encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=30)
            body = "accepted"
        except urllib.error.HTTPError as e:
            body = e.read().decode()
        c.check(f"max_tokens ({MAX_TOKENS})" in body,
                f"OPTION_MAX_TOKENS={MAX_TOKENS} took effect: {body}")

        # SIGTERM while a stream is in flight: it runs to the end, then the container exits 0.
        tokens = MAX_TOKENS - 16
        first = threading.Event()
        result = {}

        def in_flight():
            try:
                result["lines"] = stream(client(run.url), tokens, first.set)
            except Exception as e:  # noqa: BLE001 - reported below
                result["error"] = repr(e)
            first.set()
        t = threading.Thread(target=in_flight)
        t.start()
        c.check(first.wait(60), "the in-flight stream started")
        rc = run.stop()
        t.join(60)
        last = (result.get("lines") or [{}])[-1]
        details = last.get("details", {})
        c.check(details.get("generated_tokens") == tokens and details.get("finish_reason") ==
                "length", f"the in-flight stream completed during the drain: "
                f"{result.get('error') or str(last)[:300]}")
        c.check(rc == 0, f"exit status after SIGTERM: {rc}")
        logs = check_logs(c, run, "SageMaker run")
        drained = [x for x in logs if "draining" in x]
        c.check(drained and re.search(r"draining [1-9]\d* in-flight", drained[0]),
                f"SIGTERM came while the request was in flight: {drained}")
        c.check(any("listening on" in x for x in logs) and any(" ready " in x for x in logs),
                "the log says listening and ready")
    finally:
        run.kill()


def hf_model_id_run(c, a):
    where = "/opt/ml/hf/tinymodel"
    run = Container(a, [f"{a.model}:{where}:ro"], {"HF_MODEL_ID": where}, free_port())
    try:
        run.wait_for(lambda s, b: s == 200)
        r = client(run.url).invoke_endpoint(
            EndpointName="lmx", ContentType="application/json",
            Body=json.dumps({"inputs": "Once upon a time", "parameters": {"max_new_tokens": 5}}))
        out = json.loads(r["Body"].read())
        c.check(isinstance(out.get("generated_text"), str) and out["generated_text"],
                f"HF_MODEL_ID={where}: invoke_endpoint {out}")
        c.check(run.stop() == 0, "HF_MODEL_ID run: exit 0 after SIGTERM")
        check_logs(c, run, "HF_MODEL_ID run")
    finally:
        run.kill()


def bad_config_run(c, a):
    run = Container(a, [f"{a.model}:/opt/ml/model:ro"],
                    {"OPTION_MAX_TOKENS": "lots", "OPTION_DTYPE": "fp7"}, free_port())
    try:
        seen = run.wait_for(lambda s, b: b.get("state") == "failed")
        c.check(all(s == 503 for s, _ in seen), f"a model that fails never answers /ping 200: {seen}")
        time.sleep(0.5)
        c.check(run.ping()[0] == 503, "still 503 after the failure")
        c.check(run.stop() == 0, "bad config run: exit 0 after SIGTERM")
        logs = check_logs(c, run, "bad config run")
        failed = [x for x in logs if "failed to load" in x]
        c.check(len(failed) == 1 and "option.max_tokens" in failed[0] and "option.dtype" in failed[0],
                f"both configuration errors on one log line: {failed}")
    finally:
        run.kill()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runner", required=True, help="container/image/oci_run.py")
    p.add_argument("--image-json", required=True, help="the image's config blob")
    p.add_argument("--rootfs", required=True)
    p.add_argument("--model", required=True)
    a = p.parse_args()
    a.model = os.path.abspath(a.model)
    c = Checks("image_sagemaker")
    for step in (check_config, sagemaker_run, hf_model_id_run, bad_config_run):
        started = time.time()
        try:
            step(c, a)
        except AssertionError as e:
            c.check(False, f"{step.__name__}: {e}")
        print(f"{step.__name__}: {time.time() - started:.1f} s", flush=True)
    c.done()


if __name__ == "__main__":
    main()
