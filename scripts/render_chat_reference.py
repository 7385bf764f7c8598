#!/usr/bin/env python3
"""The reference renderer for LMX's chat-template tests: jinja2 configured exactly as
transformers 5.17's apply_chat_template configures it (utils/chat_template_utils.py):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols
extension and a {% generation %} block, transformers' tojson filter (json.dumps with
ensure_ascii=False, indent, separators, sort_keys), and the raise_exception / strftime_now globals.
Render arguments as render_jinja_template passes them: messages, tools (None when absent),
documents (None when absent), add_generation_prompt, then the special tokens and extra kwargs.

usage: render_chat_reference.py TEMPLATE CASE.json
  CASE.json: {"messages": [...], "tools": [...]?, "documents": [...]?,
              "add_generation_prompt": bool?, "variables": {...}?}
  (bos_token / eos_token and chat_template_kwargs go in "variables")
Prints {"text": ...} and exits 0, or prints {"error": ..., "raised": bool} and exits 1.
Only the test oracle: LMX itself never runs Python."""
import functools
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationBlock(jinja2.ext.Extension):
    # transformers' AssistantTracker: {% generation %}...{% endgeneration %} renders its body.
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


@functools.lru_cache(maxsize=None)
def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


@functools.lru_cache(maxsize=256)
def compile_template(source):
    return environment().from_string(source)


def render(source, case):
    """{"text": ...}, or {"error": "Type: message", "raised": raise_exception was called}."""
    try:
        template = compile_template(source)
        text = template.render(messages=case["messages"], tools=case.get("tools"),
                               documents=case.get("documents"),
                               add_generation_prompt=case.get("add_generation_prompt", False),
                               **case.get("variables", {}))
    except Exception as e:  # every failure is an expected outcome to compare against
        raised = type(e) is jinja2.exceptions.TemplateError
        return {"error": f"{type(e).__name__}: {e}", "raised": raised}
    return {"text": text}


def main():
    with open(sys.argv[1], encoding="utf-8", newline="") as f:
        source = f.read()
    with open(sys.argv[2], encoding="utf-8") as f:
        case = json.load(f)
    result = render(source, case)
    print(json.dumps(result, ensure_ascii=False))
    return 0 if "text" in result else 1


if __name__ == "__main__":
    sys.exit(main())
