#!/usr/bin/env python3
"""LMX's chat-template engine against transformers' own apply_chat_template: renders every golden
of tests/chat/goldens/transformers-*.json (rendered on the GPU machine by
scripts/render_chat_goldens.py) with `lmx render-chat --batch --now <the goldens' clock>` and
requires byte-identical text; where transformers raised, LMX must fail with a template error (with
raise_exception's message verbatim when the template raised).

The real templates come from scripts/fetch_chat_templates.sh's cache and the model directories
from scripts/fetch_tokenizers.sh's, as for tests/chat/differential_test.py; a missing cache fails.
A real template or model directory whose sha256 differs from the goldens' fails (upstream changed:
render the goldens again). Cases and snippets edited or added since the goldens were rendered are
listed as not covered (the differential test still checks them against jinja2).

usage: goldens_test.py --lmx PATH [--goldens FILE] [--templates DIR] [--tokenizer-cache DIR] [--only NAME] [-v]"""
import argparse
import hashlib
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import differential_test as dt  # noqa: E402
from render_chat_goldens import model_sha256, sha256_file, sha256_text  # noqa: E402

DEFAULT_GOLDENS = os.path.join(HERE, "goldens", "transformers-5.17.json")
RENDER = ("python3 scripts/render_chat_goldens.py --templates DIR --tokenizer-cache DIR --out FILE "
          "(on a machine with transformers)")


