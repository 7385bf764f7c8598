"""The official `openai` npm client against lmx-server's /v1/chat/completions (and LMI's
{"messages": ...} on /invocations). The model directory is tinystories-656k plus a ChatML
template with tools (tests/container/chat_model/chat_template.jinja) in a temporary directory.
Runs e2e_openai_chat.mjs three times: over the real engine (chat, streaming, usage, n, logprobs, tools
rendered), over the real engine on stories260k with tool_choice forcing calls (constrained
decoding), and over the fake engine, whose ECHO_PROMPT / EMIT_TOOL_CALL outputs make the rendered
prompt and a tool call deterministic. Skips (77) when the openai package cannot be installed."""
import json
import os
import subprocess
import sys
import tempfile

from e2e_openai import install
from harness import SKIP, Checks, Server, http


def chat_model_dir(base, tmp):
    d = os.path.join(tmp, "tiny-chat")
    os.makedirs(d)
    for name in os.listdir(base):
        os.symlink(os.path.abspath(os.path.join(base, name)), os.path.join(d, name))
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "chat_model", "chat_template.jinja")) as f:
        template = f.read()
    with open(os.path.join(d, "chat_template.jinja"), "w") as f:
        f.write(template)
    return d


def run_mjs(server, mode, modules):
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run(["node", os.path.join(here, "e2e_openai_chat.mjs"), server.url, server.model,
                        mode], env={**os.environ, "NODE_PATH": modules}, timeout=120)
    return r.returncode


def main():
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--plugin", required=True)
    p.add_argument("--fake-plugin", required=True)
    p.add_argument("--model-dir", required=True)
    a = p.parse_args()
    modules = install()
    if modules is None:
        print("SKIP: could not install the openai npm package")
        sys.exit(SKIP)
    rc = 0
    with tempfile.TemporaryDirectory() as tmp:
        model = chat_model_dir(a.model_dir, tmp)
        with Server(a.server, a.plugin, model) as s:
            rc |= run_mjs(s, "real", modules)
        with Server(a.server, a.fake_plugin, model) as s:
            rc |= run_mjs(s, "fake", modules)
        # tool_choice by constrained decoding: stories260k, whose vocabulary has every byte
        # (tinystories-656k has no "{"), with a ChatML template that leaves the tools out (its
        # 512 positions would not hold them) and the hermes format named by option.
        forced = chat_model_dir(os.path.join(os.path.dirname(os.path.abspath(a.model_dir)),
                                             "stories260k"), os.path.join(tmp, "forced"))
        with open(os.path.join(forced, "chat_template.jinja"), "w") as f:
            f.write("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                    "{% endfor %}<|im_start|>assistant\n")
        with Server(a.server, a.plugin, forced,
                    overrides={"option.tool_call_parser": "hermes"}) as s:
            rc |= run_mjs(s, "forced", modules)
        # A model without a chat template: chat is a 400 saying so; plain prompts still work.
        c = Checks("e2e_openai_chat (no template, option.chat_template)")
        with Server(a.server, a.fake_plugin, a.model_dir) as s:
            body = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
            for path in ("/v1/chat/completions", "/invocations"):
                code, _, out = http("POST", s.url + path, body,
                                    {"Content-Type": "application/json"})
                err = json.loads(out)
                c.check(code == 400 and "no chat template" in err["error"]
                        and err["field"] == "messages", f"{path} without a template: {code} {out}")
            code, _, out = http("POST", s.url + "/v1/completions",
                                json.dumps({"prompt": "hi", "max_tokens": 2}))
            c.check(code == 200, f"completions still work: {code} {out}")
        # option.chat_template (a file) and option.tool_call_parser give it one.
        here = os.path.dirname(os.path.abspath(__file__))
        overrides = {"option.chat_template": os.path.join(here, "chat_model", "chat_template.jinja"),
                     "option.tool_call_parser": "hermes"}
        with Server(a.server, a.fake_plugin, a.model_dir, overrides=overrides) as s:
            tools = [{"type": "function", "function": {"name": "get_weather"}}]
            body = json.dumps({"messages": [{"role": "user", "content": "EMIT_TOOL_CALL"}],
                               "tools": tools, "max_tokens": 50})
            code, _, out = http("POST", s.url + "/v1/chat/completions", body)
            msg = json.loads(out)["choices"][0]["message"] if code == 200 else {}
            c.check(msg.get("tool_calls", [{}])[0].get("function", {}).get("name") == "get_weather",
                    f"option.chat_template + option.tool_call_parser: {code} {out}")
        print(f"{c.name}: {c.count - c.failed}/{c.count} checks passed", flush=True)
        rc |= 1 if c.failed else 0
    sys.exit(rc)


if __name__ == "__main__":
    main()
