#!/usr/bin/env python3
"""Runs an unpacked OCI image the way a container runtime does, without one: new mount and PID
namespaces (unshare), the image's root filesystem as / (chroot), the entrypoint, command,
environment, user and working directory of the image's config, volumes bind-mounted, /proc,
/dev, /sys, /tmp, and the host's network (as `docker run --network host`).
SIGTERM and SIGINT sent to this process go to the container's PID 1 (as `docker stop`); it exits
with the container's status (128+N when a signal ended it). Root only.

usage: oci_run.py (--layout DIR [--ref NAME] | --config FILE) --rootfs DIR [-v HOST:CTR[:ro]]...
                  [-e KEY=VALUE]... [--device PATH]... [--read-only] [ARG...]
       (ARGs replace the image's Cmd; --config: the image's config blob, as
       container/image/pack_for_device.sh saves it)
"""
import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time


def config_blob(layout, ref):
    """The config blob of the manifest named ref (or the only one) in an OCI image layout."""
    def blob(digest):
        algo, hexd = digest.split(":", 1)
        with open(os.path.join(layout, "blobs", algo, hexd)) as f:
            return json.load(f)
    with open(os.path.join(layout, "index.json")) as f:
        manifests = json.load(f)["manifests"]
    names = [m.get("annotations", {}).get("org.opencontainers.image.ref.name") for m in manifests]
    if ref is None and len(manifests) == 1:
        chosen = manifests[0]
    elif ref in names:
        chosen = manifests[names.index(ref)]
    else:
        sys.exit(f"oci_run: no image '{ref}' in {layout} (it has {names})")
    return blob(blob(chosen["digest"])["config"]["digest"])


def image_config(layout, ref):
    """Entrypoint, Cmd, Env, User, WorkingDir, Labels... of the image."""
    return config_blob(layout, ref).get("config", {})


def lookup(rootfs, table, name):
    """uid/gid of a name in the image's /etc/passwd or /etc/group."""
    with open(os.path.join(rootfs, "etc", table)) as f:
        for line in f:
            fields = line.strip().split(":")
            if fields[0] == name:
                return fields
    sys.exit(f"oci_run: no '{name}' in the image's /etc/{table}")


def resolve_user(rootfs, user):
    """(uid, gid, home) of the config's User: 'name', 'uid', 'name:group' or 'uid:gid'."""
    user = user or "0"
    name, _, group = user.partition(":")
    if name.isdigit():
        uid, home, gid = int(name), "/", 0
        try:
            with open(os.path.join(rootfs, "etc", "passwd")) as f:
                for line in f:
                    fields = line.strip().split(":")
                    if len(fields) > 5 and fields[2] == name:
                        gid, home = int(fields[3]), fields[5]
        except FileNotFoundError:
            pass
    else:
        fields = lookup(rootfs, "passwd", name)
        uid, gid, home = int(fields[2]), int(fields[3]), fields[5]
    if group:
        gid = int(group) if group.isdigit() else int(lookup(rootfs, "group", group)[2])
    return uid, gid, home


def build_spec(a):
    if a.config:
        with open(a.config) as f:
            cfg = json.load(f).get("config", {})
    else:
        cfg = image_config(a.layout, a.ref)
    argv = (cfg.get("Entrypoint") or []) + (a.args if a.args else (cfg.get("Cmd") or []))
    if not argv:
        sys.exit("oci_run: the image has no Entrypoint or Cmd and no command was given")
    uid, gid, home = resolve_user(a.rootfs, cfg.get("User"))
    env = dict(e.split("=", 1) for e in cfg.get("Env") or [])
    env.setdefault("HOME", home)
    for e in a.env:
        if "=" not in e:
            sys.exit(f"oci_run: -e needs KEY=VALUE, got '{e}'")
        k, v = e.split("=", 1)
        env[k] = v
    volumes = []
    for v in a.volume:
        parts = v.split(":")
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
            sys.exit(f"oci_run: -v needs HOST:CONTAINER[:ro|rw], got '{v}'")
        if not os.path.exists(parts[0]):
            sys.exit(f"oci_run: volume source {parts[0]} does not exist")
        volumes.append([os.path.abspath(parts[0]), parts[1], len(parts) == 3 and parts[2] == "ro"])
    return {"rootfs": os.path.abspath(a.rootfs), "argv": argv, "env": env, "uid": uid,
            "gid": gid, "cwd": cfg.get("WorkingDir") or "/", "volumes": volumes,
            "devices": a.device, "read_only": a.read_only}


