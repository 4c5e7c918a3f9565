#!/usr/bin/env python3
"""The control protocol (docs/protocol.md) against a real layerfsd and real mounts.

Every verb gives the same result through the socket as `layerfs VERB --json` prints (the CLI
forwarding to the daemon), and, for verbs that need no daemon, as the CLI prints running them
itself; malformed, oversized, truncated and out-of-order messages get a clear error and the daemon
keeps serving; another user is refused; a version mismatch is a PROTOCOL error; --idle ends an
unused daemon.

Usage: protocol_test.py BUILD/layerfs
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from lfs import Env, alive, check, fail, is_mounted, wait_for  # noqa: E402


def norm(obj, subs: dict[str, str] | None = None, drop: tuple[str, ...] = ()):
    """obj with the strings in `subs` replaced (one side's names by the other's) and the keys in
    `drop` removed, at any depth."""
    subs = subs or {}
    if isinstance(obj, dict):
        return {k: norm(v, subs, drop) for k, v in obj.items() if k not in drop}
    if isinstance(obj, list):
        return [norm(v, subs, drop) for v in obj]
    if isinstance(obj, str):
        for a, b in subs.items():
            obj = obj.replace(a, b)
        return obj
    return obj


def same(what: str, a, b) -> None:
    check(a == b, f"{what}: the socket and the CLI differ:\n socket {json.dumps(a, sort_keys=True)}\n"
                  f" cli    {json.dumps(b, sort_keys=True)}")


def make_tree(root: str) -> None:
    os.makedirs(os.path.join(root, "src", "deep"))
    with open(os.path.join(root, "README"), "w") as f:
        f.write("hello\n")
    with open(os.path.join(root, "src", "a.bin"), "wb") as f:
        f.write(os.urandom(300_000))
    with open(os.path.join(root, "src", "deep", "b.txt"), "w") as f:
        f.write("b" * 1000)
    os.symlink("src/a.bin", os.path.join(root, "link"))


def every_verb_both_ways(env: Env) -> None:
    tree = env.path("tree")
    make_tree(tree)
    env.run("init", env.store, "--from", tree, "-m", "first")
    env.start_daemon("--keep")
    c = env.client()
    verbs_seen = set()

    def both(verb: str, args: dict, cli: list[str]):
        verbs_seen.add(verb)
        return c.call(verb, args, cwd=env.work), env.json(*cli)

    # Read-only verbs on one state: identical.
    main = c.call("branches")[0]["commit"]
    for verb, args, cli in [
        ("branches", {}, ["branch"]),
        ("log", {}, ["log"]),
        ("log", {"ref": "main", "max_count": 1}, ["log", "main", "-n", "1"]),
        ("show", {"commit": "main"}, ["show", "main"]),
        ("cat", {"commit": "main", "path": "src/a.bin"}, ["cat", "main:src/a.bin"]),
        ("cat", {"commit": main[:8], "path": "link"}, ["cat", main[:8] + ":link"]),
        ("mounts", {}, ["mounts"]),
        ("verify", {}, ["verify"]),
        ("verify", {"commits": ["main"]}, ["verify", "main"]),
    ]:
        s, l = both(verb, args, cli)
        same(f"{verb} {args}", s, l)
    with open(os.path.join(tree, "src", "a.bin"), "rb") as f:
        check(base64.b64decode(c.call("cat", {"commit": "main", "path": "src/a.bin"})["content_base64"]) == f.read(),
              "cat: content differs from the imported file")
    part = c.call("cat", {"commit": "main", "path": "README", "offset": 1, "length": 3})
    check(base64.b64decode(part["content_base64"]) == b"ell" and part["size"] == 6, f"cat with offset/length: {part}")
    # The raw CLI output of cat is the file.
    check(env.run("cat", "main:README").stdout == b"hello\n", "layerfs cat prints the file")

    # fork: one branch each way, then the rest of the verbs on the two branches side by side.
    s, l = both("fork", {"name": "viasock", "from": "main"}, ["fork", "viacli", "main"])
    same("fork", norm(s, {"viasock": "X"}), norm(l, {"viacli": "X"}))
    S, L = {"viasock": "X"}, {"viacli": "X"}

    mp_s, mp_c = env.mountpoint("mp_s"), env.mountpoint("mp_c")
    S[mp_s], L[mp_c] = "MP", "MP"
    s, l = both("mount", {"ref": "viasock", "mountpoint": mp_s}, ["mount", "viacli", mp_c])
    same("mount", norm(s, S), norm(l, L))
    check(s["branch"] == "viasock" and s["read_only"] is False and s["commit"] == main, f"mount result {s}")
    same("mounts", c.call("mounts"), env.json("mounts"))
    same("branches with mounts", c.call("branches"), env.json("branch"))

    for mp in (mp_s, mp_c):
        with open(os.path.join(mp, "new.txt"), "w") as f:
            f.write("new\n")
        os.unlink(os.path.join(mp, "README"))
        os.chmod(os.path.join(mp, "src", "deep", "b.txt"), 0o600)
    s, l = both("status", {"target": mp_s}, ["status", mp_c])
    same("status", norm(s, S), norm(l, L))
    check({(x["path"], x["change"]) for x in s["changes"]} == {("new.txt", "A"), ("README", "D"), ("src/deep/b.txt", "P")},
          f"status changes {s}")
    same("status of one branch", c.call("status", {"target": "viasock"}), env.json("status", "viasock"))
    # A relative target is against the request's cwd.
    same("status relative", c.call("status", {"target": "mp_s"}, cwd=env.work), env.json("status", "viasock"))

    s, l = both("commit", {"target": mp_s, "message": "m"}, ["commit", mp_c, "-m", "m"])
    same("commit", norm(s, S, drop=("commit",)), norm(l, L, drop=("commit",)))
    check(s["parents"] == [main], f"commit parents {s}")
    ls, ll = c.call("log", {"ref": "viasock"}), env.json("log", "viacli")
    volatile = ("id", "time", "time_nsec", "root")  # the two trees differ by their files' mtimes
    same("log of the two commits", norm(ls, drop=volatile), norm(ll, drop=volatile))
    s, l = both("diff", {"a": main, "b": "viasock"}, ["diff", main, "viasock"])
    same("diff", s, l)
    s, l = both("show", {"commit": "viasock"}, ["show", "viasock"])
    same("show", s, l)

    for mp in (mp_s, mp_c):
        with open(os.path.join(mp, "scratch"), "w") as f:
            f.write("x")
    # reset works in place on a mounted branch, whatever the kernel still holds open.
    def reset_when_closed(sock_args: dict, cli: list[str]):
        _, m = c.request("reset", sock_args, env.work)
        check(m.get("ok") is True, f"reset {sock_args}: {m}")
        p = env.run(*cli, "--json", check_rc=False)
        check(p.returncode == 0, f"{cli}: {p.stderr!r}")
        verbs_seen.add("reset")
        return m["result"], json.loads(p.stdout)

    s, l = reset_when_closed({"target": mp_s}, ["reset", mp_c])
    same("reset", norm(s, S, drop=("commit",)), norm(l, L, drop=("commit",)))
    check(not os.path.exists(os.path.join(mp_s, "scratch")), "reset left the file")
    s, l = both("reset", {"target": "viasock", "hard": main}, ["reset", "viacli", "--hard", main])
    same("reset --hard", norm(s, S), norm(l, L))
    check(s["commit"] == main and os.path.exists(os.path.join(mp_s, "README")), f"reset --hard {s}")

    s, l = both("umount", {"mountpoint": mp_s}, ["umount", mp_c])
    same("umount", norm(s, S), norm(l, L))
    check(not is_mounted(mp_s) and not is_mounted(mp_c), "still mounted after umount")

    out_s, out_c = env.path("out_s"), env.path("out_c")
    S[out_s], L[out_c] = "OUT", "OUT"
    s, l = both("export", {"commit": "main", "dir": out_s}, ["export", "main", out_c])
    same("export", norm(s, S), norm(l, L))
    check(open(os.path.join(out_s, "README")).read() == "hello\n", "export content")

    c.call("fork", {"name": "imp_s"})
    env.run("fork", "imp_c")
    with open(os.path.join(tree, "added"), "w") as f:
        f.write("added\n")
    s, l = both("import", {"dir": tree, "branch": "imp_s", "message": "again"},
                ["import", tree, "-b", "imp_c", "-m", "again"])
    same("import", norm(s, drop=("commit", "stat_hits", "hashed", "objects_added", "bytes_added")), norm(l, drop=("commit", "stat_hits", "hashed", "objects_added", "bytes_added")))
    check(s["files"] == 4 and s["dirs"] >= 2, f"import result {s}")

    drop_sizes = ("allocated_bytes", "other_bytes", "cf_bytes")
    s, l = both("stats", {}, ["stats"])
    same("stats", norm(s, drop=drop_sizes), norm(l, drop=drop_sizes))

    s, l = both("branch_delete", {"name": "imp_s"}, ["branch", "-d", "imp_c"])
    same("branch_delete", norm(s, {"imp_s": "X"}), norm(l, {"imp_c": "X"}))
    s, l = both("gc", {}, ["gc"])
    check(set(s) == set(l) == {"objects_deleted", "bytes_before", "bytes_after", "missing"}, f"gc results {s} {l}")
    check(s["objects_deleted"] > 0 and l["objects_deleted"] == 0, f"gc freed {s}, then {l}")

    # Every verb of the protocol was asked both ways (the file verbs and merge have their own).
    expected = {"branches", "fork", "branch_delete", "log", "show", "diff", "cat", "export", "import", "mount",
                "umount", "mounts", "commit", "status", "reset", "stats", "verify", "gc"}
    check(expected <= verbs_seen, f"verbs not compared: {expected - verbs_seen}")

    # Without a daemon the CLI runs the verbs itself: the same results.
    before = {v: c.call(v, a) for v, a in [("branches", {}), ("log", {"ref": "viasock"}),
                                           ("diff", {"a": main, "b": "viasock"}), ("verify", {})]}
    c.close()
    pid = env.daemon_pid()
    os.kill(pid, 15)
    wait_for(lambda: not alive(pid), "the daemon to stop")
    same("branches in-process", before["branches"], env.json("branch"))
    same("log in-process", before["log"], env.json("log", "viasock"))
    same("diff in-process", before["diff"], env.json("diff", main, "viasock"))
    same("verify in-process", before["verify"], env.json("verify"))


def file_verbs(env: Env) -> None:
    """read_file, write_file, list_dir, remove_path on a branch's live Workspace: unmounted, then
    mounted (the mount sees every change at once, though the kernel had it cached), the socket and
    the CLI giving the same results."""
    env.run("init", env.store)
    env.start_daemon("--keep")
    c = env.client()
    c.call("fork", {"name": "f"})
    env.run("fork", "g")

    def both(verb: str, args: dict, cli: list[str], input: bytes | None = None):
        s = c.call(verb, args, cwd=env.work)
        out = env.run(*cli, "--json", input=input).stdout
        return s, json.loads(out)

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    payload = os.urandom(100_000)
    s, l = both("write_file", {"target": "f", "path": "d/e/blob", "content_base64": b64(payload)},
                ["write-file", "g", "d/e/blob"], input=payload)
    same("write_file", s, l)
    check(s == {"path": "d/e/blob", "size": 100_000}, f"{s}")
    s, l = both("read_file", {"target": "f", "path": "d/e/blob"}, ["read-file", "g", "d/e/blob"])
    same("read_file", s, l)
    check(base64.b64decode(s["content_base64"]) == payload, "read_file content")
    check(env.run("read-file", "f", "d/e/blob").stdout == payload, "read-file text is the bytes")
    part = c.call("read_file", {"target": "f", "path": "d/e/blob", "offset": 10, "length": 5})
    check(base64.b64decode(part["content_base64"]) == payload[10:15] and part["size"] == 100_000, f"{part}")
    # The CLI's text form honours --offset and --length too (it reads in windows of its own).
    for extra, want in ((["--offset", "10", "--length", "5"], payload[10:15]), (["--offset", "99990"], payload[99990:]),
                        (["--length", "0"], b""), (["--offset", "200000"], b""), (["--length", "7"], payload[:7])):
        got = env.run("read-file", "f", "d/e/blob", *extra).stdout
        check(got == want, f"read-file {extra}: {len(got)} bytes, want {len(want)}")
    neg = env.run("read-file", "f", "d/e/blob", "--offset", "-1", check_rc=False)
    check(neg.returncode == 1 and b"must not be negative" in neg.stderr, f"read-file --offset -1: {neg}")
    c.call("write_file", {"target": "f", "path": "d/e/blob", "content": "tail\n", "append": True})
    env.run("write-file", "g", "d/e/blob", "--content", "tail\n", "--append")
    c.call("write_file", {"target": "f", "path": "x.sh", "content": "#!/bin/sh\n", "mode": "0755"})
    env.run("write-file", "g", "x.sh", "--content", "#!/bin/sh\n", "--mode", "0755")
    s, l = both("list_dir", {"target": "f"}, ["list-dir", "g"])
    same("list_dir", s, l)
    check([(e["name"], e["type"], e["mode"]) for e in s] == [("d", "dir", "0755"), ("x.sh", "file", "0755")], f"{s}")
    s, l = both("list_dir", {"target": "f", "path": "d/e"}, ["list-dir", "g", "d/e"])
    same("list_dir d/e", s, l)
    check(s == [{"name": "blob", "type": "file", "mode": "0644", "size": 100_005}], f"{s}")
    # Committed as any write would be.
    cf = c.call("commit", {"target": "f", "message": "files"})["commit"]
    check(env.run("cat", f"{cf}:d/e/blob").stdout == payload + b"tail\n", "committed content")
    # Errors.
    for args, code in [({"target": "f", "path": "nope"}, "ENOENT"), ({"target": "f", "path": "d"}, "EISDIR"),
                       ({"target": "f", "path": "../etc/passwd"}, "EINVAL"), ({"target": "nosuch", "path": "x"}, "ENOENT"),
                       ({"target": "f", "path": "x.sh/y"}, "ENOTDIR")]:
        e = c.error("read_file", args)
        check(e["code"] == code, f"read_file {args}: {e}")
    e = c.error("write_file", {"target": "f", "path": "d", "content": "x"})
    check(e["code"] == "EISDIR", f"{e}")
    e = c.error("write_file", {"target": "f", "path": "y", "content": "x", "content_base64": "eA=="})
    check(e["code"] == "EINVAL", f"{e}")
    e = c.error("write_file", {"target": "f", "path": "y", "content_base64": "***"})
    check(e["code"] == "EINVAL", f"{e}")
    e = c.error("write_file", {"target": "f", "path": "y", "content": "x", "mode": "999"})
    check(e["code"] == "EINVAL", f"{e}")
    e = c.error("remove_path", {"target": "f", "path": "d"})
    check(e["code"] == "ENOTEMPTY", f"{e}")
    e = c.error("remove_path", {"target": "f", "path": ""})
    check(e["code"] == "EINVAL", f"{e}")
    s, l = both("remove_path", {"target": "f", "path": "d", "recursive": True}, ["remove-path", "g", "d", "-r"])
    same("remove_path", s, l)
    check([e["name"] for e in c.call("list_dir", {"target": "f"})] == ["x.sh"], "d was not removed")
    check({(x["path"], x["change"]) for x in c.call("status", {"target": "f"})["changes"]} ==
          {("d", "D"), ("d/e", "D"), ("d/e/blob", "D")}, "status after remove_path")

    # Mounted: the same Workspace; the kernel's caches are dropped for what changed.
    mp = env.mountpoint("mp")
    c.call("mount", {"ref": "f", "mountpoint": mp})
    with open(os.path.join(mp, "x.sh"), "rb") as fh:
        check(fh.read() == b"#!/bin/sh\n", "mount content")  # now in the page cache
    os.listdir(mp)  # entries cached too
    keep = open(os.path.join(mp, "x.sh"), "rb")  # an open file sees the new bytes as well
    c.call("write_file", {"target": mp, "path": "x.sh", "content": "#!/bin/sh\necho new\n"})
    with open(os.path.join(mp, "x.sh"), "rb") as fh:
        check(fh.read() == b"#!/bin/sh\necho new\n", "the mount shows stale content after write_file")
    check(os.stat(os.path.join(mp, "x.sh")).st_size == 19, "stale size in the mount")
    check(keep.read() == b"#!/bin/sh\necho new\n", "an open file shows stale content")
    keep.close()
    check(not os.path.exists(os.path.join(mp, "made")), "precondition")
    c.call("write_file", {"target": "f", "path": "made/here.txt", "content": "new file"})
    check(sorted(os.listdir(mp)) == ["made", "x.sh"], f"listing after write_file: {os.listdir(mp)}")
    check(open(os.path.join(mp, "made", "here.txt")).read() == "new file", "new file through the mount")
    with open(os.path.join(mp, "shell.txt"), "w") as fh:
        fh.write("from the shell")
    r = c.call("read_file", {"target": "f", "path": "shell.txt"})
    check(base64.b64decode(r["content_base64"]) == b"from the shell", "read_file of a file the shell wrote")
    c.call("remove_path", {"target": "f", "path": "made", "recursive": True})
    check(not os.path.exists(os.path.join(mp, "made")), "the mount still shows a removed directory")
    check(sorted(os.listdir(mp)) == ["shell.txt", "x.sh"], f"{os.listdir(mp)}")
    c.call("remove_path", {"target": mp, "path": "shell.txt"})
    check(not os.path.exists(os.path.join(mp, "shell.txt")), "the mount still shows a removed file")
    c.call("umount", {"mountpoint": mp})
    c.close()


def merge_conflict_result(env: Env) -> None:
    """A failure that has a result (a merge stopped on conflicts): CONFLICT with error.result, the
    same conflicts through the CLI's --json, which exits 1."""
    env.run("init", env.store)
    env.start_daemon("--keep")
    c = env.client()
    for b in ("x", "y"):
        c.call("fork", {"name": b})
    c.call("write_file", {"target": "x", "path": "f.txt", "content": "from x\n"})
    c.call("commit", {"target": "x", "message": "x"})
    c.call("write_file", {"target": "y", "path": "f.txt", "content": "from y\n"})
    c.call("commit", {"target": "y", "message": "y"})
    c.call("fork", {"name": "x2", "from": "x"})
    _, m = c.request("merge", {"source": "y", "into": "x"})
    check(m["ok"] is False and m["error"]["code"] == "CONFLICT" and "result" in m["error"], f"{m}")
    res = m["error"]["result"]
    check([x["path"] for x in res["conflicts"]] == ["f.txt"] and res["commit"] is None, f"{res}")
    p = env.run("merge", "y", "--into", "x2", "--json", check_rc=False)
    err = json.loads(p.stderr)["error"]  # with --json the failure is the protocol's error object
    check(p.returncode == 1 and err["code"] == "CONFLICT" and err["message"].startswith("merge of y into x2 has 1 conflict"),
          f"{p}")
    same("merge conflicts", norm(res, {"x2": "x"}), norm(json.loads(p.stdout), {"x2": "x"}))
    ok = c.call("merge", {"source": "y", "into": "x", "strategy_option": "theirs"})
    check(ok["commit"] and not ok["conflicts"], f"{ok}")
    c.close()


