#!/usr/bin/env python3
"""Differential test of LMX's chat-template engine against jinja2 configured as transformers 5.17
configures it (scripts/render_chat_reference.py). Renders every real template fetched by
scripts/fetch_chat_templates.sh over every conversation in tests/chat/cases/ with
`lmx render-chat --batch` (one process a core) and with the reference, and requires
byte-identical text; where jinja2 raises, LMX must fail too (with raise_exception's message verbatim when the template raised).

usage: differential_test.py --lmx PATH [--templates DIR] [--cases DIR] [--only NAME] [-v]
Exit 0 when every rendering agrees (or is listed in KNOWN_UNSUPPORTED with a reason)."""
import argparse
import concurrent.futures
import copy
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import render_chat_reference as reference  # noqa: E402

# template file name -> why LMX cannot render it like jinja2. Keep this empty or nearly.
KNOWN_UNSUPPORTED = {}


def default_cache():
    if os.environ.get("LMX_CHAT_TEMPLATE_CACHE"):
        return os.environ["LMX_CHAT_TEMPLATE_CACHE"]
    base = os.environ.get("LMX_CACHE_DIR") or os.path.join(os.environ["HOME"], ".cache", "lmx")
    return os.path.join(base, "chat-templates")


def read_snippets(path):
    """snippets.txt: "### name" lines, each followed by its template text."""
    snippets, name = {}, None
    with open(path, encoding="utf-8", newline="") as f:
        for line in f:
            if line.startswith("### "):
                name = line[4:].strip()
                snippets[name] = ""
            elif name is not None:
                snippets[name] += line
    return snippets


SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                  "mask_token")


def model_dir_inputs(model_dir, case):
    """What transformers renders for a model directory: its chat template (tool_use when tools are
    passed and it has one) and its special tokens from tokenizer_config.json, under the case's own
    variables (chat_template_kwargs) minus the bos/eos placeholders the --template runs use."""
    with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    template = config["chat_template"]
    if isinstance(template, list):
        named = {t["name"]: t["template"] for t in template}
        template = named["tool_use"] if case.get("tools") is not None and "tool_use" in named else named["default"]
    special = {}
    for key in SPECIAL_TOKENS:
        v = config.get(key)
        v = v.get("content") if isinstance(v, dict) else v
        if isinstance(v, str):
            special[key] = v
    extra = config.get("additional_special_tokens")
    if isinstance(extra, list):
        special["additional_special_tokens"] = [t.get("content") if isinstance(t, dict) else t for t in extra]
    variables = {k: v for k, v in case.get("variables", {}).items() if k not in ("bos_token", "eos_token")}
    return template, {**case, "variables": {**special, **variables}}, variables


def model_dirs(tokenizer_cache):
    dirs = []
    for name in sorted(os.listdir(tokenizer_cache)):
        config = os.path.join(tokenizer_cache, name, "tokenizer_config.json")
        if os.path.exists(config):
            with open(config, encoding="utf-8") as f:
                if json.load(f).get("chat_template"):
                    dirs.append(os.path.join(tokenizer_cache, name))
    return dirs


def lmx_request(template, case):
    """The `lmx render-chat --batch` line of one rendering: template is a .jinja file or a model
    directory; the case's messages, tools, documents, add_generation_prompt and variables."""
    r = {"model" if os.path.isdir(template) else "template": template}
    for key in ("messages", "tools", "documents"):
        if key in case:
            r[key] = case[key]
    if case.get("add_generation_prompt"):
        r["add_generation_prompt"] = True
    if case.get("variables"):
        r["variables"] = case["variables"]
    return r


def render_batch(lmx, requests, now=None, workers=None):
    """Renders every request with `lmx render-chat --batch`, the list dealt over `workers`
    processes. Results in order: {"text": ...}, {"error": message} (the template failed) or
    {"crash": ...} (anything else: a bad request, a process that failed or answered short)."""
    workers = max(1, min(workers or max(2, os.cpu_count() or 2), len(requests)))
    results = [None] * len(requests)

    def run(part):
        indices = list(range(part, len(requests), workers))
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as f:
            for i in indices:
                f.write(json.dumps(requests[i], ensure_ascii=False) + "\n")
            path = f.name
        try:
            cmd = [lmx, "render-chat", "--batch", path] + (["--now", now] if now else [])
            p = subprocess.run(cmd, capture_output=True, timeout=900)
        finally:
            os.unlink(path)
        # One answer a "\n" (not str.splitlines: texts hold U+2028 and other line breaks raw).
        out = p.stdout.decode("utf-8")
        lines = out[:-1].split("\n") if out.endswith("\n") else ([out] if out else [])
        if p.returncode != 0 or len(lines) != len(indices):
            err = p.stderr.decode("utf-8", "replace")[-500:]
            for i in indices:
                results[i] = {"crash": f"exit {p.returncode}, {len(lines)} of {len(indices)} answers: {err}"}
            return
        for i, line in zip(indices, lines):
            got = json.loads(line)
            results[i] = ({"text": got["text"]} if "text" in got else
                          {"error": got["error"]} if "error" in got else {"crash": got.get("failure", line)})

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(run, range(workers)))
    return results