def sh(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"oci_run: {' '.join(cmd)}: {r.stderr.strip()}")


def bind(src, root, dst, readonly):
    target = root + dst
    if os.path.isdir(src):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "a").close()
    sh("mount", "--rbind", src, target)
    if readonly:
        sh("mount", "-o", "remount,bind,ro", target)


def stage2(spec_path, pid_path):
    """Inside the new namespaces, as PID 1: mounts, then chroot and exec the entrypoint."""
    with open(spec_path) as f:
        spec = json.load(f)
    root = spec["rootfs"]
    if spec["read_only"]:  # a mount of its own, made read-only once the others are on it
        sh("mount", "--bind", root, root)
    # The host's /proc is still mounted here: /proc/self names this process in the host's PIDs.
    with open(pid_path + ".tmp", "w") as f:
        f.write(os.readlink("/proc/self"))
    os.rename(pid_path + ".tmp", pid_path)
    sh("mount", "-t", "proc", "proc", root + "/proc")
    sh("mount", "-t", "tmpfs", "-o", "nosuid,mode=755", "tmpfs", root + "/dev")
    for d in ("null", "zero", "full", "random", "urandom", "tty"):
        bind("/dev/" + d, root, "/dev/" + d, False)
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", f"{root}/dev/{name}")
    os.symlink("/proc/self/fd", root + "/dev/fd")
    os.makedirs(root + "/dev/shm")
    sh("mount", "-t", "tmpfs", "-o", "nosuid,nodev,mode=1777", "tmpfs", root + "/dev/shm")
    sh("mount", "-t", "tmpfs", "-o", "nosuid,nodev,mode=1777", "tmpfs", root + "/tmp")
    bind("/sys", root, "/sys", True)
    for f in ("/etc/resolv.conf", "/etc/hosts"):
        if os.path.exists(f):
            bind(f, root, f, True)
    for src, dst, readonly in spec["volumes"]:
        bind(src, root, dst, readonly)
    for dev in spec["devices"]:
        bind(dev, root, dev, False)
    if spec["read_only"]:
        sh("mount", "-o", "remount,bind,ro", root)
    os.chroot(root)
    os.chdir(spec["cwd"])
    os.setgroups([spec["gid"]])
    os.setgid(spec["gid"])
    os.setuid(spec["uid"])
    try:
        os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
    except OSError as e:
        sys.exit(f"oci_run: cannot run {spec['argv'][0]} in the image: {e}")


def die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--stage2":
        return stage2(sys.argv[2], sys.argv[3])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--layout", help="OCI image layout (an unpacked archive)")
    source.add_argument("--config", help="the image's config blob (JSON)")
    p.add_argument("--rootfs", required=True, help="the image's unpacked root filesystem")
    p.add_argument("--ref", help="image name in the layout (default: the only one)")
    p.add_argument("-v", "--volume", action="append", default=[])
    p.add_argument("-e", "--env", action="append", default=[])
    p.add_argument("--device", action="append", default=[])
    p.add_argument("--read-only", action="store_true",
                   help="the image's files read-only (as docker run --read-only); /tmp stays writable")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args()
    if a.args and a.args[0] == "--":
        a.args = a.args[1:]
    if os.geteuid() != 0:
        sys.exit("oci_run: needs root (namespaces, mounts, chroot)")
    spec = build_spec(a)
    tmp = tempfile.mkdtemp(prefix="oci_run.")
    spec_path, pid_path = os.path.join(tmp, "spec.json"), os.path.join(tmp, "pid")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    proc = subprocess.Popen(["unshare", "--mount", "--pid", "--fork", "--kill-child",
                             "--propagation", "private", sys.executable, os.path.abspath(__file__),
                             "--stage2", spec_path, pid_path], preexec_fn=die_with_parent)
    pending = []
    init = {}  # the container's PID 1, as the host numbers it

    def send(sig):
        try:
            os.kill(init["pid"], sig)
        except ProcessLookupError:
            pass

    def forward(sig, _frame):
        if "pid" in init:
            send(sig)
        else:
            pending.append(sig)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while proc.poll() is None:
        if "pid" not in init and os.path.exists(pid_path):
            with open(pid_path) as f:
                init["pid"] = int(f.read())
            while pending:
                send(pending.pop(0))
        time.sleep(0.02)
    for name in (spec_path, pid_path):
        if os.path.exists(name):
            os.remove(name)
    os.rmdir(tmp)
    rc = proc.returncode
    sys.exit(128 - rc if rc < 0 else rc)


if __name__ == "__main__":
    main()