def errors_and_bad_messages(env: Env) -> None:
    env.run("init", env.store)
    pid = env.start_daemon("--keep")
    c = env.client()

    def still_serving():
        check(alive(pid), "the daemon died")
        fresh = env.client()
        check("main" in [b["name"] for b in fresh.call("branches")], "a fresh connection is not served")
        fresh.close()

    # Errors: stable codes, errno, the CLI's one-line message.
    e = c.error("log", {"ref": "nosuch"})
    check(e["code"] == "ENOENT" and e["errno"] == 2 and "nosuch" in e["message"], f"{e}")
    cli = env.run("log", "nosuch", check_rc=False)
    check(cli.returncode == 1 and cli.stderr.decode() == f"layerfs: {e['message']}\n", f"CLI error {cli.stderr!r}")
    c.call("fork", {"name": "b"})
    e = c.error("fork", {"name": "b"})
    check(e["code"] == "EEXIST" and e["errno"] == 17, f"{e}")
    e = c.error("log", {"max_count": "ten"})
    check(e["code"] == "EINVAL" and "max_count" in e["message"], f"{e}")
    e = c.error("log", {"no_such": 1})
    check(e["code"] == "EINVAL" and "no_such" in e["message"], f"{e}")
    e = c.error("log", {"max_count": -1})
    check(e["code"] == "EINVAL", f"{e}")
    e = c.error("fork", {})
    check(e["code"] == "EINVAL" and "name" in e["message"], f"{e}")
    e = c.error("frobnicate")
    check(e["code"] == "EINVAL" and "frobnicate" in e["message"], f"{e}")
    e = c.error("init", {"store": "/x"})
    check(e["code"] == "EINVAL", f"{e}")
    e = c.error("status", {"target": "main"}, cwd="relative/dir")
    check(e["code"] == "EINVAL" and "cwd" in e["message"], f"{e}")
    e = c.error("cat", {"commit": "main", "path": "nope"})
    check(e["code"] == "ENOENT", f"{e}")
    e = c.error("umount", {"mountpoint": env.work})
    check(e["code"] == "ENOENT", f"{e}")
    e = c.error("mount", {"ref": "b", "mountpoint": env.path("absent")})
    check(e["code"] == "ENOENT", f"{e}")

    # Several requests on one connection, string ids echoed.
    c.send_raw(b'{"protocol": 1, "id": "abc", "verb": "branches"}\n')
    m = c.read()
    check(m["id"] == "abc" and m["ok"] is True, f"{m}")

    # Malformed: not JSON, not an object, missing fields, wrong types. Each gets an error with the
    # id when one could be read, and the connection goes on.
    for raw, code, rid in [
        (b"this is not json\n", "PROTOCOL", None),
        (b"[1, 2]\n", "PROTOCOL", None),
        (b'{"id": 5, "verb": "branches"}\n', "PROTOCOL", 5),
        (b'{"protocol": 1, "verb": "branches"}\n', "PROTOCOL", None),
        (b'{"protocol": 1, "id": [1], "verb": "branches"}\n', "PROTOCOL", None),
        (b'{"protocol": 1, "id": 6}\n', "PROTOCOL", 6),
        (b'{"protocol": 1, "id": 7, "verb": 12}\n', "PROTOCOL", 7),
        (b'{"protocol": 1, "id": 8, "verb": "log", "args": [1]}\n', "EINVAL", 8),
        (b'{"protocol": 1, "id": 9, "verb": "log", "args": {"ref": "\xff"}}\n', "PROTOCOL", None),
        (b"\n", "PROTOCOL", None),
    ]:
        c.send_raw(raw)
        m = c.read()
        check(m is not None and m["ok"] is False and m["error"]["code"] == code and m["id"] == rid,
              f"{raw!r}: {m}")
        check(m["error"]["message"], f"{raw!r}: an error without a message")
    # Out of order: a response or an event sent to the daemon.
    for raw in (b'{"id": 10, "ok": true, "result": []}\n', b'{"id": 11, "event": "progress", "progress": {}}\n'):
        c.send_raw(raw)
        m = c.read()
        check(m["ok"] is False and m["error"]["code"] == "PROTOCOL" and "out of order" in m["error"]["message"], f"{m}")
    # A request sent before the previous one's answer was read is answered in turn.
    c.send_raw(b'{"protocol": 1, "id": 20, "verb": "branches"}\n{"protocol": 1, "id": 21, "verb": "mounts"}\n')
    m1, m2 = c.read(), c.read()
    check((m1["id"], m2["id"]) == (20, 21) and m1["ok"] and m2["ok"] and m2["result"] == [], f"{m1} {m2}")
    check(c.call("branches")[1]["name"] == "main", "the connection survived the bad messages")
    c.close()
    still_serving()

    # Oversized: refused with TOO_LARGE and the connection closed, before 64 MiB is buffered.
    c = env.client()
    big = b'{"protocol": 1, "id": 1, "verb": "log", "args": {"ref": "' + b"x" * (65 << 20)
    try:
        c.send_raw(big + b'"}}\n')
    except (BrokenPipeError, ConnectionResetError):
        pass
    m = c.read()
    check(m is not None and m["error"]["code"] == "TOO_LARGE" and m["id"] is None, f"oversized: {m}")
    check(c.read() is None, "the connection stays open after TOO_LARGE")
    c.close()
    still_serving()

    # Truncated: the client stops writing in the middle of a message.
    c = env.client()
    c.send_raw(b'{"protocol": 1, "id": 1, "verb": "bran')
    c.sock.shutdown(socket.SHUT_WR)
    m = c.read()
    check(m is not None and m["error"]["code"] == "PROTOCOL" and "truncated" in m["error"]["message"], f"{m}")
    c.close()
    # A client that vanishes mid-message or mid-request harms nothing.
    c = env.client()
    c.send_raw(b'{"protocol": 1, "id": 1, "verb": "verify"}\n{"protocol"')
    c.sock.close()
    still_serving()

    # Version mismatch: PROTOCOL naming both versions, then the connection ends.
    c = env.client()
    c.send_raw(b'{"protocol": 2, "id": 1, "verb": "branches"}\n')
    m = c.read()
    check(m["ok"] is False and m["error"]["code"] == "PROTOCOL" and m["id"] == 1 and
          "protocol 2" in m["error"]["message"] and "speaks 1" in m["error"]["message"], f"{m}")
    check(c.read() is None, "the connection stays open after a version mismatch")
    c.close()
    still_serving()

    # Progress events for long work, before the final response, at least the last one.
    tree = env.path("many")
    os.makedirs(tree)
    for i in range(2000):
        with open(os.path.join(tree, f"f{i:04d}"), "wb") as f:
            f.write(os.urandom(64) * 16)
    c = env.client()
    events, m = c.request("import", {"dir": tree, "message": "many"})
    check(m["ok"] and m["result"]["files"] == 2000, f"{m}")
    check(events and all(e["event"] == "progress" and e["progress"]["phase"] == "import" for e in events), f"{events}")
    check(events[-1]["progress"]["done"] is True and events[-1]["progress"]["objects"] == 2000, f"{events[-1]}")
    events, m = c.request("verify")
    check(m["ok"] and events and events[-1]["progress"]["phase"] == "verify", f"{events}")
    events, m = c.request("export", {"commit": "main", "dir": env.path("ex")})
    last = events[-1]["progress"]
    check(last["objects"] == last["objects_total"] and last["bytes"] == last["bytes_total"], f"{last}")
    c.close()

    # The CLI draws progress on stderr when it is a terminal (script(1) gives it one), through the
    # daemon and without; and prints nothing there when it is not.
    for daemon in (True, False):
        if not daemon:
            pid = env.daemon_pid()
            os.kill(pid, 15)
            wait_for(lambda: not alive(pid), "the daemon to stop")
        cmd = f"'{env.layerfs}' --store '{env.store}' verify >/dev/null"
        p = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, timeout=300)
        check(p.returncode == 0 and b"\rverify: " in p.stdout and b" objects" in p.stdout,
              f"no progress line on a terminal (daemon {daemon}): {p.stdout!r}")
        p = env.run("verify")
        check(b"verify:" not in p.stderr, f"progress on a stderr that is not a terminal: {p.stderr!r}")
    pid = env.start_daemon("--keep")

    # A file over the 32 MiB a result may carry: TOO_LARGE whole, in pieces with offset/length;
    # the CLI's cat and read-file print it whole, window by window.
    big_dir = env.path("big")
    os.makedirs(big_dir)
    big = os.urandom(1 << 20) * 40
    with open(os.path.join(big_dir, "big"), "wb") as f:
        f.write(big)
    c = env.client()
    c.call("import", {"dir": big_dir, "branch": "b", "message": "big"})
    e = c.error("cat", {"commit": "b", "path": "big"})
    check(e["code"] == "TOO_LARGE" and "offset" in e["message"], f"{e}")
    piece = c.call("cat", {"commit": "b", "path": "big", "offset": 35 << 20, "length": 10})
    check(base64.b64decode(piece["content_base64"]) == big[35 << 20:(35 << 20) + 10], "cat piece")
    check(env.run("cat", "b:big").stdout == big, "layerfs cat of a 40 MiB file")
    check(env.run("read-file", "b", "big").stdout == big, "layerfs read-file of a 40 MiB file")
    e = c.error("read_file", {"target": "b", "path": "big"})
    check(e["code"] == "TOO_LARGE", f"{e}")
    c.close()

    # Another user: the socket is the owner's alone (mode 0600 in the Store, itself the owner's);
    # opened up, the daemon still refuses the peer by its credentials.
    sock = os.path.join(env.store, "control.sock")
    check(os.stat(sock).st_mode & 0o777 == 0o600, "socket mode is not 0600")
    probe = ("import socket, sys, json\n"
             "s = socket.socket(socket.AF_UNIX)\n"
             "try:\n"
             "    s.connect(sys.argv[1])\n"
             "except OSError as e:\n"
             "    print(json.dumps({'connect': e.errno})); sys.exit(0)\n"
             "try:\n"
             "    s.sendall(b'{\"protocol\": 1, \"id\": 1, \"verb\": \"branches\"}\\n')\n"
             "except BrokenPipeError:\n"
             "    pass  # refused before the request was written: the refusal is still there to read\n"
             "f = s.makefile('rb')\n"
             "reply = json.loads(f.readline())\n"
             "try:\n"
             "    then = f.readline().decode()\n"
             "except ConnectionResetError:\n"
             "    then = ''  # closed with our request unread: closed all the same\n"
             "print(json.dumps({'reply': reply, 'then': then}))\n")
    # The system's python: one under root's home is out of nobody's reach.
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", py, "-c", probe, sock]
    def probe_as_nobody():
        p = subprocess.run(as_nobody, capture_output=True, cwd="/")
        check(p.returncode == 0, f"the probe as nobody failed: {p.stderr.decode(errors='replace')}")
        return json.loads(p.stdout)

    out = probe_as_nobody()
    check(out.get("connect") == 13, f"another user reached the socket: {out}")
    os.chmod(env.work, 0o755)
    os.chmod(env.store, 0o755)
    os.chmod(sock, 0o666)
    out = probe_as_nobody()
    check("reply" in out and out["reply"]["ok"] is False and out["reply"]["error"]["code"] == "EACCES" and
          out["then"] == "", f"another user's request was not refused: {out}")
    os.chmod(sock, 0o600)
    still_serving()


