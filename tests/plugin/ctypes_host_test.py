#!/usr/bin/env python3
"""A host in another language than C++: Debian's python3 binds liblmx.so with ctypes (standard
library only), the way a Python or Java model server would, and calls every function that
plugin.h exports.

Sections (all by default, or --section NAME ...):
  symbols    every LMX_API function of the header resolves, and the library exports nothing else
  logging    the log callback gets the engine's lines; a log callback that calls lmx_* is refused;
             nothing ever reaches stdout (fd 1 is captured for the whole run)
  nulls      NULL arguments: INVALID_ARGUMENT naming the argument, the error body where promised
  garbage    handles that are not live (garbage values, readable garbage memory, destroyed ones,
             tokens never issued): INVALID_ARGUMENT and the error body, never a crash
  slow       a stream callback that sleeps does not stall a blocking lmx_predict or another stream
  reentrant  lmx_predict, lmx_predict_stream, lmx_cancel, lmx_health from inside a stream callback
             work; lmx_destroy there is refused
  bound      a consumer that stops reading is cancelled past option.max_stream_buffer_bytes, and
             its final chunk says why
  threads    16 threads on one handle: predict, list predict, streams, health; every answer right
  destroy    lmx_destroy under 16 threads of load: calls fail cleanly, every started stream gets
             its final chunk before destroy returns; two threads destroying one handle
  ranks      a process's rank in an mpirun group, from the launcher's environment: a lone process
             is rank 0 of 1 and may not follow; one that the environment calls rank 1 of 2 may
             not lmx_create; an environment with a size but no valid rank is refused
  cuda       loading the plugin and serving on cpu maps no CUDA library (liblmx.so needs none);
             with a CUDA build on a GPU, option.device=cuda opens liblmx_cuda.so beside it on
             demand, and a liblmx.so without it says so (without a GPU, cuda is refused first:
             cuda_on_demand_test.py runs the loader there)
At the end every header function must have been called.

usage: ctypes_host_test.py --plugin LIB --header plugin.h --model DIR [--section NAME ...]
Exit 0 when every check holds, 1 otherwise (each failure is printed). A watchdog ends a hung run
with a traceback of every thread (a deadlock is a failure, not a hang).
"""
import argparse
import ctypes
import faulthandler
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time

c_int32, c_uint64, c_size_t = ctypes.c_int32, ctypes.c_uint64, ctypes.c_size_t
c_void_p, c_char_p, POINTER, byref = ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER, ctypes.byref
CHARS = POINTER(ctypes.c_char)
STREAM_CB = ctypes.CFUNCTYPE(None, c_void_p, CHARS, c_size_t, c_int32)
LOG_CB = ctypes.CFUNCTYPE(None, c_void_p, c_int32, CHARS, c_size_t)

# Every function of plugin.h with its C signature. char** results are void** here so that the
# strings can be handed back to lmx_free_string.
SIGNATURES = {
    "lmx_abi_version": (c_int32, []),
    "lmx_last_error": (c_char_p, []),
    "lmx_last_error_field": (c_char_p, []),
    "lmx_set_log_callback": (c_int32, [LOG_CB, c_void_p, c_int32]),
    "lmx_create": (c_int32, [c_char_p, c_char_p, POINTER(c_void_p)]),
    "lmx_predict": (c_int32, [c_void_p, c_char_p, POINTER(c_void_p)]),
    "lmx_predict_stream": (c_int32, [c_void_p, c_char_p, STREAM_CB, c_void_p, POINTER(c_uint64)]),
    "lmx_cancel": (c_int32, [c_void_p, c_uint64]),
    "lmx_health": (c_int32, [c_void_p, POINTER(c_void_p)]),
    "lmx_free_string": (None, [c_void_p]),
    "lmx_destroy": (c_int32, [c_void_p]),
    "lmx_process_rank": (c_int32, [POINTER(c_int32), POINTER(c_int32)]),
    "lmx_run_follower": (c_int32, [c_char_p, c_char_p]),
}

KEEP = []  # ctypes callbacks must outlive every call the library may make to them
PROMPT = "Once upon a time"


def log(*a):
    print(*a, file=sys.stderr, flush=True)  # stdout (fd 1) is captured: the plugin must not use it


