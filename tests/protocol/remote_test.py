#!/usr/bin/env python3
"""The remote verbs through the control protocol and MCP, while mounts are live (file:// remotes).

Host A's daemon serves a mount of main; through its socket: remote_add, remote_list, push with
progress events (phase, objects, bytes, rate, a final `done`), clone (made by the daemon, into a
new Store), and the refusals with their codes and results (EEXIST, ENOENT, EINVAL,
NOT_FAST_FORWARD carrying the push's result, DIVERGED for another history). Host B is a lazy
clone: fork of origin/main mounts at once, a read fetches only that file's objects; then pull
brings A's next Commit into B's mounted main and the kernel's caches follow it (a file held open
and read before reads the new bytes, a name looked up as missing before now exists, a removed one
is gone). The same `--json` result comes from the CLI. MCP lists the remote tools with schemas and
a push through it sends progress notifications.

Usage: remote_test.py BUILD/layerfs
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from lfs import Env, check, fail, is_mounted  # noqa: E402


def write(path: str, data: bytes | str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def progress_of(events: list, phase: str) -> list:
    ps = [e["progress"] for e in events if e.get("event") == "progress" and e["progress"]["phase"] == phase]
    check(ps, f"no {phase} progress events in {events}")
    last = ps[-1]
    check(last.get("done") is True, f"the last {phase} event is not done: {last}")
    check(last["objects"] > 0 and last["bytes"] > 0 and "rate" in last, f"{phase} progress without figures: {last}")
    return ps


def main() -> None:
    with Env(sys.argv[1]) as a, Env(sys.argv[1]) as b, Env(sys.argv[1]) as other:
        remote = a.path("remote")
        url = "file://" + remote
        # --- A: a tree with enough data for several progress reports, mounted by A's daemon.
        tree = a.path("tree")
        for i in range(30):
            write(os.path.join(tree, "data", f"r{i}.bin"), os.urandom(1_000_000))
        for i in range(200):
            write(os.path.join(tree, "src", f"d{i % 10}", f"f{i}.txt"), f"file {i}\n" * (i + 1))
        write(os.path.join(tree, "change.txt"), "before\n")
        write(os.path.join(tree, "gone.txt"), "to be removed\n")
        a.run("init", a.store, "--from", tree, "-m", "first")
        a.start_daemon()
        ca = a.client()
        mpa = a.mountpoint("mA")
        ca.call("mount", {"ref": "main", "mountpoint": mpa})

        r = ca.call("remote_add", {"name": "origin", "url": url})
        check(r == {"name": "origin", "url": url, "lazy": False, "branches": {}}, f"remote_add: {r}")
        check(ca.error("remote_add", {"name": "origin", "url": url})["code"] == "EEXIST", "a second origin")
        check(ca.error("remote_add", {"name": "x", "url": "ftp://h/p"})["code"] == "EINVAL", "an ftp URL")
        check(ca.error("remote_add", {"name": "../x", "url": url})["code"] == "EINVAL", "a bad remote name")
        check(ca.error("remote_add", {"name": "x"})["code"] == "EINVAL", "remote_add without url")
        check(ca.error("push", {"remote": "nosuch"})["code"] == "ENOENT", "push to an unknown remote")
        check(ca.error("push", {"remote": "origin", "branches": ["nosuch"]})["code"] == "ENOENT", "push of no branch")
        check(ca.error("fetch", {"remote": "origin", "bogus": 1})["code"] == "EINVAL", "an unknown argument")

        events, m = ca.request("push", {"remote": "origin", "branches": ["main"]})
        check(m.get("ok") is True, f"push: {m}")
        push = m["result"]
        check(push["refs"][0]["status"] == "created" and push["refs"][0]["old"] is None, f"push: {push}")
        progress_of(events, "push")
        check(push["sent"]["bytes"] > 30_000_000, f"push sent too little: {push}")
        head = ca.call("log", {"max_count": 1})[0]["id"]
        check(push["refs"][0]["new"] == head, f"pushed {push['refs'][0]['new']}, head {head}")
        lst = ca.call("remote_list")
        check(lst == [{"name": "origin", "url": url, "lazy": False, "branches": {"main": head}}], f"remote_list {lst}")
        check(a.json("remote") == lst, "remote --json differs from the socket's remote_list")
        again = ca.call("push", {"remote": "origin"}, cwd=mpa)  # the branch mounted at cwd
        check(again["refs"][0]["status"] == "up-to-date" and again["refs"][0]["branch"] == "main", f"{again}")

        # Another history (another id key) is refused with DIVERGED.
        other.run("init", other.store)
        other.run("remote", "add", "origin", url)
        p = other.run("push", "origin", "main", check_rc=False)
        check(p.returncode == 1 and b"another history" in p.stderr, f"another history: {p.stderr!r}")
        other.start_daemon()
        e = other.client().error("push", {"remote": "origin"})
        check(e["code"] == "DIVERGED", f"another history: {e}")

        # --- B: cloned lazily by A's daemon (a verb that makes a new Store), then B's own daemon.
        events, m = ca.request("clone", {"url": url, "store": b.store, "lazy": True})
        check(m.get("ok") is True, f"clone: {m}")
        cl = m["result"]
        check(cl["lazy"] and cl["branches"] == [{"name": "main", "commit": head}], f"clone: {cl}")
        check(ca.error("clone", {"url": url, "store": b.store})["code"] == "EEXIST", "clone into a Store")
        b.start_daemon()
        cb = b.client()
        check(cb.call("fork", {"name": "work", "from": "origin/main"})["commit"] == head, "fork of origin/main")
        mpw = b.mountpoint("mWork")
        cb.call("mount", {"ref": "work", "mountpoint": mpw})
        with open(os.path.join(mpw, "src", "d3", "f13.txt")) as f:
            check(f.read() == "file 13\n" * 14, "lazy read through the mount")
        fetched = cb.call("remote_list")[0]["fetched_on_read"]
        check(0 < fetched["bytes"] < 1_000_000, f"one small file fetched {fetched} (the tree is 30 MB)")
        v = cb.call("verify")
        check(v["ok"] and v["missing"] > 0, f"verify of a lazy Store: {v}")

        # --- Pull into B's mounted main updates what the kernel holds.
        mpb = b.mountpoint("mB")
        cb.call("mount", {"ref": "main", "mountpoint": mpb})
        held = open(os.path.join(mpb, "change.txt"), "rb")
        check(held.read() == b"before\n", "B's main before the pull")
        check(not os.path.exists(os.path.join(mpb, "new.txt")), "new.txt before the pull")  # a cached miss
        check(os.path.exists(os.path.join(mpb, "gone.txt")), "gone.txt before the pull")
        write(os.path.join(mpa, "change.txt"), "after, and longer\n")
        write(os.path.join(mpa, "new.txt"), "new\n")
        os.unlink(os.path.join(mpa, "gone.txt"))
        second = ca.call("commit", {"target": mpa, "message": "second"})["commit"]
        ca.call("push", {"remote": "origin", "branches": ["main"]})
        events, m = cb.request("pull", {"remote": "origin", "branch": "main"})
        check(m.get("ok") is True, f"pull: {m}")
        pull = m["result"]
        check(pull["status"] == "fast-forward" and pull["through_workspace"] and pull["new"] == second, f"pull: {pull}")
        check(pull.get("mountpoint") == mpb, f"pull names the mount: {pull}")
        held.seek(0)
        check(held.read() == b"after, and longer\n", "a file held open reads stale bytes after the pull")
        held.close()
        with open(os.path.join(mpb, "change.txt")) as f:
            check(f.read() == "after, and longer\n", "the mount shows stale content after the pull")
        check(os.path.exists(os.path.join(mpb, "new.txt")), "the mount misses a file the pull brought")
        check(not os.path.exists(os.path.join(mpb, "gone.txt")), "the mount shows a file the pull removed")
        # Up to date the second time, the same through the CLI (which the daemon runs).
        again = b.json("pull", "origin", "main")
        check(again["status"] == "up-to-date" and again["fetch"]["refs"][0]["status"] == "unchanged", f"{again}")

        # --- A push that is not a fast-forward: NOT_FAST_FORWARD with the push's result.
        write(os.path.join(mpb, "from-b.txt"), "b\n")
        cb.call("commit", {"target": mpb, "message": "from B"})
        cb.call("push", {"remote": "origin", "branches": ["main"]})
        write(os.path.join(mpa, "from-a.txt"), "a\n")
        ca.call("commit", {"target": mpa, "message": "from A"})
        _, m = ca.request("push", {"remote": "origin", "branches": ["main"]})
        e = m.get("error", {})
        check(m.get("ok") is False and e.get("code") == "NOT_FAST_FORWARD", f"non-fast-forward push: {m}")
        check(e["result"]["refs"][0]["status"] == "rejected" and "fetch first" in e["message"], f"{e}")
        p = a.run("push", "origin", "main", check_rc=False)
        check(p.returncode == 1 and p.stdout == b"" and p.stderr.count(b"\n") == 1, f"CLI refusal: {p}")
        # A pull merges B's Commit into A's mounted main, then the push goes through.
        pull = ca.call("pull", {"remote": "origin", "branch": "main"})
        check(pull["status"] == "merged" and pull["through_workspace"], f"merging pull: {pull}")
        check(open(os.path.join(mpa, "from-b.txt")).read() == "b\n", "the merge is not in A's mount")
        check(ca.call("push", {"remote": "origin"}, cwd=mpa)["refs"][0]["status"] == "fast-forward", "push after pull")

        # --- MCP: the remote tools, and a push with a progress token.
        mcp = subprocess.Popen([a.layerfs, "mcp"], env=a.env, cwd=a.work, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)

        def rpc(i: int, method: str, params: dict) -> list:
            mcp.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}).encode() + b"\n")
            mcp.stdin.flush()
            msgs = []
            while True:
                line = mcp.stdout.readline()
                if not line.endswith(b"\n"):
                    fail(f"mcp closed: {mcp.stderr.read()!r}")
                msgs.append(json.loads(line))
                if msgs[-1].get("id") == i:
                    return msgs

        try:
            rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "t", "version": "1"}})
            tools = {t["name"]: t for t in rpc(2, "tools/list", {})[-1]["result"]["tools"]}
            for name in ("remote_list", "remote_add", "remote_remove", "push", "fetch", "pull", "clone"):
                check(name in tools, f"MCP lacks {name}")
            # REMOTE defaults to origin (else the only remote), as the CLI's does.
            check(not tools["push"]["inputSchema"].get("required") and "remote" in tools["push"]["inputSchema"]["properties"],
                  f"push schema {tools['push']}")
            check(tools["push"]["annotations"].get("destructiveHint") is True, "push --force may discard Commits")
            check(tools["remote_list"]["annotations"].get("readOnlyHint") is True, "remote_list is read-only")
            a.run("remote", "add", "second", "file://" + a.path("remote2"))
            msgs = rpc(3, "tools/call", {"name": "push", "arguments": {"remote": "second", "branches": ["main"]},
                                         "_meta": {"progressToken": "p1"}})
            res = msgs[-1]["result"]
            check(res["isError"] is False and res["structuredContent"]["refs"][0]["status"] == "created", f"{res}")
            notes = [m for m in msgs if m.get("method") == "notifications/progress"]
            check(notes and all(n["params"]["progressToken"] == "p1" for n in notes), f"no MCP progress: {msgs[:-1]}")
            res = rpc(4, "tools/call", {"name": "remote_remove", "arguments": {"name": "second"}})[-1]["result"]
            check(res["isError"] is False, f"remote_remove {res}")
            res = rpc(5, "tools/call", {"name": "fetch", "arguments": {"remote": "second"}})[-1]["result"]
            check(res["isError"] is True and res["content"][0]["text"].startswith("ENOENT"), f"{res}")
        finally:
            mcp.stdin.close()
            mcp.wait(timeout=30)

        for c, mp in ((ca, mpa), (cb, mpb), (cb, mpw)):
            c.call("umount", {"mountpoint": mp})
            check(not is_mounted(mp), f"{mp} still mounted")
    print("remote protocol ok")


if __name__ == "__main__":
    main()
