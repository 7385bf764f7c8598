"""lmx-server under mpirun (docs/tensor-parallel.md): `mpirun -np 2 lmx-server` at
option.tensor_parallel_degree=2 serves from process 0 alone; process 1 runs its rank. The device
comes from LMX_E2E_DEVICE: cpu here and in CI; cuda on a machine with 2+ GPUs (scripts/gpu_tests.sh:
fp32, each process on the GPU of its local rank, NCCL between them).

  answers    greedy answers (LMI /invocations with one input and with a list, /v1/completions, an
             LMI stream; all at once) equal the same server's with the ranks as threads (degree 2)
             and at degree 1
  one port   only process 0 holds a socket on the HTTP port; process 1 holds none; process 1 logs
             nothing below a warning, and its lines name its rank
  shutdown   SIGTERM to process 0 while a stream runs: the stream finishes whole, every process
             exits 0 and mpirun exits 0, within a few seconds
  mismatch   2 processes for degree 1 (a degree every GPU count accepts, so on cuda too the
             process count is what is refused), and degrees that differ between the processes: mpirun
             exits non-zero, and both processes say why

Open MPI is installed by scripts/setup.sh: a machine without mpirun fails this test (as
tests/parity/mpi_ranks_test.sh does) rather than skipping it.
"""
import concurrent.futures
import http.client as http_client
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from harness import Checks, Server, args_from_argv, free_port, http

PROMPTS = ["Once upon a time", "The little dog ran", "Lily and Tom went to the park"]
SHUTDOWN_TOKENS = 400
DEGREE_ERROR = "mpirun started 2 processes but the tensor-parallel degree is 1"
DIFFERING_ERROR = ("the processes of this mpirun group were given different tensor-parallel "
                   "degrees (process 0: 2, process 1: 1)")


def mpirun_words():
    exe = shutil.which("mpirun")
    if exe is None:
        print("FAIL: mpirun is not installed (scripts/setup.sh installs Open MPI)", flush=True)
        sys.exit(1)
    words = [exe, "--oversubscribe"]
    if os.getuid() == 0:
        words.append("--allow-run-as-root")
    return words


def lmi(prompt, tokens, stream=False):
    return json.dumps({"inputs": prompt, "stream": stream, "parameters": {
        "max_new_tokens": tokens, "do_sample": False, "ignore_eos": True, "details": True}})


def post(url, path, body):
    status, _, data = http("POST", url + path, body, {"Content-Type": "application/json"},
                           timeout=300)
    return status, data


def ids_of(url, prompt, tokens):
    status, data = post(url, "/invocations", lmi(prompt, tokens))
    if status != 200:
        return f"{status} {data[:200]!r}"
    return [t["id"] for t in json.loads(data)["details"]["tokens"]]


def list_texts(url, prompts, tokens):
    body = json.dumps({"inputs": prompts, "parameters": {"max_new_tokens": tokens,
                                                         "do_sample": False, "ignore_eos": True}})
    status, data = post(url, "/invocations", body)
    return [x["generated_text"] for x in json.loads(data)] if status == 200 else f"{status}"


def completion_text(url, model, prompt, tokens):
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": tokens, "temperature": 0})
    status, data = post(url, "/v1/completions", body)
    return json.loads(data)["choices"][0]["text"] if status == 200 else f"{status} {data[:200]!r}"


def streamed_ids(url, prompt, tokens):
    status, data = post(url, "/invocations", lmi(prompt, tokens, stream=True))
    if status != 200:
        return f"{status} {data[:200]!r}"
    lines = [json.loads(x) for x in data.decode().splitlines() if x.strip()]
    return [x["token"]["id"] for x in lines if "token" in x]


def answers(s):
    """Every kind of request, all at once (they share the engine's batches)."""
    asks = {
        "lmi one": lambda: ids_of(s.url, PROMPTS[0], 24),
        "lmi one, another prompt": lambda: ids_of(s.url, PROMPTS[1], 9),
        "lmi list": lambda: list_texts(s.url, PROMPTS[1:], 12),
        "completions": lambda: completion_text(s.url, s.model, PROMPTS[2], 16),
        "lmi stream": lambda: streamed_ids(s.url, PROMPTS[2], 20),
    }
    with concurrent.futures.ThreadPoolExecutor(len(asks)) as pool:
        futures = {k: pool.submit(fn) for k, fn in asks.items()}
        return {k: f.result() for k, f in futures.items()}


def children(pid):
    """{rank: pid} of the processes mpirun (pid) started (OMPI_COMM_WORLD_RANK in their
    environment)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != pid:
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        except (OSError, ValueError, IndexError):
            continue
        if b"OMPI_COMM_WORLD_RANK" in env:
            out[int(env[b"OMPI_COMM_WORLD_RANK"])] = int(entry)
    return out


def sockets_on_port(port):
    """{inode: state} of the TCP sockets (v4 and v6) whose local port is `port`."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if int(cols[1].rsplit(":", 1)[1], 16) == port:
                    found[cols[9]] = cols[3]  # "0A" is LISTEN
    return found


def socket_inodes(pid):
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