class Checks:
    def __init__(self):
        self.failures, self.count, self.lock = [], 0, threading.Lock()

    def check(self, ok, what):
        with self.lock:
            self.count += 1
            if not ok:
                self.failures.append(what)
                log("FAIL:", what)
        return ok


def parse_header(path):
    text = open(path).read()
    consts = {m[0]: int(m[1]) for m in re.findall(r"#define (LMX_\w+) (-?\d+)", text)}
    funcs = re.findall(r"LMX_API\s+[\w\s\*]+?\b(lmx_\w+)\s*\(", text)
    return consts, funcs


class Lib:
    """The plugin with typed functions; remembers which ones were called."""

    def __init__(self, path, funcs, t):
        self.dll = ctypes.CDLL(path)
        self.called, self.missing = set(), []
        for name in funcs:
            if name not in SIGNATURES:
                t.check(False, f"{name} is in plugin.h but this test does not know its signature")
                continue
            try:
                fn = getattr(self.dll, name)
            except AttributeError:
                self.missing.append(name)
                continue
            fn.restype, fn.argtypes = SIGNATURES[name]
            setattr(self, name[len("lmx_"):], self._recording(name, fn))

    def _recording(self, name, fn):
        def call(*args):
            self.called.add(name)
            return fn(*args)
        return call

    def error(self):
        return (self.last_error() or b"").decode()

    def take(self, ptr):
        """The text of a char* result, freed with lmx_free_string."""
        if not ptr.value:
            return None
        text = ctypes.string_at(ptr.value).decode()
        self.free_string(ptr)
        return text


class Run:
    def __init__(self, args, lib, consts, t):
        self.args, self.lib, self.c, self.t = args, lib, consts, t

    def st(self, name):
        return self.c["LMX_STATUS_" + name]

    def create(self, overrides=None):
        h = c_void_p()
        ov = json.dumps(overrides).encode() if overrides else None
        st = self.lib.create(self.args.model.encode(), ov, byref(h))
        if not self.t.check(st == 0 and h.value, f"lmx_create -> {st}: {self.lib.error()}"):
            raise SystemExit(1)
        return h

    def predict(self, h, request):
        out = c_void_p()
        st = self.lib.predict(h, json.dumps(request).encode(), byref(out))
        return st, self.lib.error(), self.lib.take(out)

    def stream(self, h, request, collector):
        rid = c_uint64()
        st = self.lib.predict_stream(h, json.dumps(request).encode(), collector.cb, None, byref(rid))
        return st, rid.value

    def health(self, h):
        out = c_void_p()
        st = self.lib.health(h, byref(out))
        return st, self.lib.take(out)


def request(tokens, inputs=PROMPT, **params):
    return {"inputs": inputs, "parameters": dict(max_new_tokens=tokens, **params)}


class Collector:
    """One stream's chunks; `on_chunk(collector, chunk, is_final)` runs inside the callback."""

    def __init__(self, t, on_chunk=None):
        self.t, self.on_chunk = t, on_chunk
        self.chunks, self.finals, self.done = [], 0, threading.Event()
        self.first = threading.Event()
        self.cb = STREAM_CB(self._callback)
        KEEP.append(self)

    def _callback(self, _user_data, ptr, n, is_final):
        try:
            chunk = json.loads(ctypes.string_at(ptr, n).decode())
            self.t.check(not self.done.is_set(), f"a chunk after the final one: {chunk}")
            self.chunks.append(chunk)
            self.first.set()
            if self.on_chunk:
                self.on_chunk(self, chunk, is_final)
        except Exception as e:  # a failure inside the callback is a failed check, not a crash
            self.t.check(False, f"stream callback: {e!r}")
        if is_final:
            self.finals += 1
            self.done.set()

    def final(self):
        return self.chunks[-1] if self.chunks else {}

    def text(self):
        return "".join(c["token"]["text"] for c in self.chunks if c.get("token"))


def body_of(text):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


# ---- sections --------------------------------------------------------------------------------