def compare_rendering(ref_name, ref_text, ref_error, raise_message, got):
    """None when LMX's rendering `got` ({"text"}, {"error"} or {"crash"}) agrees with the
    reference's, else a short description of the difference. The reference rendered `ref_text`,
    or (ref_text None) failed with `ref_error`; `raise_message`: the template's raise_exception
    message when that is how it failed, which LMX's error must then equal."""
    if "crash" in got:
        return "LMX crashed or failed oddly: " + got["crash"]
    if ref_text is not None:
        if "text" not in got:
            return f"{ref_name} renders, LMX fails: " + got["error"]
        if ref_text == got["text"]:
            return None
        a, b = ref_text, got["text"]
        i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
        return (f"text differs at char {i}: {ref_name} {a[max(0, i - 40):i + 40]!r} vs "
                f"LMX {b[max(0, i - 40):i + 40]!r}")
    if "text" in got:
        return f"{ref_name} fails ({ref_error}), LMX renders"
    if raise_message is not None and got["error"] != raise_message:
        return f"raise_exception message differs: {ref_name} {raise_message!r} vs LMX {got['error']!r}"
    return None


def raised_message(error):
    """The raise_exception message in a reference's error text ("TemplateError: msg"), one line."""
    return error.split(": ", 1)[1].replace("\n", " ").replace("\r", " ")


def compare(ref, got):
    """None when LMX agrees with jinja2, else a short description of the difference."""
    return compare_rendering("jinja2", ref.get("text"), ref.get("error"),
                             raised_message(ref["error"]) if ref.get("raised") else None, got)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lmx", required=True)
    ap.add_argument("--templates", default=default_cache())
    ap.add_argument("--cases", default=os.path.join(HERE, "cases"))
    ap.add_argument("--snippets", default=os.path.join(HERE, "snippets.txt"))
    ap.add_argument("--tokenizer-cache", default=os.environ.get("LMX_TOKENIZER_CACHE") or os.path.join(
        os.environ.get("LMX_CACHE_DIR") or os.path.join(os.environ["HOME"], ".cache", "lmx"), "tokenizers"),
        help="model directories whose tokenizer_config.json has a chat_template are rendered with --model")
    ap.add_argument("--only")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if not os.path.isdir(args.templates) or not any(f.endswith(".jinja") for f in os.listdir(args.templates)):
        print(f"chat templates are missing from {args.templates}: run `bash scripts/fetch_chat_templates.sh`"
              " (or set LMX_CHAT_TEMPLATE_CACHE)", file=sys.stderr)
        return 1
    templates = [os.path.join(args.templates, f) for f in sorted(os.listdir(args.templates))
                 if f.endswith(".jinja")]
    snippets = read_snippets(args.snippets) if args.snippets else {}
    if not os.path.isdir(args.tokenizer_cache):
        print(f"tokenizer files are missing from {args.tokenizer_cache}: run `bash scripts/fetch_tokenizers.sh`"
              " (or set LMX_TOKENIZER_CACHE)", file=sys.stderr)
        return 1
    models = model_dirs(args.tokenizer_cache)
    if args.only:
        templates = [t for t in templates if args.only in t]
        snippets = {k: v for k, v in snippets.items() if args.only in k}
        models = [m for m in models if args.only in m]
    cases = sorted(f for f in os.listdir(args.cases) if f.endswith(".json"))
    loaded = {}
    for c in cases:
        with open(os.path.join(args.cases, c), encoding="utf-8") as f:
            loaded[c] = json.load(f)

    jobs, requests = [], []
    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, "snippets"))
        for name, text in snippets.items():
            path = os.path.join(tmp, "snippets", name + ".jinja")
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
            templates.append(path)
        for path in templates:
            t = ("snippet " if os.path.dirname(path).endswith("snippets") else "") + os.path.basename(path)
            with open(path, encoding="utf-8", newline="") as f:
                source = f.read()
            for c in cases:
                ref = reference.render(source, copy.deepcopy(loaded[c]))  # a template may mutate it
                requests.append(lmx_request(path, loaded[c]))
                jobs.append((t, c, ref))
        for model in models:
            for c in cases:
                source, ref_case, lmx_vars = model_dir_inputs(model, loaded[c])
                ref = reference.render(source, copy.deepcopy(ref_case))
                requests.append(lmx_request(model, {**loaded[c], "variables": lmx_vars}))
                jobs.append(("model " + os.path.basename(model), c, ref))
        results = [(t, c, ref, got) for (t, c, ref), got in zip(jobs, render_batch(args.lmx, requests))]

    identical = both_error = 0
    failures, known = [], []
    per_template = {}
    for t, c, ref, got in results:
        diff = compare(ref, got)
        if diff is None:
            if "text" in ref:
                identical += 1
            else:
                both_error += 1
            per_template.setdefault(t, [0, 0])[0] += 1
        else:
            (known if t in KNOWN_UNSUPPORTED else failures).append((t, c, diff))
        per_template.setdefault(t, [0, 0])[1] += 1
        if args.verbose:
            print(f"{'OK  ' if diff is None else 'DIFF'} {t} x {c}" + ("" if diff is None else f": {diff}"))
    for t, c, diff in failures:
        print(f"MISMATCH {t} x {c}: {diff}")
    for t, c, diff in known:
        print(f"known unsupported {t} ({KNOWN_UNSUPPORTED[t]}) x {c}: {diff}")
    fixed = [t for t in KNOWN_UNSUPPORTED if t in per_template and per_template[t][0] == per_template[t][1]]
    for t in fixed:
        print(f"{t} is listed in KNOWN_UNSUPPORTED but now agrees everywhere: remove it")
    total = len(results)
    print(f"reference: jinja2 {reference.jinja2.__version__} ({reference.jinja2.__file__})")
    real = len(templates) - len(snippets)
    print(f"chat differential: ({real} real templates + {len(snippets)} feature snippets + {len(models)} model "
          f"directories) x {len(cases)} conversations = {total} renderings; "
          f"{identical + both_error} agree ({identical} byte-identical texts, {both_error} errors on both sides), "
          f"{len(failures)} mismatches, {len(known)} known unsupported")
    return 1 if failures or fixed else 0


if __name__ == "__main__":
    sys.exit(main())
