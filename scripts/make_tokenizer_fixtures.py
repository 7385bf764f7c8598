#!/usr/bin/env python3
"""Reference ids/decodes for the tokenizer tests, made with Hugging Face `tokenizers` (and
`transformers` for comparison) on the GPU machine, where they are installed.

  python3 scripts/make_tokenizer_fixtures.py --src DIR --out DIR [--bench TEXTFILE]

DIR (--src) holds one folder per tokenizer, as scripts/fetch_tokenizers.sh lays out its cache
(llama2/ llama3/ qwen3/ gpt2/ bert/) plus the shared models' tokenizer folders (stories260k/,
tinystories-656k/). Writes <out>/<name>.json per tokenizer:
  {"name", "reference": {versions}, "cases": [{"text", "ids", "ids_no_special", "decode",
   "decode_skip", "tf_ids"?, "tf_decode"?}]}
and also trains three small synthetic tokenizers (Unigram+Metaspace, WordPiece with
Whitespace/Digits/Punctuation, BPE with ByteLevel+RobertaProcessing) whose tokenizer.json goes
to <out>/synth_*.tokenizer.json, so that components the real files lack are checked too.
With --bench, also times HF `tokenizers` encoding that text with llama3 on one thread.
"""
import argparse
import json
import os
import platform
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import tokenizers  # noqa: E402
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors  # noqa: E402
from tokenizers import trainers, AddedToken  # noqa: E402

LONG_WORD = "pneumonoultramicroscopicsilicovolcanoconiosis" * 6
PROSE = ("It was the best of times, it was the worst of times, it was the age of wisdom, it was "
         "the age of foolishness, it was the epoch of belief, it was the epoch of incredulity.")

TEXTS = [
    "", " ", "  ", "\n", "Hello world", "Hello, world!", " leading space", "trailing space ",
    "multiple   spaces    here", "\t tab\tand\t\ttabs", "line\nbreak\n\nnewlines\n",
    "crlf\r\nline\r\n\r\n", "\n\n\n", "   \n  \t ", "hello    \n    world",
    "numbers 1234567890 3.14159 -42 1,000,000 007", "I'm you're they've we'll she'd it's DON'T He'S",
    "'s 't 're", "def foo(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }\n\tif(x!=y)return;",
    "    indented code", "中文分词测试，你好世界。", "日本語のテキストです", "한국어 텍스트",
    "مرحبا بالعالم", "Привет, мир!", "Ελληνικά γράμματα", "हिन्दी पाठ",
    "👨\u200d👩\u200d👧\u200d👦 family 🏳️\u200d🌈 flag 👍🏽 thumbs",
    "e\u0301 combining: cafe\u0301 nai\u0308ve", "café naïve résumé ÀÉÎÕÜ", "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ１２３",
    "ﬁ ligature ﬀ ℌ ① ² ㎏", "a\u00a0nbsp\u2009thin\u3000ideographic", "\u200bzero\u200cwidth\u200djoiner",
    "tab\tseparated\tvalues\n1\t2\t3", "The quick brown fox jumps over the lazy dog.", "!!!???...",
    "UPPER lower MiXeD CamelCaseWord snake_case_word", "http://example.com/path?q=1&r=2#frag",
    "email@example.com", "$100.00 €50 ¥1000 £20", "ctrl\u0001\u007f chars", "𝕳𝖊𝖑𝖑𝖔 ⓐⓑⓒ",
    LONG_WORD, "a" * 120, " " * 40 + "x", PROSE,
    # special-token text inside normal text (each tokenizer recognises its own)
    "<s>Hello</s> world <unk>", "Hello<s>world", "  <s>  spaced  </s>  ",
    "<|begin_of_text|>hi<|end_of_text|> <|eot_id|>", "<|im_start|>user\nhi<|im_end|>\n",
    "<|endoftext|>text<|endoftext|>", "[CLS] hello [SEP] [MASK] [UNK]",
    "<|start_story|>Once upon a time<|end_story|>", "<mask> x <mask>y [X] [X]z hello world <R> q",
    "<think>\nhmm, 2+2=4\n</think>\n\nThe answer is 4.", "<tool_call>{\"name\": \"f\"}</tool_call>",
    "\u00dcn\u00efc\u00f6d\u00e9 \u00d1O\u00d1O \u0130stanbul \u01c5 \u01c8 \u00df", "soft\u00adhyphen a\u0300\u0301\u0302 stacked",
    "1\ufe0f\u20e3 keycap \u2764\ufe0f", "Hello\u2028line\u2029sep\u000bvt\u000cff", "word " * 40,
    "x\n \n  \n\t\n", "   leading and trailing   ",
]