def section_symbols(r, funcs):
    t, lib = r.t, r.lib
    t.check(not lib.missing, f"plugin.h functions the library does not export: {lib.missing}")
    out = subprocess.run(["nm", "-D", "--defined-only", r.args.plugin], capture_output=True,
                         text=True, check=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if " T " in line or " W " in line}
    t.check(exported == set(funcs),
            f"exported functions {sorted(exported)} are not the header's {sorted(funcs)}")
    t.check(lib.abi_version() == r.c["LMX_ABI_VERSION"],
            f"lmx_abi_version {lib.abi_version()} != header {r.c['LMX_ABI_VERSION']}")


def capture_fd(fd, fn):
    """Runs fn() with file descriptor `fd` going to a temporary file; returns (result, text)."""
    sys.stderr.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), fd)
        try:
            result = fn()
        finally:
            os.dup2(saved, fd)
            os.close(saved)
        tmp.seek(0)
        return result, tmp.read().decode(errors="replace")


def section_logging(r):
    t, lib, c = r.t, r.lib, r.c
    if "lmx_set_log_callback" in lib.missing:
        return t.check(False, "logging: lmx_set_log_callback is not exported")
    lines = []
    cb = LOG_CB(lambda _u, level, ptr, n: lines.append((level, ctypes.string_at(ptr, n).decode())))
    KEEP.append(cb)
    t.check(lib.set_log_callback(cb, None, c["LMX_LOG_INFO"]) == 0, "set_log_callback(INFO)")
    h, err = capture_fd(2, r.create)
    t.check(any(lv == c["LMX_LOG_INFO"] and "engine ready" in m for lv, m in lines),
            f"the log callback did not get the engine's info line 'engine ready': {lines}")
    t.check("engine ready" not in err, f"with a log callback, lines still went to stderr: {err!r}")
    t.check(all("\n" not in m for _, m in lines), "log messages end without a newline")

    # A log callback that calls back into the library: refused, no deadlock.
    inside = []

    def reentrant(_u, _level, _ptr, _n):
        out = c_void_p()
        st = lib.predict(h, json.dumps(request(2)).encode(), byref(out))
        inside.append((st, lib.error(), lib.take(out)))
        inside.append((lib.destroy(h), lib.error(), None))
    rcb = LOG_CB(reentrant)
    KEEP.append(rcb)
    lib.set_log_callback(rcb, None, c["LMX_LOG_INFO"])
    h2 = r.create()
    lib.set_log_callback(LOG_CB(), None, c["LMX_LOG_WARN"])
    t.check(inside and all(st == r.st("INVALID_ARGUMENT") and "log callback" in e
                           for st, e, _ in inside),
            f"lmx_* from inside the log callback should be refused: {inside[:2]}")
    t.check(all(body_of(b) and body_of(b)["status"] == 1 for st, e, b in inside[::2]),
            "the refused lmx_predict has its error body")
    t.check(lib.destroy(h2) == 0 and lib.destroy(h) == 0, "the handles are destroyed afterwards")

    # Levels outside the range are refused and name it; the default writes no info to stderr.
    for bad in (-1, c["LMX_LOG_OFF"] + 1):
        t.check(lib.set_log_callback(LOG_CB(), None, bad) == r.st("INVALID_ARGUMENT") and
                str(bad) in lib.error(), f"set_log_callback level {bad}: {lib.error()}")
    h3, err = capture_fd(2, r.create)
    t.check("engine ready" not in err, f"default logging wrote info lines to stderr: {err!r}")
    lib.destroy(h3)


