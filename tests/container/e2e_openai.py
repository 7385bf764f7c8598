"""Installs the `openai` npm package into a cache (~/.cache/lmx/npm, never committed) and runs
e2e_openai.mjs against lmx-server. Skips (77) when npm or the registry is unreachable."""
import os
import shutil
import subprocess
import sys

from harness import SKIP, Server, args_from_argv

OPENAI_VERSION = "4.104.0"


def install():
    cache = os.path.join(os.environ.get("LMX_CACHE_DIR",
                                        os.path.expanduser("~/.cache/lmx")), "npm")
    pkg = os.path.join(cache, "node_modules", "openai", "package.json")
    if os.path.exists(pkg):
        return os.path.join(cache, "node_modules")
    if shutil.which("npm") is None or shutil.which("node") is None:
        return None
    os.makedirs(cache, exist_ok=True)
    r = subprocess.run(["npm", "install", "--prefix", cache, "--no-audit", "--no-fund",
                        "--loglevel=error", f"openai@{OPENAI_VERSION}"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        return None
    return os.path.join(cache, "node_modules")


def main():
    a = args_from_argv()
    modules = install()
    if modules is None:
        print("SKIP: could not install the openai npm package")
        sys.exit(SKIP)
    here = os.path.dirname(os.path.abspath(__file__))
    with Server(a.server, a.plugin, a.model_dir) as s:
        r = subprocess.run(["node", os.path.join(here, "e2e_openai.mjs"), s.url, s.model],
                           env={**os.environ, "NODE_PATH": modules}, timeout=120)
        rc = r.returncode
    sys.exit(rc)


if __name__ == "__main__":
    main()
