#!/usr/bin/env python3
"""`layerfs exec` against a real daemon and real mounts: exit statuses (signals as 128+N),
stdin/stdout/stderr passthrough, the temporary mount and its cleanup, --commit contents, a commit
REF forked first, a mounted branch used in place, --mountpoint, --json, SIGTERM forwarded; and
--isolate: the Workspace writable at /workspace and nothing else of the host (tried: /etc, /root,
the host's /tmp, the Store), --no-network.

Usage: exec_test.py BUILD/layerfs
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from lfs import Env, check, is_mounted, wait_for  # noqa: E402


def exec_(env: Env, *args: str, input: bytes | None = None):
    return env.run("exec", *args, check_rc=False, input=input)


def statuses_and_passthrough(env: Env) -> None:
    env.run("init", env.store)
    env.run("fork", "work")
    check(exec_(env, "work", "--", "sh", "-c", "exit 3").returncode == 3, "exit 3")
    check(exec_(env, "work", "--", "true").returncode == 0, "true")
    check(exec_(env, "work", "--", "sh", "-c", "kill -TERM $$").returncode == 128 + signal.SIGTERM, "SIGTERM as 143")
    check(exec_(env, "work", "--", "sh", "-c", "kill -KILL $$").returncode == 128 + signal.SIGKILL, "SIGKILL as 137")
    p = exec_(env, "work", "--", "no-such-command-xyz")
    check(p.returncode == 127 and b"no-such-command-xyz" in p.stderr, f"not found: {p.returncode} {p.stderr!r}")
    p = exec_(env, "nosuch", "--", "true")
    check(p.returncode == 125 and b"nosuch" in p.stderr, f"unknown REF: {p.returncode} {p.stderr!r}")

    # stdin, stdout, stderr pass through; the working directory is the Workspace's mount, a
    # temporary one gone after the run.
    p = exec_(env, "work", "--", "sh", "-c", "cat > in.txt; cat in.txt; echo to-stderr >&2; pwd",
              input=b"fed through stdin\n")
    check(p.returncode == 0, f"{p.stderr!r}")
    out = p.stdout.decode().splitlines()
    check(out[0] == "fed through stdin", f"stdout {out}")
    mp = out[1]
    check(mp.startswith("/") and "layerfs-exec." in mp, f"pwd {mp}")
    check(b"to-stderr" in p.stderr, f"stderr {p.stderr!r}")
    check(not os.path.exists(mp) and not is_mounted(mp), "the temporary mountpoint is left behind")
    check(env.json("mounts") == [], "still mounted")
    # Nothing was committed without --commit, but the Workspace kept the file.
    check(len(env.json("log", "work")) == 1, "exec committed without --commit")
    check({c["path"] for c in env.json("status", "work")["changes"]} == {"in.txt"}, "the Workspace lost in.txt")

    # --commit: what CMD left, with the message, the id on stderr; whatever the exit status.
    p = exec_(env, "work", "--commit", "-m", "built it", "--", "sh", "-c", "echo built > out.txt; exit 4")
    check(p.returncode == 4, f"{p.returncode} {p.stderr!r}")
    line = [l for l in p.stderr.decode().splitlines() if l.startswith("commit ")]
    check(len(line) == 1, f"no commit id on stderr: {p.stderr!r}")
    cid = line[0].split()[1]
    check(env.run("cat", f"{cid}:out.txt").stdout == b"built\n", "committed content")
    check(env.run("cat", f"{cid}:in.txt").stdout == b"fed through stdin\n", "earlier changes committed too")
    log = env.json("log", "work")
    check(log[0]["id"] == cid and log[0]["message"] == "built it", f"log {log[0]}")
    p = exec_(env, "work", "--commit", "--", "touch", "t")
    check(env.json("log", "work", "-n", "1")[0]["message"] == "exec: touch t", "default message")

    # --json: one line after CMD's own output.
    p = exec_(env, "work", "--commit", "--json", "--", "sh", "-c", "echo hi; echo x > j.txt")
    lines = p.stdout.decode().splitlines()
    check(lines[0] == "hi", f"{lines}")
    j = json.loads(lines[-1])
    check(j["exit_code"] == 0 and j["branch"] == "work" and j["mounted"] is True and j["forked"] is False and
          j["signal"] is None and len(j["commit"]) == 32, f"{j}")
    check(env.run("cat", f"{j['commit']}:j.txt").stdout == b"x\n", "json commit content")
    j = json.loads(exec_(env, "work", "--json", "--", "sh", "-c", "kill -INT $$").stdout.decode().splitlines()[-1])
    check(j["exit_code"] == 130 and j["signal"] == "INT" and j["commit"] is None, f"{j}")

    # A commit REF is forked first, under a printed name.
    p = exec_(env, cid, "--commit", "--", "sh", "-c", "test -f out.txt && echo y > y.txt")
    check(p.returncode == 0, f"{p.stderr!r}")
    forked = [l for l in p.stderr.decode().splitlines() if "forked" in l]
    check(len(forked) == 1 and cid in forked[0], f"{p.stderr!r}")
    name = forked[0].split()[-1]
    check(name in [b["name"] for b in env.json("branch")], f"no branch {name}")
    check(env.json("log", name)[0]["parents"] == [cid], "the fork's commit has the REF as parent")
    p = exec_(env, cid, "--", "true")
    again = [l.split()[-1] for l in p.stderr.decode().splitlines() if "forked" in l]
    check(len(again) == 1 and again[0] != name, f"a second fork got the same name: {p.stderr!r}")

    # A mounted branch runs in its mount and stays mounted.
    mp = env.mountpoint("mp")
    env.run("mount", "work", mp)
    p = exec_(env, "work", "--", "sh", "-c", "pwd; touch here")
    check(p.stdout.decode().strip() == mp and os.path.exists(os.path.join(mp, "here")) and is_mounted(mp), f"{p}")
    # HEAD in a mount is its branch: the run is there, nothing is forked.
    branches = {b["name"] for b in env.json("branch")}
    os.makedirs(os.path.join(mp, "sub"), exist_ok=True)
    p = env.run("exec", "HEAD", "--", "pwd", check_rc=False, cwd=os.path.join(mp, "sub"))
    check(p.returncode == 0 and p.stdout.decode().strip() == mp and b"forked" not in p.stderr, f"exec HEAD: {p}")
    check({b["name"] for b in env.json("branch")} == branches, "exec HEAD forked a branch")
    p = exec_(env, "work", "--mountpoint", env.path("elsewhere"), "--", "true")
    check(p.returncode == 125 and b"mounted at" in p.stderr, f"{p.stderr!r}")
    env.run("umount", mp)

    # --mountpoint: created if absent, removed after when it was created.
    mine = env.path("mine")
    p = exec_(env, "work", "--mountpoint", mine, "--", "pwd")
    check(p.stdout.decode().strip() == mine and not os.path.exists(mine), f"{p}")
    os.mkdir(mine)
    p = exec_(env, "work", "--mountpoint", mine, "--", "pwd")
    check(p.returncode == 0 and os.path.isdir(mine) and not is_mounted(mine), "an existing mountpoint is kept")

    # SIGTERM to exec reaches CMD, and exec still unmounts.
    proc = subprocess.Popen([env.layerfs, "exec", "work", "--", "sh", "-c", "echo started; sleep 60"], env=env.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=env.work)
    check(proc.stdout.readline() == b"started\n", "the command did not start")
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=60)
    check(rc == 128 + signal.SIGTERM, f"exec after SIGTERM: {rc}")
    check(env.json("mounts") == [], "SIGTERM left the mount")


def isolation(env: Env) -> None:
    env.run("init", env.store)
    env.run("fork", "iso")
    # The Workspace is writable at /workspace, the working directory.
    p = exec_(env, "iso", "--isolate", "--commit", "--", "sh", "-c", "pwd; echo inside > made.txt")
    check(p.returncode == 0 and p.stdout.decode().strip() == "/workspace", f"{p.returncode} {p.stderr!r}")
    cid = env.json("log", "iso")[0]["id"]
    check(env.run("cat", f"{cid}:made.txt").stdout == b"inside\n", "a write in /workspace was not committed")
    check(exec_(env, "iso", "--isolate", "--", "sh", "-c", "exit 5").returncode == 5, "exit status through bwrap")
    check(exec_(env, "iso", "--isolate", "--", "sh", "-c", "kill -TERM $$").returncode == 143, "signal through bwrap")

    # Nothing else of the host is writable: tried one by one.
    marker = f"layerfs-iso-{os.getpid()}"
    host_tmp = os.path.join("/tmp", marker)
    store_file = os.path.join(env.store, marker)
    for target in (f"/etc/{marker}", f"/root/{marker}", f"/usr/{marker}", f"/var/tmp/{marker}", host_tmp, store_file,
                   os.path.join(env.work, marker)):
        p = exec_(env, "iso", "--isolate", "--", "sh", "-c", f"echo x > '{target}'")
        if target == host_tmp:
            # /tmp inside is a private tmpfs: the write succeeds there and never reaches the host.
            check(p.returncode == 0, f"{target}: {p.stderr!r}")
        else:
            check(p.returncode != 0, f"wrote {target} from the sandbox")
        check(not os.path.exists(target), f"{target} exists on the host")
    # The Store is not even visible (its data, its control socket).
    p = exec_(env, "iso", "--isolate", "--", "sh", "-c", f"ls -A '{env.store}'")
    check(p.returncode == 0 and p.stdout.strip() == b"", f"the Store is visible inside: {p.stdout!r} {p.stderr!r}")
    p = exec_(env, "iso", "--isolate", "--", "sh", "-c", "mount -o remount,rw / 2>&1; touch /etc/x 2>&1; id -u")
    check(not os.path.exists("/etc/x"), "remounted the host read-write")
    # The system is readable.
    check(exec_(env, "iso", "--isolate", "--", "test", "-r", "/etc/passwd").returncode == 0, "/etc unreadable")
    # Processes of the host are not visible.
    p = exec_(env, "iso", "--isolate", "--", "sh", "-c", "ls /proc | grep -c '^[0-9]'")
    check(int(p.stdout) < 10, f"host processes visible: {p.stdout!r}")

    # Network: reachable without --no-network, not with it.
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
                c.sendall(b"hello\n")
                c.close()
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    probe = (f"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=5); "
             "print(s.recv(10).decode().strip())")
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    try:
        p = exec_(env, "iso", "--isolate", "--", py, "-c", probe)
        check(p.returncode == 0 and p.stdout.strip() == b"hello", f"network without --no-network: {p.stderr!r}")
        p = exec_(env, "iso", "--isolate", "--no-network", "--", py, "-c", probe)
        check(p.returncode != 0 and b"hello" not in p.stdout, "reached the host's network with --no-network")
        p = exec_(env, "iso", "--isolate", "--no-network", "--", "cat", "/proc/net/dev")
        ifaces = {l.split(":")[0].strip() for l in p.stdout.decode().splitlines()[2:]}
        check(ifaces == {"lo"}, f"interfaces with --no-network: {ifaces}")
    finally:
        stop.set()
        t.join()
        srv.close()
    check(exec_(env, "iso", "--no-network", "--", "true").returncode == 125, "--no-network without --isolate")
    check(env.json("mounts") == [], "isolation left a mount")


def main() -> None:
    layerfs = sys.argv[1]
    with Env(layerfs) as env:
        statuses_and_passthrough(env)
    print("ok statuses_and_passthrough")
    # A Store outside /tmp, so that hiding it is tested (/tmp is a private tmpfs inside anyway).
    with Env(layerfs, base="/var/tmp") as env:
        isolation(env)
    print("ok isolation")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