def section_ranks(r):
    """lmx_process_rank / lmx_run_follower and lmx_create's refusal in a follower, with the
    launcher's environment (Open MPI's variables) set and unset around the calls: nothing here
    initializes MPI, which would need a real launcher."""
    t, lib = r.t, r.lib
    inv, cfg = r.st("INVALID_ARGUMENT"), r.st("CONFIG_ERROR")
    model = r.args.model.encode()
    rank, processes = c_int32(-1), c_int32(-1)

    def place():
        st = lib.process_rank(byref(rank), byref(processes))
        return st, rank.value, processes.value, lib.error()

    t.check(place()[:3] == (0, 0, 1), f"a lone process is rank 0 of 1: {place()}")
    st = lib.run_follower(model, None)
    t.check(st == inv and "rank 0 of 1" in lib.error(),
            f"lmx_run_follower in a lone process -> {st}: {lib.error()!r}")
    st = lib.process_rank(None, byref(processes))
    t.check(st == inv and "rank" in lib.error(), f"lmx_process_rank(NULL, ..) -> {st}")
    st = lib.process_rank(byref(rank), None)
    t.check(st == inv and "processes" in lib.error(), f"lmx_process_rank(.., NULL) -> {st}")
    st = lib.run_follower(None, None)
    t.check(st == inv and "model_dir" in lib.error(), f"lmx_run_follower(NULL) -> {st}")

    saved = {k: os.environ.get(k) for k in ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK")}
    try:
        os.environ.update(OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_RANK="1")
        t.check(place()[:3] == (0, 1, 2), f"the launcher's rank 1 of 2: {place()}")
        h = c_void_p()
        st = lib.create(model, None, byref(h))
        t.check(st == inv and h.value is None and "rank 1 of 2" in lib.error() and
                "lmx_run_follower" in lib.error(),
                f"lmx_create in a follower -> {st}, handle {h.value}: {lib.error()!r}")
        os.environ["OMPI_COMM_WORLD_RANK"] = "2"
        st = place()
        t.check(st[0] == cfg and "OMPI_COMM_WORLD_RANK is 2" in st[3],
                f"a rank outside the size -> {st}")
        del os.environ["OMPI_COMM_WORLD_RANK"]
        st = place()
        t.check(st[0] == cfg and "unset" in st[3], f"a size without a rank -> {st}")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    t.check(place()[:3] == (0, 0, 1), f"rank 0 of 1 again: {place()}")


def section_nulls(r, h):
    t, lib = r.t, r.lib
    inv = r.st("INVALID_ARGUMENT")
    req = json.dumps(request(2)).encode()
    out, hh, rid = c_void_p(), c_void_p(), c_uint64(7)

    def expect(st, fn, arg, out_ptr=None):
        msg = lib.error()
        t.check(st == inv and fn in msg and arg in msg,
                f"{fn} with {arg} NULL -> status {st}, last error {msg!r}")
        if out_ptr is not None:
            b = body_of(lib.take(out_ptr))
            t.check(b is not None and b.get("status") == inv and arg in b.get("error", ""),
                    f"{fn} with {arg} NULL: error body {b}")

    expect(lib.create(None, None, byref(hh)), "lmx_create", "model_dir")
    t.check(hh.value is None, "lmx_create leaves *out_handle NULL on failure")
    expect(lib.create(r.args.model.encode(), None, None), "lmx_create", "out_handle")
    expect(lib.predict(None, req, byref(out)), "lmx_predict", "handle", out)
    expect(lib.predict(h, None, byref(out)), "lmx_predict", "request_json", out)
    expect(lib.predict(h, req, None), "lmx_predict", "response_json")
    col = Collector(t)
    expect(lib.predict_stream(None, req, col.cb, None, byref(rid)), "lmx_predict_stream", "handle")
    t.check(rid.value == 0, "lmx_predict_stream sets *request_id to 0 on failure")
    expect(lib.predict_stream(h, None, col.cb, None, byref(rid)), "lmx_predict_stream",
           "request_json")
    expect(lib.predict_stream(h, req, STREAM_CB(), None, byref(rid)), "lmx_predict_stream", "callback")
    t.check(not col.chunks, "a refused stream never calls its callback")
    ok = Collector(t)
    t.check(lib.predict_stream(h, req, ok.cb, None, None) == 0, "request_id may be NULL")
    t.check(ok.done.wait(30) and ok.finals == 1, "...and that stream finishes")
    expect(lib.cancel(None, 1), "lmx_cancel", "handle")
    expect(lib.health(None, byref(out)), "lmx_health", "handle", out)
    expect(lib.health(h, None), "lmx_health", "json")
    t.check(lib.destroy(None) == 0, "lmx_destroy(NULL) is OK")
    lib.free_string(None)
    st, _, body = r.predict(h, {"inputs": "x", "parameters": {"top_p": 2}})
    t.check(st == r.st("INVALID_REQUEST") and
            (lib.last_error_field() or b"").decode() == "parameters.top_p" and
            body_of(body)["field"] == "parameters.top_p", f"a bad field is named: {body}")


def section_garbage(r, h):
    t, lib = r.t, r.lib
    inv = r.st("INVALID_ARGUMENT")
    junk = ctypes.create_string_buffer(b"\x41" * 4096)  # readable memory full of garbage
    dead = r.create()
    t.check(lib.destroy(dead) == 0, "destroying a fresh handle")
    newer = r.create()  # a stale handle must stay invalid after new handles exist
    values = {"1": 1, "0xdeadbeef": 0xDEADBEEF, "unmapped": 0x7FFF00001000,
              "garbage memory": ctypes.addressof(junk), "destroyed": dead.value,
              "never issued": h.value + 16 * 100000, "misaligned": h.value + 1}
    for what, v in values.items():
        g = c_void_p(v)
        st, err, body = r.predict(g, request(2))
        t.check(st == inv and "not a live handle" in err, f"predict on {what} handle: {st} {err!r}")
        t.check((body_of(body) or {}).get("status") == inv, f"predict on {what}: body {body}")
        col = Collector(t)
        st, _ = r.stream(g, request(2), col)
        t.check(st == inv and not col.chunks, f"predict_stream on {what} handle: {st}")
        t.check(lib.cancel(g, 1) == inv, f"cancel on {what} handle")
        st, body = r.health(g)
        t.check(st == inv and (body_of(body) or {}).get("status") == inv,
                f"health on {what} handle: {st} {body}")
        t.check(lib.destroy(g) == inv and "not a live handle" in lib.error(),
                f"destroy on {what} handle: {lib.error()!r}")
    st, _, body = r.predict(newer, request(2))
    t.check(st == 0, f"the live handle still works after all that: {st} {body}")
    lib.destroy(newer)


def section_slow(r, h):
    t = r.t
    release = threading.Event()
    slow = Collector(t, lambda col, chunk, final: release.wait(3.0) if not final else None)
    st, _ = r.stream(h, request(6, ignore_eos=True), slow)
    t.check(st == 0 and slow.first.wait(30), "the slow stream starts")
    # Its callback is now asleep for up to 3 s. Other requests on the handle must not wait for it.
    t0 = time.monotonic()
    st, err, body = r.predict(h, request(5))
    took = time.monotonic() - t0
    t.check(st == 0 and took < 1.5,
            f"a 5-token lmx_predict took {took:.2f} s while another request's callback slept "
            f"(status {st} {err}); it must not wait for the slow callback (limit 1.5 s)")
    fast = Collector(t)
    t0 = time.monotonic()
    st, _ = r.stream(h, request(5), fast)
    t.check(st == 0 and fast.done.wait(1.5),
            f"a fast stream beside the slow one finished in {time.monotonic() - t0:.2f} s "
            "(limit 1.5 s)")
    t.check(not slow.done.is_set(), "the slow stream is still being delivered meanwhile")
    release.set()
    t.check(slow.done.wait(30) and slow.finals == 1, "the slow stream ends with one final chunk")
    f = slow.final()
    t.check(f.get("details", {}).get("generated_tokens") == 6 and
            slow.text() == f.get("generated_text"),
            f"the slow stream got every chunk in order: {slow.text()!r} vs {f}")


def section_reentrant(r, h):
    t, lib = r.t, r.lib
    got = {}

    def inside(col, chunk, final):
        if len(col.chunks) != 1:
            return
        got["predict"] = r.predict(h, request(4))
        inner = Collector(t)
        got["stream"] = r.stream(h, request(3), inner)
        got["inner"] = inner
        got["health"] = r.health(h)[0]
        got["cancel"] = lib.cancel(h, 987654321)
        got["destroy"] = (lib.destroy(h), lib.error())
    outer = Collector(t, inside)
    st, _ = r.stream(h, request(4), outer)
    t.check(st == 0 and outer.done.wait(30),
            "a stream whose callback calls lmx_predict on its own handle finishes (no deadlock)")
    p = got.get("predict", (None, "", None))
    t.check(p[0] == 0 and "generated_text" in (body_of(p[2]) or {}),
            f"lmx_predict from inside a stream callback: {p}")
    t.check(got.get("stream", (None,))[0] == 0 and got["inner"].done.wait(30) and
            got["inner"].finals == 1, "lmx_predict_stream from inside a stream callback")
    t.check(got.get("health") == 0, "lmx_health from inside a stream callback")
    t.check(got.get("cancel") == r.st("NOT_FOUND"), "lmx_cancel from inside a stream callback")
    d = got.get("destroy", (None, ""))
    t.check(d[0] == r.st("INVALID_ARGUMENT") and "stream callback" in d[1],
            f"lmx_destroy from inside a stream callback is refused: {d}")
    t.check(r.predict(h, request(2))[0] == 0, "the handle survives the refused destroy")


def section_bound(r):
    t = r.t
    limit = 4096
    h = r.create({"option.max_stream_buffer_bytes": limit})
    gate = threading.Event()
    stuck = Collector(t, lambda col, chunk, final: gate.wait(30) if len(col.chunks) == 1 else None)
    st, _ = r.stream(h, request(300, ignore_eos=True), stuck)
    t.check(st == 0 and stuck.first.wait(30), "the stuck stream starts")
    cancelled, peak, deadline = 0, 0, time.monotonic() + 30
    while time.monotonic() < deadline:
        _, text = r.health(h)
        s = json.loads(text)["streams"]
        peak = max(peak, s["buffered_bytes"])
        cancelled = s["slow_consumers_cancelled"]
        if cancelled:
            break
        time.sleep(0.01)
    t.check(cancelled == 1, f"a consumer that stopped reading is cancelled past {limit} bytes")
    gate.set()
    t.check(stuck.done.wait(30) and stuck.finals == 1, "the stuck stream still gets its final chunk")
    f = stuck.final()
    # The final chunk (it carries the whole generated_text) is queued whatever the bound.
    final_bytes = len(json.dumps(f, separators=(",", ":")).encode())
    t.check(peak <= limit + final_bytes,
            f"at most {limit} bytes + the final chunk ({final_bytes}) waited (peak {peak})")
    t.check(f.get("details", {}).get("finish_reason") == "cancelled" and
            "option.max_stream_buffer_bytes" in f.get("error", ""),
            f"the final chunk says why: {f.get('details')} {f.get('error')!r}")
    t.check(len(stuck.chunks) < 300, f"later chunks were dropped ({len(stuck.chunks)} delivered)")
    t.check(r.predict(h, request(3))[0] == 0, "the handle serves on")
    r.lib.destroy(h)


def section_threads(r, h):
    t = r.t
    ref = body_of(r.predict(h, request(12))[2])["generated_text"]
    errors = []

    def worker(i):
        for k in range(4):
            kind = (i + k) % 4
            if kind == 0:
                st, err, body = r.predict(h, request(12))
                ok = st == 0 and body_of(body)["generated_text"] == ref
            elif kind == 1:
                col = Collector(t)
                st, _ = r.stream(h, request(12), col)
                ok = st == 0 and col.done.wait(60) and col.finals == 1 and \
                    col.text() == col.final().get("generated_text") == ref
                err = col.final()
            elif kind == 2:
                st, body = r.health(h)
                ok = st == 0 and "streams" in json.loads(body)
                err = body
            else:
                st, err, body = r.predict(h, request(12, inputs=[PROMPT, PROMPT]))
                ok = st == 0 and [x["generated_text"] for x in body_of(body)] == [ref, ref]
            if not ok:
                errors.append(f"thread {i} kind {kind}: status {st} {str(err)[:200]}")
    slow = Collector(t, lambda col, chunk, final: time.sleep(0.05))
    r.stream(h, request(20), slow)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    t.check(not any(th.is_alive() for th in threads), "16 threads finish")
    t.check(not errors, f"16 threads on one handle, every answer equal to the reference: {errors}")
    t.check(slow.done.wait(30), "the slow stream beside them finishes")


def section_destroy(r):
    t, lib = r.t, r.lib
    inv, unavailable = r.st("INVALID_ARGUMENT"), r.st("UNAVAILABLE")
    h = r.create()
    started, bad, stop = [], [], threading.Event()
    counts = {"ok": 0, "refused": 0}
    lock = threading.Lock()

    def hammer(i):
        rng = random.Random(i)
        while True:
            op = rng.randrange(4)
            if op == 0:
                st, err, body = r.predict(h, request(8))
                fine = st in (0, unavailable, inv) and (st != 0 or "generated_text" in body)
            elif op == 1:
                col = Collector(t, (lambda c, ch, f: time.sleep(0.005)) if i % 2 else None)
                st, _ = r.stream(h, request(8), col)
                if st == 0:
                    with lock:
                        started.append(col)
                fine = st in (0, unavailable, inv)
                err = lib.error()
            elif op == 2:
                st, body = r.health(h)
                fine = st in (0, inv)
                err = body
            else:
                st = lib.cancel(h, rng.randrange(1, 200))
                fine = st in (0, r.st("NOT_FOUND"), inv)
                err = lib.error()
            with lock:
                counts["ok" if st == 0 else "refused"] += 1
            if not fine:
                bad.append(f"op {op}: status {st} {str(err)[:200]}")
            if st == inv:
                if "not a live handle" not in lib.error():
                    bad.append(f"op {op} after destroy: {lib.error()!r}")
                return
            if stop.is_set():
                return

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(16)]
    for th in threads:
        th.start()
    deadline = time.monotonic() + 30  # destroy once the load is real, however slow the machine
    while counts["ok"] < 48 and time.monotonic() < deadline:
        time.sleep(0.01)
    st = lib.destroy(h)
    after = [c for c in list(started) if not c.done.is_set()]
    t.check(st == 0, f"lmx_destroy under load -> {st}: {lib.error()}")
    stop.set()
    for th in threads:
        th.join(60)
    t.check(not any(th.is_alive() for th in threads), "the 16 threads end")
    t.check(not bad, f"calls racing lmx_destroy fail cleanly: {bad[:5]}")
    t.check(not after, f"{len(after)} streams had no final chunk when lmx_destroy returned")
    t.check(all(c.finals == 1 for c in started), "every started stream got exactly one final chunk")
    t.check(counts["ok"] >= 48, f"the load was real: {counts}")
    log(f"destroy under load: {counts['ok']} calls OK, {counts['refused']} refused, "
        f"{len(started)} streams")
    st, err, body = r.predict(h, request(2))
    t.check(st == inv and (body_of(body) or {}).get("status") == inv,
            f"a destroyed handle is refused with the error body: {st} {body}")

    # Two threads destroy one handle: one succeeds, the other is told the handle is not live.
    h2 = r.create()
    results = []
    both = [threading.Thread(target=lambda: results.append(lib.destroy(h2))) for _ in range(2)]
    for th in both:
        th.start()
    for th in both:
        th.join(60)
    t.check(sorted(results) == [0, inv], f"two threads destroying one handle: {results}")


