"""Helpers for the control-protocol, exec and MCP tests: a scratch Store, the CLI, a raw protocol
client, mounts that are always cleaned up. Standard library only.

Usage: each test script calls `with Env(sys.argv[1]) as env: ...` (argv[1] is the built
`layerfs`; `layerfsd` sits beside it). Leaving the block unmounts what the test mounted and stops
the Store's daemon by its pid file, even when the test failed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def fail(msg: str) -> None:
    raise AssertionError(msg)


def check(cond: bool, msg: str) -> None:
    if not cond:
        fail(msg)


def wait_for(cond, what: str, seconds: float = 60.0) -> None:
    """Polls cond() until it holds; fails naming `what` after `seconds` (never a timed assertion
    on speed: the bound only stops a hung test)."""
    end = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > end:
            fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def is_mounted(path: str) -> bool:
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Client:
    """A raw protocol connection: one JSON line out, lines back."""

    def __init__(self, store: str):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(os.path.join(store, "control.sock"))
        self.f = self.sock.makefile("rwb")
        self.next_id = 1

    def send_raw(self, data: bytes) -> None:
        self.f.write(data)
        self.f.flush()

    def read(self) -> dict | None:
        try:
            line = self.f.readline()
        except ConnectionResetError:  # the daemon closed with our unread bytes in its queue
            return None
        if not line:
            return None
        check(line.endswith(b"\n"), f"a message without its newline: {line[:200]!r}")
        return json.loads(line)

    def request(self, verb: str, args: dict | None = None, cwd: str | None = None):
        """Sends a request; returns (events, final response)."""
        rid = self.next_id
        self.next_id += 1
        msg = {"protocol": 1, "id": rid, "verb": verb}
        if args is not None:
            msg["args"] = args
        if cwd is not None:
            msg["cwd"] = cwd
        self.send_raw(json.dumps(msg).encode() + b"\n")
        events = []
        while True:
            m = self.read()
            check(m is not None, f"{verb}: connection closed before the response")
            check(m.get("id") == rid, f"{verb}: message for another request: {m}")
            if "event" in m:
                events.append(m)
                continue
            return events, m

    def call(self, verb: str, args: dict | None = None, cwd: str | None = None):
        """The result of a verb that must succeed."""
        _, m = self.request(verb, args, cwd)
        check(m.get("ok") is True, f"{verb} {args}: {m}")
        return m["result"]

    def error(self, verb: str, args: dict | None = None, cwd: str | None = None) -> dict:
        """The error object of a verb that must fail."""
        _, m = self.request(verb, args, cwd)
        check(m.get("ok") is False, f"{verb} {args} should have failed: {m}")
        return m["error"]

    def close(self) -> None:
        self.f.close()
        self.sock.close()


class Env:
    def __init__(self, layerfs: str, base: str | None = None):
        self.layerfs = os.path.realpath(layerfs)
        self.layerfsd = os.path.join(os.path.dirname(self.layerfs), "layerfsd")
        self.work = os.path.realpath(tempfile.mkdtemp(prefix="layerfs-proto.", dir=base))
        self.store = os.path.join(self.work, "store")
        self.mounts: list[str] = []
        self.env = dict(os.environ, LAYERFS_STORE=self.store)

    def __enter__(self) -> "Env":
        return self

    def __exit__(self, *exc) -> None:
        for mp in self.mounts:
            if is_mounted(mp):
                subprocess.run([self.layerfs, "umount", mp], env=self.env, capture_output=True, timeout=30)
        for mp in self.mounts:
            for _ in range(3):
                if not is_mounted(mp):
                    break
                subprocess.run(["fusermount3", "-u", "-z", mp], capture_output=True)
        pid = self.daemon_pid()
        if pid and alive(pid):
            os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                if not alive(pid):
                    break
                time.sleep(0.05)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if exc[0] is not None and os.path.exists(os.path.join(self.store, "layerfsd.log")):
            with open(os.path.join(self.store, "layerfsd.log")) as f:
                print("--- tail of layerfsd.log\n" + "".join(f.readlines()[-30:]))
        shutil.rmtree(self.work, ignore_errors=True)

    def path(self, *parts: str) -> str:
        return os.path.join(self.work, *parts)

    def mountpoint(self, name: str) -> str:
        mp = self.path(name)
        os.makedirs(mp, exist_ok=True)
        self.mounts.append(os.path.realpath(mp))
        return os.path.realpath(mp)

    def run(self, *args: str, check_rc: bool = True, input: bytes | None = None, cwd: str | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess:
        p = subprocess.run([self.layerfs, *args], env=env or self.env, capture_output=True, input=input,
                           cwd=cwd or self.work, timeout=300)
        if check_rc and p.returncode != 0:
            fail(f"layerfs {' '.join(args)}: exit {p.returncode}: {p.stderr.decode(errors='replace')}")
        return p

    def json(self, *args: str):
        return json.loads(self.run(*args, "--json").stdout)

    def daemon_pid(self) -> int | None:
        try:
            with open(os.path.join(self.store, "layerfsd.pid")) as f:
                return int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def start_daemon(self, *extra: str) -> int:
        subprocess.run([self.layerfsd, "--store", self.store, *extra], check=True, timeout=60)
        pid = self.daemon_pid()
        check(pid is not None and alive(pid), "layerfsd did not start")
        return pid

    def client(self) -> Client:
        return Client(self.store)