class MpiServer(Server):
    """The server under `mpirun -np 2`; stopped by SIGTERM to process 0, as a clean shutdown is
    (a SIGTERM to mpirun makes Open MPI kill every process a second later)."""

    def ranks(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            found = children(self.proc.pid)
            if len(found) == 2:
                return found
            time.sleep(0.1)
        raise AssertionError(f"mpirun's 2 processes not found: {children(self.proc.pid)}")

    def stop(self, timeout=60):
        self.stop_rank0(timeout)

    def stop_rank0(self, timeout):
        """SIGTERM to process 0; returns (seconds until mpirun exited, its exit code)."""
        started = time.time()
        os.kill(self.ranks()[0], signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("the group did not end after SIGTERM to process 0:\n" +
                                 self.logs())
        return time.time() - started, rc


def check_one_port(c, s):
    ranks = s.ranks()
    on_port = sockets_on_port(s.port)
    leader = socket_inodes(ranks[0]) & set(on_port)
    follower = socket_inodes(ranks[1]) & set(on_port)
    c.check(any(on_port[i] == "0A" for i in leader),
            f"process 0 (pid {ranks[0]}) does not listen on port {s.port}: {on_port}")
    c.check(not follower, f"process 1 (pid {ranks[1]}) holds sockets on port {s.port}: {follower}")


def check_follower_logs(c, text):
    mine = [x for x in text.splitlines() if "[rank 1 of 2]" in x]
    quiet = all("[warning]" in x or "[error]" in x or "[critical]" in x for x in mine)
    c.check(quiet, f"process 1 logged below a warning: {mine[:5]}")
    c.check("[rank 0" not in text, "process 0's lines are tagged with a rank")


def check_shutdown(c, s):
    """SIGTERM to process 0 while a stream runs: it drains, stops the group, all exit 0."""
    conn = http_client.HTTPConnection("127.0.0.1", s.port, timeout=120)
    conn.request("POST", "/invocations", lmi(PROMPTS[0], SHUTDOWN_TOKENS, stream=True),
                 {"Content-Type": "application/json"})
    response = conn.getresponse()
    first = response.readline()  # the stream is running
    seconds, rc = s.stop_rank0(timeout=60)
    lines = [first] + response.read().splitlines()
    conn.close()
    ids = [json.loads(x)["token"]["id"] for x in lines if x.strip() and b'"token"' in x]
    c.check(len(ids) == SHUTDOWN_TOKENS,
            f"the stream in flight at SIGTERM gave {len(ids)} tokens, not {SHUTDOWN_TOKENS}")
    c.check("draining 1 in-flight requests" in s.logs(),
            f"the stream was not in flight when process 0 got SIGTERM:\n{s.logs()}")
    c.check(rc == 0, f"mpirun exited {rc} after SIGTERM to process 0:\n{s.logs()}")
    c.check(seconds < 30, f"the group took {seconds:.1f} s to end after SIGTERM to process 0")
    left = children(s.proc.pid)
    c.check(not left, f"processes left after the group ended: {left}")
    print(f"SIGTERM to process 0 during a stream: it finished, every process exited 0 "
          f"({seconds:.1f} s)", flush=True)


def check_refused(c, words, label, want):
    """A group that must not serve: mpirun exits non-zero, and both processes say `want`."""
    try:
        run = subprocess.run(words, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as e:
        c.check(False, f"{label}: the group did not end within 120 s: {e.stdout!r}")
        return
    out = run.stdout + run.stderr
    lines = [x for x in out.splitlines() if want in x]
    c.check(run.returncode != 0, f"{label}: mpirun exited 0:\n{out[-3000:]}")
    c.check(any("[rank 1 of 2] [error]" in x for x in lines) and
            any("[rank 1 of 2]" not in x for x in lines),
            f"{label}: not both processes said '{want}':\n{out[-3000:]}")
    print(f"{label}: refused by both processes (mpirun exit {run.returncode})", flush=True)


def main():
    a = args_from_argv()
    mpirun = mpirun_words()
    device = os.environ.get("LMX_E2E_DEVICE", "cpu")
    c = Checks(f"e2e_mpi ({device})")
    base = {"option.device": device}
    if device == "cuda":
        base["option.dtype"] = "fp32"  # greedy ids equal at every degree

    want = {}
    for degree in (1, 2):
        with Server(a.server, a.plugin, a.model_dir,
                    overrides={**base, "option.tensor_parallel_degree": degree}) as s:
            want[degree] = answers(s)
    c.check(want[1] == want[2], f"threads at degree 2 differ from degree 1: {want}")

    s = MpiServer(a.server, a.plugin, a.model_dir,
                  overrides={**base, "option.tensor_parallel_degree": 2},
                  launcher=[*mpirun, "-np", "2"])
    try:
        s.wait_ready(timeout=120)
        got = answers(s)
        for k, v in got.items():
            c.check(v == want[2][k] and v == want[1][k],
                    f"{k}: mpirun's {v}, threads' {want[2][k]}, degree 1's {want[1][k]}")
        status, _, body = http("GET", s.url + "/health")
        split = json.loads(body).get("tensor_parallel", {}) if status == 200 else {}
        c.check(split.get("degree") == 2, f"/health tensor_parallel {split} ({status})")
        check_one_port(c, s)
        check_shutdown(c, s)
        s.log.flush()
        s.log.seek(0)
        check_follower_logs(c, s.log.read())
    except BaseException:
        s.kill()
        sys.stderr.write("---- mpirun log ----\n" + s.logs() + "\n")
        raise
    print(f"answers: {len(got)} kinds of request at once equal threads' and degree 1's",
          flush=True)

    server = [a.server, "--model-dir", a.model_dir, "--host", "127.0.0.1", "--plugin", a.plugin,
              "--overrides", json.dumps(base)]
    check_refused(c, [*mpirun, "-np", "2", *server, "--port", str(free_port()),
                      "--tensor-parallel-degree", "1"], "2 processes for degree 1", DEGREE_ERROR)
    port = str(free_port())
    check_refused(c, [*mpirun, "-np", "1", *server, "--port", port, "--tensor-parallel-degree",
                      "2", ":", "-np", "1", *server, "--port", port],
                  "degree 2 given to process 0 only", DIFFERING_ERROR)
    c.done()


if __name__ == "__main__":
    main()
