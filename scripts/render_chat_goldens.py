#!/usr/bin/env python3
"""Renders the chat goldens (tests/chat/goldens/transformers-<version>.json) with transformers' own
tokenizer.apply_chat_template(tokenize=False): every template of scripts/fetch_chat_templates.sh's
cache, every feature snippet of tests/chat/snippets.txt and every model directory of
scripts/fetch_tokenizers.sh's cache that has a chat template, over every conversation of
tests/chat/cases/ -- the inputs tests/chat/differential_test.py renders against jinja2.

Needs transformers (the GPU machine has it; Debian has none), no network and no GPU:
  python3 scripts/render_chat_goldens.py --templates DIR [--tokenizer-cache DIR] --out FILE.json

How each rendering is asked for, as the differential test asks LMX and jinja2:
  - a template file or snippet: apply_chat_template(messages, tools=, documents=,
    chat_template=<text>, add_generation_prompt=, tokenize=False, **case["variables"]) on a
    tokenizer that has no special tokens of its own, so the template sees exactly the case's
    variables (bos_token "<s>", eos_token "</s>", enable_thinking, ...) as `lmx render-chat --var`
    passes them;
  - a model directory: AutoTokenizer.from_pretrained(DIR).apply_chat_template(...) with its own
    template(s) and special tokens, and the case's variables minus bos_token/eos_token.
strftime_now() sees a fixed local time (--now, default 2024-07-26T12:00:00), so the goldens are
deterministic; `lmx render-chat --now` pins LMX's clock to the same time.

The file: {"meta": {...}, "cases": {case id: sha256 of its file},
           "templates": {name: {"kind": "template"|"snippet"|"model", "sha256": ...,
                                "renderings": {case id: {"text": ...} or
                                               {"raised": "Type: message", "raise_exception": bool}}}}}
"raise_exception" is true when the template's own raise_exception() raised (jinja2's bare
TemplateError). meta.jinja2_reference_differences lists the renderings where transformers and
scripts/render_chat_reference.py (jinja2 configured as transformers configures it) disagree."""
import argparse
import copy
import datetime as datetime_module
import hashlib
import json
import os
import platform
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "chat"))
import differential_test as dt  # noqa: E402  (the cases, snippets and model directories it renders)
import render_chat_reference as reference  # noqa: E402

