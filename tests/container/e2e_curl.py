"""curl against every endpoint and every kind of malformed request: status and body checked."""
import json
import os
import subprocess
import tempfile

from harness import Checks, Server, args_from_argv


def curl(url, *args):
    """(status, body text) of one curl call; -N so streamed bodies arrive unbuffered."""
    out = subprocess.run(["curl", "-sS", "-N", "-o", "-", "-w", "\n%{http_code}", *args, url],
                         capture_output=True, text=True, timeout=120)
    body, _, code = out.stdout.rpartition("\n")
    return int(code or 0), body


def main():
    a = args_from_argv()
    c = Checks("e2e_curl")
    with Server(a.server, a.plugin, a.model_dir) as s:
        u = s.url
        post_json = ["-H", "Content-Type: application/json", "-d"]

        code, body = curl(u + "/ping")
        c.check(code == 200 and json.loads(body)["status"] == "healthy", f"/ping {code} {body}")

        code, body = curl(u + "/models")
        c.check(code == 200 and json.loads(body)["models"][0]["modelName"] == s.model,
                f"/models {code} {body}")

        # Generation: /invocations, details, list, return_full_text.
        req = {"inputs": "Once upon a time", "parameters": {"max_new_tokens": 12, "details": True}}
        code, body = curl(u + "/invocations", *post_json, json.dumps(req))
        ok = code == 200
        if ok:
            r = json.loads(body)
            d = r["details"]
            ok = (isinstance(r["generated_text"], str) and
                  d["finish_reason"] in ("length", "eos_token", "stop_sequence") and
                  d["generated_tokens"] == len(d["tokens"]) and 1 <= d["generated_tokens"] <= 12 and
                  all({"id", "text", "log_prob"} <= set(t) for t in d["tokens"]))
        c.check(ok, f"/invocations details {code} {body[:300]}")
        greedy_text = json.loads(body)["generated_text"] if code == 200 else None

        code, body = curl(u + f"/predictions/{s.model}", *post_json, json.dumps(req))
        c.check(code == 200 and json.loads(body)["generated_text"] == greedy_text,
                f"/predictions greedy repeatable {code} {body[:200]}")

        code, body = curl(u + "/invocations", *post_json,
                          json.dumps({"inputs": ["Once upon a time", "The dog"],
                                      "parameters": {"max_new_tokens": 5}}))
        c.check(code == 200 and isinstance(json.loads(body), list) and len(json.loads(body)) == 2,
                f"list inputs {code} {body[:200]}")

        code, body = curl(u + "/invocations", *post_json,
                          json.dumps({"inputs": "Once upon a time",
                                      "parameters": {"max_new_tokens": 4,
                                                     "return_full_text": True}}))
        c.check(code == 200 and json.loads(body)["generated_text"].startswith("Once upon a time"),
                f"return_full_text {code} {body[:200]}")

        code, body = curl(u + "/invocations", "-H", "Content-Type: text/plain", "-d",
                          "Once upon a time")
        c.check(code == 200 and "generated_text" in json.loads(body), f"text/plain {code} {body}")

        code, body = curl(u + "/invocations", *post_json,
                          json.dumps({"inputs": "Once upon a time",
                                      "parameters": {"max_new_tokens": 8, "do_sample": True,
                                                     "temperature": 0.8, "top_p": 0.9,
                                                     "top_k": 20, "repetition_penalty": 1.1,
                                                     "seed": 42}}))
        c.check(code == 200, f"sampling parameters {code} {body[:200]}")

        # Streaming as JSON lines with chunked transfer encoding.
        code, body = curl(u + "/invocations", "-i", *post_json,
                          json.dumps({"inputs": "Once upon a time", "stream": True,
                                      "parameters": {"max_new_tokens": 10}}))
        head, _, payload = body.replace("\r\n", "\n").partition("\n\n")
        lines = [json.loads(x) for x in payload.strip().split("\n") if x]
        ok = (code == 200 and "transfer-encoding: chunked" in head.lower() and
              "application/jsonlines" in head and len(lines) >= 1 and
              all("token" in x for x in lines[:-1]) and "generated_text" in lines[-1] and
              lines[-1]["details"]["finish_reason"] in ("length", "eos_token") and
              "".join(x["token"]["text"] for x in lines if "token" in x) ==
              lines[-1]["generated_text"])
        c.check(ok, f"jsonlines stream {code} {body[:400]}")

        # OpenAI-style completions, plain and streamed.
        code, body = curl(u + "/v1/completions", *post_json,
                          json.dumps({"model": s.model, "prompt": "Once upon a time",
                                      "max_tokens": 6, "temperature": 0}))
        ok = code == 200
        if ok:
            r = json.loads(body)
            ok = (r["object"] == "text_completion" and r["choices"][0]["finish_reason"] in
                  ("length", "stop") and r["usage"]["completion_tokens"] >= 1)
        c.check(ok, f"/v1/completions {code} {body[:300]}")
        code, body = curl(u + "/v1/completions", *post_json,
                          json.dumps({"model": s.model, "prompt": "Once upon a time",
                                      "max_tokens": 6, "stream": True}))
        events = [x[len("data: "):] for x in body.split("\n") if x.startswith("data: ")]
        c.check(code == 200 and events and events[-1] == "[DONE]" and
                json.loads(events[-2])["choices"][0]["finish_reason"] in ("length", "stop"),
                f"/v1/completions stream {code} {body[:300]}")

        # Malformed requests: status and the field named in the body.
        def bad(path, data, status, field, extra=()):
            code, body = curl(u + path, *extra, *post_json, data)
            ok = code == status
            try:
                j = json.loads(body)
                ok = ok and j.get("field") == field and j.get("error")
            except ValueError:
                ok = False
            c.check(ok, f"{path} {data[:60]!r}: want {status} field {field}, got {code} {body}")

        bad("/invocations", '{"inputs": ', 400, "body")
        bad("/invocations", '[1, 2]', 400, "body")
        bad("/invocations", '{}', 400, "inputs")
        bad("/invocations", '{"inputs": 7}', 400, "inputs")
        bad("/invocations", '{"inputs": ""}', 400, "inputs")
        bad("/invocations", '{"inputs": "a", "parameters": "x"}', 400, "parameters")
        bad("/invocations", '{"inputs": "a", "parameters": {"max_new_tokens": -1}}', 400,
            "parameters.max_new_tokens")
        bad("/invocations", '{"inputs": "a", "parameters": {"temperature": "hot"}}', 400,
            "parameters.temperature")
        bad("/invocations", '{"inputs": "a", "parameters": {"top_p": 1.5}}', 400,
            "parameters.top_p")
        bad("/invocations", '{"inputs": "a", "parameters": {"top_k": -3}}', 400,
            "parameters.top_k")
        bad("/invocations", '{"inputs": "a", "parameters": {"do_sample": "maybe"}}', 400,
            "parameters.do_sample")
        bad("/invocations", '{"inputs": "a", "parameters": {"stop_sequences": 5}}', 400,
            "parameters.stop_sequences")
        bad("/invocations", '{"inputs": "a", "parameters": {"unknown_knob": 1}}', 400,
            "parameters.unknown_knob")
        bad("/invocations", '{"inputs": "a", "stream": "yes"}', 400, "stream")
        bad("/invocations", '{"inputs": ["a", "b"], "stream": true}', 400, "inputs")
        # prompt + max_new_tokens > max_tokens: a 400 that says both numbers.
        code, body = curl(u + "/invocations", *post_json,
                          '{"inputs": "Once upon a time", "parameters": {"max_new_tokens": 5000}}')
        c.check(code == 400 and "5000" in body and "1024" in body,
                f"max_tokens exceeded {code} {body}")
        bad("/v1/completions", '{"model": "x"}', 400, "prompt")
        bad("/v1/completions", '{"prompt": "a", "max_tokens": 0}', 400, "max_tokens")
        bad("/v1/completions", '{"prompt": "a", "n": 17}', 400, "n")
        bad("/v1/completions", '{"prompt": ["a", "b"], "n": 2}', 400, "n")
        bad("/v1/completions", '{"prompt": "a", "logprobs": 6}', 400, "logprobs")
        bad("/v1/completions", '{"prompt": "a", "model": "other"}', 404, "model")
        bad("/predictions/unknown-model", '{"inputs": "a"}', 404, "model")
        bad("/no/such/path", '{}', 404, "path")
        code, body = curl(u + "/invocations")  # GET
        c.check(code == 405, f"GET /invocations {code} {body}")

        # Oversize body: 413.
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            f.write('{"inputs": "' + "a" * (7 * 1024 * 1024) + '"}')
            f.flush()
            code, body = curl(u + "/invocations", "-H", "Content-Type: application/json",
                              "--data-binary", "@" + f.name)
        c.check(code == 413 and json.loads(body)["field"] == "body", f"oversize {code} {body}")

        # Metrics after all of the above.
        code, body = curl(u + "/metrics")
        ok = code == 200 and all(m in body for m in (
            'lmx_requests_total{endpoint="invocations",code="200"}',
            'lmx_requests_total{endpoint="invocations",code="400"}',
            "lmx_request_duration_seconds_bucket", "lmx_time_to_first_token_seconds_bucket",
            "lmx_generated_tokens_total", "lmx_queue_depth", "lmx_requests_in_flight"))
        c.check(ok, f"/metrics {code} {body[:300]}")
        # The server is still healthy after every malformed request.
        code, _ = curl(u + "/ping")
        c.check(code == 200, "still healthy")
    c.done()


if __name__ == "__main__":
    main()