CUDA_LIBS = ("libcudart", "libcublas", "libcublasLt", "libnccl")


def cuda_mapped():
    """The CUDA libraries mapped into this process now."""
    maps = open("/proc/self/maps").read()
    return sorted({lib for lib in CUDA_LIBS if "/" + lib in maps})


def try_create(r, overrides):
    h = c_void_p()
    st = r.lib.create(r.args.model.encode(), json.dumps(overrides).encode(), byref(h))
    return st, r.lib.error(), h


ALONE = """import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
lib.lmx_create.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
lib.lmx_last_error.restype = ctypes.c_char_p
h = ctypes.c_void_p()
st = lib.lmx_create(sys.argv[2].encode(), json.dumps({"option.device": "cuda"}).encode(),
                    ctypes.byref(h))
print(json.dumps({"status": st, "error": lib.lmx_last_error().decode()}))
"""


def section_cuda(r):
    t = r.t
    needed = subprocess.run(["readelf", "-d", r.args.plugin], capture_output=True, text=True,
                            check=True).stdout
    t.check(not any(lib in needed for lib in CUDA_LIBS),
            f"liblmx.so must not need a CUDA library: {needed}")
    # option.device defaults to auto, which is cuda where a GPU is visible: ask for cpu by name.
    h = r.create({"option.device": "cpu"})
    t.check(r.predict(h, request(2))[0] == 0, "a cpu model serves")
    t.check(not cuda_mapped(), f"CUDA libraries mapped by a cpu host: {cuda_mapped()}")
    r.lib.destroy(h)
    beside = os.path.join(os.path.dirname(os.path.abspath(r.args.plugin)), "liblmx_cuda.so")
    if not os.path.exists(beside):
        st, err, _ = try_create(r, {"option.device": "cuda"})
        t.check(st == r.st("CONFIG_ERROR") and "cuda" in err,
                f"a build without CUDA refuses option.device=cuda when configuring: {st} {err!r}")
        log(f"   (no {beside}: a build without CUDA, so there is no backend to open on demand)")
        return
    # With it: opened when a model runs on cuda. Where no GPU is visible, the configuration
    # refuses cuda first (tests/plugin/cuda_on_demand_test.py runs the loader there instead).
    st, err, h = try_create(r, {"option.device": "cuda"})
    if st != 0:
        t.check(st == r.st("CONFIG_ERROR") and "GPU" in err,
                f"cuda on a machine without a GPU is refused, saying so: {st} {err!r}")
        t.check(not cuda_mapped(), f"CUDA mapped by a refused cuda model: {cuda_mapped()}")
        log("   (no GPU visible: a cuda model is refused before the CUDA backend would be opened)")
        return
    t.check(r.predict(h, request(2))[0] == 0, "a cuda model serves through the plugin")
    r.lib.destroy(h)
    t.check("libcudart" in cuda_mapped(), f"cuda opened the CUDA libraries: {cuda_mapped()}")
    # liblmx.so alone in a directory: cuda fails, naming the library it could not open.
    with tempfile.TemporaryDirectory() as d:
        alone = os.path.join(d, "liblmx.so")
        with open(r.args.plugin, "rb") as src, open(alone, "wb") as dst:
            dst.write(src.read())
        out = subprocess.run([sys.executable, "-c", ALONE, alone, r.args.model],
                             capture_output=True, text=True, timeout=120)
        res = json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else {}
        t.check(res.get("status") == r.st("LOAD_ERROR") and
                os.path.join(d, "liblmx_cuda.so") in res.get("error", "") and
                "could not be loaded" in res.get("error", ""),
                f"without liblmx_cuda.so, cuda names it: {res} {out.stderr[-500:]}")