DEFAULT_NOW = "2024-07-26T12:00:00"


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def sha256_text(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def model_sha256(model_dir):
    """What decides a model directory's rendering: its tokenizer_config.json (and chat_template.*)."""
    h = hashlib.sha256()
    for name in ("tokenizer_config.json", "chat_template.jinja", "chat_template.json"):
        path = os.path.join(model_dir, name)
        if os.path.exists(path):
            h.update(name.encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def pin_clock(now, extra=()):
    """Make every datetime.now() that transformers' and the reference's strftime_now() call return
    `now` (a naive local time, as datetime.now() returns)."""

    class FixedDatetime(datetime_module.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(now.year, now.month, now.day, now.hour, now.minute, now.second, tzinfo=tz)

        @classmethod
        def today(cls):
            return cls.now()

    shim = types.ModuleType("datetime")
    shim.__dict__.update(datetime_module.__dict__)
    shim.datetime = FixedDatetime
    patched = []
    for name, module in list(sys.modules.items()) + [(m.__name__, m) for m in extra]:
        if not (name.startswith("transformers") or name == "render_chat_reference" or module in extra):
            continue
        attr = getattr(module, "datetime", None)
        if attr is datetime_module.datetime:
            module.datetime = FixedDatetime
            patched.append(name)
        elif attr is datetime_module:
            module.datetime = shim
            patched.append(name)
    return patched


def special_tokenless_tokenizer(fallback_model_dirs):
    """A tokenizer with no special tokens: the template sees only what the call passes. Falls back
    to a model directory's tokenizer (meta.template_tokenizer_special_tokens then says what it
    adds, and the test passes the same)."""
    import transformers

    errors = []
    try:
        from tokenizers import Tokenizer
        from tokenizers.models import WordLevel

        backend = Tokenizer(WordLevel({"a": 0}, unk_token="a"))
        for cls_name in ("PreTrainedTokenizerFast", "TokenizersBackend"):
            cls = getattr(transformers, cls_name, None)
            if cls is None:
                continue
            try:
                return cls(tokenizer_object=backend), cls_name
            except Exception as e:  # try the next
                errors.append(f"{cls_name}: {type(e).__name__}: {e}")
    except Exception as e:
        errors.append(f"tokenizers: {type(e).__name__}: {e}")
    for model in fallback_model_dirs:
        try:
            return transformers.AutoTokenizer.from_pretrained(model), "AutoTokenizer " + model
        except Exception as e:
            errors.append(f"{model}: {type(e).__name__}: {e}")
    raise SystemExit("no tokenizer to call apply_chat_template on:\n  " + "\n  ".join(errors))


def special_tokens_of(tok):
    try:
        return {k: v for k, v in dict(tok.special_tokens_map).items() if v is not None}
    except Exception as e:  # recorded
        return {"<error>": f"{type(e).__name__}: {e}"}


class Renderer:
    """apply_chat_template with the case's inputs; finds once how this transformers takes the
    template variables (as **kwargs, else chat_template_kwargs=)."""

    def __init__(self):
        self.return_dict = True  # pass return_dict=False unless this version rejects it
        self.kwargs_style = "kwargs"

    def call(self, tok, messages, tools, documents, template, add_generation_prompt, variables):
        kw = dict(tools=tools, documents=documents, add_generation_prompt=add_generation_prompt,
                  tokenize=False)
        if template is not None:
            kw["chat_template"] = template
        if self.return_dict:
            kw["return_dict"] = False
        if self.kwargs_style == "kwargs":
            kw.update(variables)
        else:
            kw["chat_template_kwargs"] = variables
        out = tok.apply_chat_template(messages, **kw)
        if not isinstance(out, str):
            raise RuntimeError(f"apply_chat_template returned {type(out).__name__}, not str")
        return out

    def probe(self, tok):
        """Finds how this transformers takes the template variables."""
        template = "{{ bos_token }}|{{ flag }}|{{ messages[0].content }}"
        want = "<s>|7|hi"
        tried = []
        for return_dict in (True, False):
            for style in ("kwargs", "chat_template_kwargs"):
                self.return_dict, self.kwargs_style = return_dict, style
                try:
                    got = self.call(tok, [{"role": "user", "content": "hi"}], None, None, template, False,
                                    {"bos_token": "<s>", "flag": 7})
                except Exception as e:  # try the next way of calling
                    tried.append(f"return_dict={return_dict} {style}: {type(e).__name__}: {e}")
                    continue
                if got == want:
                    return {"return_dict_false_passed": return_dict, "variables_as": style}
                tried.append(f"return_dict={return_dict} {style}: rendered {got!r}, wanted {want!r}")
        raise SystemExit("apply_chat_template probe failed:\n  " + "\n  ".join(tried))

    def clock(self, tok):
        """What strftime_now('%Y-%m-%dT%H:%M:%S') renders through apply_chat_template."""
        return self.call(tok, [{"role": "user", "content": "hi"}], None, None,
                         "{{ strftime_now('%Y-%m-%dT%H:%M:%S') }}", False, {})

    def render(self, tok, template, case):
        try:
            text = self.call(tok, copy.deepcopy(case["messages"]), copy.deepcopy(case.get("tools")),
                             copy.deepcopy(case.get("documents")), template,
                             case.get("add_generation_prompt", False), copy.deepcopy(case.get("variables", {})))
        except Exception as e:  # every failure is an outcome LMX must reproduce
            import jinja2
            return {"raised": f"{type(e).__name__}: {e}", "raise_exception": type(e) is jinja2.exceptions.TemplateError}
        return {"text": text}


def agree(golden, ref):
    if "text" in golden or "text" in ref:
        return golden.get("text") == ref.get("text")
    return True


def first_difference(golden, ref):
    if "text" not in golden or "text" not in ref:
        return {"transformers": golden.get("raised", "renders"), "jinja2": ref.get("error", "renders")}
    a, b = golden["text"], ref["text"]
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    return {"at": i, "transformers": a[max(0, i - 60):i + 60], "jinja2": b[max(0, i - 60):i + 60]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--templates", default=dt.default_cache())
    ap.add_argument("--cases", default=os.path.join(ROOT, "tests", "chat", "cases"))
    ap.add_argument("--snippets", default=os.path.join(ROOT, "tests", "chat", "snippets.txt"))
    ap.add_argument("--tokenizer-cache", default=None,
                    help="model directories whose tokenizer_config.json has a chat_template (optional)")
    ap.add_argument("--now", default=DEFAULT_NOW, help="the local time strftime_now() sees")
    ap.add_argument("--device", default="", help="where this ran, for the record")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import jinja2
    import transformers
    import transformers.utils.chat_template_utils  # noqa: F401  (loaded before the clock is pinned)

    now = datetime_module.datetime.fromisoformat(args.now)

    if not os.path.isdir(args.templates) or not any(f.endswith(".jinja") for f in os.listdir(args.templates)):
        raise SystemExit(f"no chat templates in {args.templates}: run scripts/fetch_chat_templates.sh")
    case_files = sorted(f for f in os.listdir(args.cases) if f.endswith(".json"))
    cases = {}
    for c in case_files:
        with open(os.path.join(args.cases, c), encoding="utf-8") as f:
            cases[c[:-5]] = json.load(f)

    renderer = Renderer()
    model_list = dt.model_dirs(args.tokenizer_cache) if args.tokenizer_cache and os.path.isdir(args.tokenizer_cache) else []
    plain, plain_kind = special_tokenless_tokenizer(model_list)
    calling = renderer.probe(plain)
    patched = pin_clock(now)  # after the tokenizer's modules are loaded
    if renderer.clock(plain) != now.isoformat():
        # Fall back to the module whose globals strftime_now reads.
        compile_fn = getattr(transformers.utils.chat_template_utils, "_compile_jinja_template", None)
        fn = compile_fn("x").environment.globals.get("strftime_now") if compile_fn else None
        if fn is not None and hasattr(fn, "__globals__"):
            g = fn.__globals__
            shim_target = sys.modules.get(g.get("__name__", ""))
            if shim_target is not None:
                patched += pin_clock(now, extra=[shim_target])
    clock_text = renderer.clock(plain)
    if clock_text != now.isoformat():  # recorded: the date-dependent goldens are then not reproducible
        print(f"WARNING: could not pin strftime_now's clock: it renders {clock_text!r}, wanted {now.isoformat()!r}")
    # What the tokenizer itself adds to every --template rendering (it should be nothing).
    plain_special = special_tokens_of(plain)

    sources = []  # (name, kind, sha256, tokenizer, template text or None, case transform)
    for f in sorted(os.listdir(args.templates)):
        if f.endswith(".jinja"):
            with open(os.path.join(args.templates, f), encoding="utf-8", newline="") as fh:
                text = fh.read()
            sources.append((f, "template", sha256_text(text), plain, text))
    for name, text in (dt.read_snippets(args.snippets) if args.snippets else {}).items():
        sources.append(("snippet " + name, "snippet", sha256_text(text), plain, text))
    model_errors, model_special = {}, {}
    if model_list:
        for model in model_list:
            name = "model " + os.path.basename(model)
            try:
                tok = transformers.AutoTokenizer.from_pretrained(model)
            except Exception as e:  # recorded; the test then has no goldens for it
                model_errors[name] = f"{type(e).__name__}: {e}"
                continue
            sources.append((name, "model", model_sha256(model), tok, None))
            model_special[name] = special_tokens_of(tok)
        patched += pin_clock(now)  # modules the model tokenizers loaded
        clock_text = renderer.clock(plain)

    templates, differences = {}, []
    identical = raised = 0
    for name, kind, digest, tok, text in sources:
        renderings = {}
        for case_id, case in cases.items():
            if kind == "model":
                variables = {k: v for k, v in case.get("variables", {}).items() if k not in ("bos_token", "eos_token")}
                golden = renderer.render(tok, None, {**case, "variables": variables})
                ref_source, ref_case, _ = dt.model_dir_inputs(os.path.join(args.tokenizer_cache, name[6:]), case)
            else:
                golden = renderer.render(tok, text, case)
                ref_source, ref_case = text, case
            renderings[case_id] = golden
            if "text" in golden:
                identical += 1
            else:
                raised += 1
            ref = reference.render(ref_source, copy.deepcopy(ref_case))
            if not agree(golden, ref):
                differences.append({"template": name, "case": case_id, **first_difference(golden, ref)})
        templates[name] = {"kind": kind, "sha256": digest, "renderings": renderings}

    def read(path):
        return open(path).read().strip() if os.path.exists(path) else None

    meta = {
        "generator": "scripts/render_chat_goldens.py",
        "transformers": transformers.__version__,
        "jinja2": jinja2.__version__,
        "python": platform.python_version(),
        "device": args.device or platform.node(),
        "rendered_at_utc": datetime_module.datetime.now(datetime_module.timezone.utc).isoformat(timespec="seconds"),
        "now": now.isoformat(),
        "clock_pinned": clock_text == now.isoformat(),
        "clock_pinned_in": patched,
        "calling": calling,
        "template_tokenizer": plain_kind,
        "template_tokenizer_special_tokens": plain_special,
        "model_special_tokens": model_special,
        "templates_package": read(os.path.join(args.templates, "PACKAGE")),
        "templates_commit": read(os.path.join(args.templates, "COMMIT")),
        "model_load_errors": model_errors,
        "counts": {"templates": sum(1 for s in sources if s[1] == "template"),
                   "snippets": sum(1 for s in sources if s[1] == "snippet"),
                   "models": sum(1 for s in sources if s[1] == "model"),
                   "cases": len(cases), "renderings": identical + raised, "texts": identical, "raised": raised},
        "jinja2_reference_differences": differences,
    }
    out = {"meta": meta,
           "cases": {c[:-5]: sha256_file(os.path.join(args.cases, c)) for c in case_files},
           "templates": templates}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        json.dump(out, f, ensure_ascii=False, indent=1, sort_keys=False)
        f.write("\n")
    print(f"chat goldens: transformers {transformers.__version__}, {meta['counts']}, "
          f"{len(differences)} differences from the jinja2 reference, model load errors: {model_errors or 'none'}"
          f" -> {args.out}")
    for d in differences[:20]:
        print("  differs from jinja2:", json.dumps(d, ensure_ascii=False)[:400])
    return 0


if __name__ == "__main__":
    sys.exit(main())