# llama2's vocabulary in the layout newer `tokenizers` converters write for SentencePiece BPE
# models (no normalizer; Metaspace pre-tokenizer with prepend_scheme "first", split off).
# tests/tokenizer/test_support.cpp applies the same patch to the cached file.
def llama2_metaspace(src):
    j = json.load(open(os.path.join(src, "llama2", "tokenizer.json"), encoding="utf-8"))
    j["normalizer"] = None
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                          "split": False}
    j["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
        {"type": "ByteFallback"}, {"type": "Fuse"}]}
    return Tokenizer.from_str(json.dumps(j))


def version_info():
    info = {"tokenizers": tokenizers.__version__, "python": platform.python_version(),
            "machine": platform.node()}
    try:
        import transformers
        info["transformers"] = transformers.__version__
    except Exception as e:  # noqa: BLE001
        info["transformers"] = "unavailable: %s" % e
    return info


def load_tf(path):
    """transformers' view of the same tokenizer, for comparison (None if it can't load it)."""
    try:
        from transformers import AutoTokenizer, PreTrainedTokenizerFast
        if os.path.isdir(path) and os.path.exists(os.path.join(path, "tokenizer_config.json")):
            return AutoTokenizer.from_pretrained(path)
        if os.path.isdir(path):
            from transformers import GPT2TokenizerFast
            return GPT2TokenizerFast(vocab_file=os.path.join(path, "vocab.json"),
                                     merges_file=os.path.join(path, "merges.txt"))
        return PreTrainedTokenizerFast(tokenizer_file=path)
    except Exception as e:  # noqa: BLE001
        print("transformers could not load %s: %s" % (path, e), file=sys.stderr)
        return None


def gpt2_tokenizer(d):
    """What LMX builds from a legacy vocab.json + merges.txt pair (GPT-2's layout)."""
    tok = Tokenizer(models.BPE.from_file(os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
    return tok


def cases_for(tok, tf):
    out = []
    for t in TEXTS:
        ids = tok.encode(t, add_special_tokens=True).ids
        ids_ns = tok.encode(t, add_special_tokens=False).ids
        c = {"text": t, "ids": ids, "ids_no_special": ids_ns,
             "decode": tok.decode(ids, skip_special_tokens=False),
             "decode_skip": tok.decode(ids, skip_special_tokens=True)}
        if tf is not None:
            try:
                tids = tf(t)["input_ids"]
                if tids != ids:
                    c["tf_ids"] = tids
                td = tf.decode(ids, skip_special_tokens=False)
                if td != c["decode"]:
                    c["tf_decode"] = td
            except Exception as e:  # noqa: BLE001
                c["tf_error"] = str(e)
        out.append(c)
    return out


def train_synth(out_dir):
    corpus = TEXTS * 3 + [PROSE.lower(), PROSE.upper()] * 5
    made = {}

    t = Tokenizer(models.Unigram())
    t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace("``", '"'),
                                         normalizers.Strip(left=False, right=True)])
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    t.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    t.train_from_iterator(corpus, trainers.UnigramTrainer(
        vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"], unk_token="<unk>",
        show_progress=False))
    t.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
        special_tokens=[("<s>", t.token_to_id("<s>")), ("</s>", t.token_to_id("</s>"))])
    made["synth_unigram"] = t

    t = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=30))
    t.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(),
                                         normalizers.StripAccents()])
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                               pre_tokenizers.Digits(individual_digits=True),
                                               pre_tokenizers.Punctuation()])
    t.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    t.train_from_iterator(corpus, trainers.WordPieceTrainer(
        vocab_size=400, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
        show_progress=False))
    t.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", t.token_to_id("[CLS]")), ("[SEP]", t.token_to_id("[SEP]"))])
    t.add_tokens([AddedToken("[X]", single_word=True), AddedToken("hello world", normalized=True)])
    made["synth_wordpiece"] = t

    t = Tokenizer(models.BPE(continuing_subword_prefix="", unk_token=None))
    t.normalizer = normalizers.NFKD()
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=500, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    t.post_processor = processors.RobertaProcessing(
        ("</s>", t.token_to_id("</s>")), ("<s>", t.token_to_id("<s>")),
        trim_offsets=True, add_prefix_space=True)
    t.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True),
                          AddedToken("<R>", rstrip=True, special=True)])
    made["synth_bpe"] = t

    for name, tok in made.items():
        tok.save(os.path.join(out_dir, name + ".tokenizer.json"))
    return made


