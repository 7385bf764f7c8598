#!/usr/bin/env python3
"""`lmx render-chat --batch`: one answer a line in order -- the text, the template's error, or a
failure naming the line (bad JSON, a missing or mistyped field, an unreadable file) -- with the
other lines unaffected; --batch refuses the single mode's options.

usage: render_chat_batch_test.py --lmx PATH"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lmx", required=True)
    lmx = ap.parse_args().lmx
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        ok = os.path.join(tmp, "ok.jinja")
        raising = os.path.join(tmp, "raising.jinja")
        with open(ok, "w", encoding="utf-8") as f:
            f.write("{{ messages[0].content }}{% if add_generation_prompt %}>{% endif %}"
                    "{{ greeting | default('') }}")
        with open(raising, "w", encoding="utf-8") as f:
            f.write("{{ raise_exception('no ' ~ messages | length) }}")
        user = [{"role": "user", "content": "hi \u2028 there"}]
        lines = [
            json.dumps({"template": ok, "messages": user, "add_generation_prompt": True,
                        "variables": {"greeting": "!"}}, ensure_ascii=False),
            json.dumps({"template": raising, "messages": user}),
            json.dumps({"template": os.path.join(tmp, "missing.jinja"), "messages": user}),
            "not json",
            json.dumps({"messages": user}),
            json.dumps({"template": ok, "messages": user, "variables": 3}),
            json.dumps({"template": ok}),
            json.dumps({"template": ok, "messages": user}),
        ]
        batch = os.path.join(tmp, "batch.jsonl")
        with open(batch, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        p = subprocess.run([lmx, "render-chat", "--batch", batch], capture_output=True, timeout=60)
        out = p.stdout.decode("utf-8")
        answers = [json.loads(line) for line in out[:-1].split("\n")] if out.endswith("\n") else []
        expected = [
            {"text": "hi \u2028 there>!"},
            {"error": "no 1"},
            {"failure": "line 3: cannot read " + os.path.join(tmp, "missing.jinja")},
            "line 4: ",  # the JSON parser's own message follows
            {"failure": "line 5: one of --template or --model is required (see lmx render-chat --help)"},
            {"failure": 'line 6: "variables" must be an object'},
            {"failure": 'line 7: "messages" is required'},
            {"text": "hi \u2028 there"},
        ]
        if p.returncode != 0 or len(answers) != len(expected):
            failures.append(f"exit {p.returncode}, {len(answers)} answers: {out!r} {p.stderr!r}")
        else:
            for i, (got, want) in enumerate(zip(answers, expected), 1):
                if isinstance(want, str):
                    if not got.get("failure", "").startswith(want):
                        failures.append(f"line {i}: {got} is not a failure starting {want!r}")
                elif got != want:
                    failures.append(f"line {i}: {got} != {want}")
        for extra in (["--json"], ["--add-generation-prompt"], ["--template", ok]):
            p = subprocess.run([lmx, "render-chat", "--batch", batch, *extra], capture_output=True,
                               timeout=60)
            if p.returncode == 0 or b"--batch takes only --now" not in p.stderr:
                failures.append(f"--batch with {extra}: exit {p.returncode}, {p.stderr!r}")
    for f in failures:
        print("FAIL", f)
    print(f"render-chat --batch: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