def start_and_init_failures(env: Env) -> None:
    """Failures no daemon answers keep their code: `layerfs VERB --json` prints the protocol's
    error object on stderr, `layerfsd --json` its start-up failure, and the CLI starting a
    daemon passes on the daemon's code."""

    def json_error(p: subprocess.CompletedProcess, code: str) -> dict:
        check(p.returncode == 1 and p.stdout == b"", f"exit {p.returncode}, stdout {p.stdout!r}")
        lines = p.stderr.decode().splitlines()
        check(len(lines) == 1, f"stderr is not one line: {p.stderr!r}")
        e = json.loads(lines[0])["error"]
        check(e["code"] == code and isinstance(e["errno"], int) and e["message"], f"expected {code}: {e}")
        return e

    env.run("init", env.store)
    e = json_error(env.run("init", env.store, "--json", check_rc=False), "EEXIST")
    check(e["errno"] == 17 and env.store in e["message"], f"{e}")
    plain = env.run("init", env.store, check_rc=False)
    check(plain.returncode == 1 and plain.stderr.decode() == f"layerfs: {e['message']}\n", f"{plain.stderr!r}")
    json_error(env.run("init", env.path("p"), "--policy", "1/2", "--json", check_rc=False), "EINVAL")
    check(not os.path.exists(env.path("p")), "a refused init left a directory")
    json_error(env.run("init", env.path("no", "such", "s"), "--json", check_rc=False), "ENOENT")
    json_error(env.run("init", env.path("f"), "--from", env.path("nosuch"), "--json", check_rc=False), "ENOENT")
    # A verb's failure with --json, through the daemon and without one.
    json_error(env.run("log", "nosuch", "--json", check_rc=False), "ENOENT")

    # layerfsd's own start-up failures.
    def daemon(store: str, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([env.layerfsd, "--store", store, *extra], capture_output=True, timeout=60)

    json_error(daemon(env.path("nosuch"), "--json"), "ENOENT")
    os.makedirs(env.path("empty"))
    json_error(daemon(env.path("empty"), "--json"), "ENOENT")
    pid = env.start_daemon("--keep")
    e = json_error(daemon(env.store, "--json"), "EBUSY")
    check(e["errno"] == 16 and "in use" in e["message"], f"{e}")
    p = daemon(env.store)
    check(p.returncode == 1 and p.stderr.decode() == f"layerfsd: {e['message']}\n", f"{p.stderr!r}")
    check(alive(pid), "a refused second daemon stopped the first")
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not alive(pid), "the daemon to exit")

    # The CLI starting a daemon for `mount` keeps the daemon's code: here another process holds
    # the Store's database lock (as RocksDB takes it: an fcntl lock on db/LOCK).
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys; f = open(sys.argv[1], 'r+'); fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB); "
        "print('held', flush=True); sys.stdin.read()"), os.path.join(env.store, "db", "LOCK")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        check(holder.stdout.readline() == b"held\n", "the lock holder did not start")
        mp = env.mountpoint("busy")
        e = json_error(env.run("mount", "main", mp, "--json", check_rc=False), "EBUSY")
        check(e["message"].startswith("layerfsd failed to start: ") and "in use" in e["message"], f"{e}")
        check(not is_mounted(mp), "mounted anyway")
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def idle_exit(env: Env) -> None:
    env.run("init", env.store)
    pid = env.start_daemon("--idle", "1")
    c = env.client()
    c.call("branches")
    # An open connection keeps it.
    check(alive(pid), "exited with a connection open")
    c.close()
    wait_for(lambda: not alive(pid), "the idle daemon to exit")
    check(not os.path.exists(os.path.join(env.store, "control.sock")), "socket left behind")
    # A daemon without --idle that has served a request and holds no mount goes at once.
    pid = env.start_daemon()
    c = env.client()
    c.call("branches")
    check(alive(pid), "exited with a connection open")
    c.close()
    wait_for(lambda: not alive(pid), "the daemon to exit once unused")


def main() -> None:
    layerfs = sys.argv[1]
    for test in (every_verb_both_ways, file_verbs, merge_conflict_result, errors_and_bad_messages,
                 start_and_init_failures, idle_exit):
        with Env(layerfs) as env:
            test(env)
        print(f"ok {test.__name__}")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