def compare(golden, got):
    """None when LMX agrees with transformers, else a short description of the difference."""
    return dt.compare_rendering(
        "transformers", golden.get("text"), golden.get("raised"),
        dt.raised_message(golden["raised"]) if golden.get("raise_exception") else None, got)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lmx", required=True)
    ap.add_argument("--goldens", default=DEFAULT_GOLDENS)
    ap.add_argument("--templates", default=dt.default_cache())
    ap.add_argument("--cases", default=os.path.join(HERE, "cases"))
    ap.add_argument("--snippets", default=os.path.join(HERE, "snippets.txt"))
    ap.add_argument("--tokenizer-cache", default=os.environ.get("LMX_TOKENIZER_CACHE") or os.path.join(
        os.environ.get("LMX_CACHE_DIR") or os.path.join(os.environ["HOME"], ".cache", "lmx"), "tokenizers"))
    ap.add_argument("--only")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if not os.path.isdir(args.templates) or not any(f.endswith(".jinja") for f in os.listdir(args.templates)):
        print(f"chat templates are missing from {args.templates}: run `bash scripts/fetch_chat_templates.sh`"
              " (or set LMX_CHAT_TEMPLATE_CACHE)", file=sys.stderr)
        return 1
    with open(args.goldens, encoding="utf-8") as f:
        goldens = json.load(f)
    meta = goldens["meta"]
    has_models = any(t["kind"] == "model" for t in goldens["templates"].values())
    if has_models and not os.path.isdir(args.tokenizer_cache):
        print(f"tokenizer files are missing from {args.tokenizer_cache}: run `bash scripts/fetch_tokenizers.sh`"
              " (or set LMX_TOKENIZER_CACHE)", file=sys.stderr)
        return 1

    problems = []      # inputs that no longer match the goldens: failures
    not_covered = []   # local inputs edited or added since: notes
    # Cases: the goldens hold the ones whose file is unchanged.
    cases = {}
    for c in sorted(f[:-5] for f in os.listdir(args.cases) if f.endswith(".json")):
        digest = sha256_file(os.path.join(args.cases, c + ".json"))
        if goldens["cases"].get(c) != digest:
            not_covered.append(f"case {c} ({'edited' if c in goldens['cases'] else 'new'} since the goldens)")
            continue
        with open(os.path.join(args.cases, c + ".json"), encoding="utf-8") as f:
            cases[c] = json.load(f)
    for c in goldens["cases"]:
        if not os.path.exists(os.path.join(args.cases, c + ".json")):
            not_covered.append(f"case {c} (in the goldens, no longer in {args.cases})")

    # Sources: name -> (path given to lmx, kind)
    sources = {}
    cached = {f for f in os.listdir(args.templates) if f.endswith(".jinja")}
    snippets = dt.read_snippets(args.snippets) if args.snippets else {}
    for name, entry in goldens["templates"].items():
        kind = entry["kind"]
        if kind == "template":
            if name not in cached:
                problems.append(f"{name}: in the goldens, missing from {args.templates}")
                continue
            with open(os.path.join(args.templates, name), encoding="utf-8", newline="") as f:
                if sha256_text(f.read()) != entry["sha256"]:
                    problems.append(f"{name}: the cached template differs from the one the goldens rendered")
                    continue
            sources[name] = (os.path.join(args.templates, name), kind)
        elif kind == "snippet":
            text = snippets.get(name[len("snippet "):])
            if text is None or sha256_text(text) != entry["sha256"]:
                not_covered.append(f"{name} ({'edited' if text is not None else 'removed'} since the goldens)")
                continue
            sources[name] = (None, kind)  # written to a file below
        else:
            model = os.path.join(args.tokenizer_cache, name[len("model "):])
            if not os.path.isdir(model) or model_sha256(model) != entry["sha256"]:
                problems.append(f"{name}: {model} is missing or differs from the directory the goldens rendered")
                continue
            sources[name] = (model, kind)
    for f in sorted(cached - set(goldens["templates"])):
        problems.append(f"{f}: a cached template without goldens")
    for name in sorted(set(snippets) - {n[len("snippet "):] for n in goldens["templates"]}):
        not_covered.append(f"snippet {name} (new since the goldens)")
    if args.only:
        sources = {k: v for k, v in sources.items() if args.only in k}

    extra_vars = meta.get("template_tokenizer_special_tokens") or {}
    jobs, requests = [], []
    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, "snippets"))
        for name, (path, kind) in sources.items():
            if kind == "snippet":
                path = os.path.join(tmp, "snippets", hashlib.sha256(name.encode()).hexdigest()[:16] + ".jinja")
                with open(path, "w", encoding="utf-8", newline="") as f:
                    f.write(snippets[name[len("snippet "):]])
            for c, case in cases.items():
                golden = goldens["templates"][name]["renderings"].get(c)
                if golden is None:
                    problems.append(f"{name} x {c}: no golden")
                    continue
                variables = case.get("variables", {})
                if kind == "model":
                    variables = {k: v for k, v in variables.items() if k not in ("bos_token", "eos_token")}
                else:
                    variables = {**extra_vars, **variables}
                requests.append(dt.lmx_request(path, {**case, "variables": variables}))
                jobs.append((name, c, golden))
        rendered = dt.render_batch(args.lmx, requests, now=meta["now"])
        results = [(t, c, golden, got) for (t, c, golden), got in zip(jobs, rendered)]

    identical = both_raise = 0
    mismatches = []
    for t, c, golden, got in results:
        diff = compare(golden, got)
        if diff is None:
            if "text" in golden:
                identical += 1
            else:
                both_raise += 1
        else:
            mismatches.append((t, c, diff))
        if args.verbose:
            print(f"{'OK  ' if diff is None else 'DIFF'} {t} x {c}" + ("" if diff is None else f": {diff}"))
    for t, c, diff in mismatches:
        print(f"MISMATCH {t} x {c}: {diff}")
    for p in problems:
        print(f"STALE {p}: render the goldens again: {RENDER}")
    for n in not_covered:
        print(f"not covered by the goldens: {n}")
    kinds = {}
    for name, (_, kind) in sources.items():
        kinds[kind] = kinds.get(kind, 0) + 1
    print(f"goldens: transformers {meta['transformers']} ({os.path.relpath(args.goldens, ROOT)}, "
          f"rendered {meta['rendered_at_utc']} on {meta['device']}, strftime_now at {meta['now']})")
    print(f"chat goldens: ({kinds.get('template', 0)} real templates + {kinds.get('snippet', 0)} feature snippets + "
          f"{kinds.get('model', 0)} model directories) x {len(cases)} conversations = {len(results)} renderings; "
          f"{identical + both_raise} agree with transformers ({identical} byte-identical texts, {both_raise} raised "
          f"on both sides), {len(mismatches)} mismatches, {len(problems)} stale, {len(not_covered)} not covered")
    return 1 if mismatches or problems or not results else 0


if __name__ == "__main__":
    sys.exit(main())