def bench(src, text_path, out_dir):
    tok = Tokenizer.from_file(os.path.join(src, "llama3", "tokenizer.json"))
    text = open(text_path, encoding="utf-8").read()
    res = {"file": os.path.basename(text_path), "bytes": len(text.encode("utf-8")),
           "threads": "RAYON_NUM_THREADS=%s" % os.environ.get("RAYON_NUM_THREADS")}
    lines = [ln for ln in text.split("\n") if ln]
    for label, fn in [("whole_text", lambda: [tok.encode(text, add_special_tokens=False)]),
                      ("per_line", lambda: [tok.encode(ln, add_special_tokens=False) for ln in lines])]:
        fn()  # warm the BPE cache the same way LMX's benchmark does
        best = 1e9
        ntok = 0
        for _ in range(5):
            t0 = time.perf_counter()
            encs = fn()
            best = min(best, time.perf_counter() - t0)
            ntok = sum(len(e.ids) for e in encs)
        res[label] = {"seconds": best, "tokens": ntok, "MB_per_s": res["bytes"] / best / 1e6,
                      "Mtok_per_s": ntok / best / 1e6}
    try:
        import subprocess
        res["cpu"] = subprocess.run(["bash", "-c", "lscpu | grep 'Model name'"],
                                    capture_output=True, text=True).stdout.strip()
    except Exception:  # noqa: BLE001
        pass
    json.dump(res, open(os.path.join(out_dir, "hf_bench.json"), "w"), indent=1)
    print(json.dumps(res, indent=1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bench")
    ap.add_argument("--no-fixtures", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.bench:
        bench(a.src, a.bench, a.out)
    if a.no_fixtures:
        return
    info = version_info()
    jobs = {}
    for name in ["llama2", "llama3", "qwen3", "bert", "stories260k", "tinystories-656k"]:
        d = os.path.join(a.src, name)
        if os.path.exists(os.path.join(d, "tokenizer.json")):
            jobs[name] = (Tokenizer.from_file(os.path.join(d, "tokenizer.json")), load_tf(d))
    if "llama2" in jobs:
        jobs["llama2_metaspace"] = (llama2_metaspace(a.src), None)
    if os.path.exists(os.path.join(a.src, "gpt2", "vocab.json")):
        jobs["gpt2"] = (gpt2_tokenizer(os.path.join(a.src, "gpt2")),
                        load_tf(os.path.join(a.src, "gpt2")))
    for name, tok in train_synth(a.out).items():
        jobs[name] = (tok, None)
    for name, (tok, tf) in jobs.items():
        data = {"name": name, "reference": info, "cases": cases_for(tok, tf)}
        with open(os.path.join(a.out, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=0)
        ndiff = sum(1 for c in data["cases"] if "tf_ids" in c or "tf_decode" in c)
        print("%s: %d cases, %d differ in transformers" % (name, len(data["cases"]), ndiff))


if __name__ == "__main__":
    main()