SECTIONS = ["symbols", "logging", "nulls", "garbage", "slow", "reentrant", "bound", "threads",
            "destroy", "ranks", "cuda"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--header", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--section", action="append", choices=SECTIONS)
    ap.add_argument("--timeout", type=float, default=240)
    args = ap.parse_args()
    faulthandler.dump_traceback_later(args.timeout, exit=True)  # a deadlock fails the run

    # The plugin must never write to stdout: fd 1 goes to a file for the whole run.
    saved_stdout = os.dup(1)
    captured = tempfile.TemporaryFile()
    os.dup2(captured.fileno(), 1)

    t = Checks()
    consts, funcs = parse_header(args.header)
    lib = Lib(args.plugin, funcs, t)
    r = Run(args, lib, consts, t)
    sections = args.section or SECTIONS
    h = None
    for name in sections:
        log(f"-- {name}")
        started = time.monotonic()
        if name in ("nulls", "garbage", "slow", "reentrant", "threads") and h is None:
            h = r.create({"option.max_tokens": 512})
        fn = globals()["section_" + name]
        if name == "symbols":
            fn(r, funcs)
        elif name in ("logging", "bound", "destroy", "ranks", "cuda"):
            fn(r)
        else:
            fn(r, h)
        log(f"   {time.monotonic() - started:.2f} s")
    if h is not None:
        t.check(lib.destroy(h) == 0, "the shared handle is destroyed at the end")
    if args.section is None:
        uncalled = sorted(set(funcs) - lib.called)
        t.check(not uncalled, f"header functions never called: {uncalled}")

    sys.stdout.flush()
    os.dup2(saved_stdout, 1)
    captured.seek(0)
    written = captured.read().decode(errors="replace")
    t.check(written == "", f"the plugin wrote to stdout: {written[:500]!r}")
    log(f"{t.count} checks, {len(t.failures)} failed")
    faulthandler.cancel_dump_traceback_later()
    sys.exit(1 if t.failures else 0)


if __name__ == "__main__":
    main()
