#!/usr/bin/env python3
"""File names that are not UTF-8 (a Linux name is bytes) on every JSON path: `--json` rendered by
the daemon for the front and by the full CLI, the control protocol both ways, MCP, the Python SDK,
and the front's own request when a name is an argument. Such bytes travel as \\udcXX escapes
(docs/protocol.md, "Names that are not UTF-8"): Python's os.fsdecode/os.fsencode form, so a name
read from a result opens the file in the mount as it is. The daemon must survive all of it (a
`--json` of such a name once aborted it, with every mount it served).

Usage: names_test.py BUILD/layerfs
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from lfs import Env, alive, check  # noqa: E402

# Bytes that are no UTF-8 (a Latin-1 byte, a lone 0xff, a cut sequence, an encoded surrogate, an
# overlong form), one valid non-ASCII name, and names JSON must escape.
RAW = [b"bad\xffname", b"caf\xe9", b"cut\xe2\x82", b"sur\xed\xa0\x80", b"over\xc0\xaf", "\u00fcn\u00ef\U0001f600".encode(),
       b"nl\nname", b'q"b\\s']
NAMES = [os.fsdecode(r) for r in RAW]
LINK_TARGET = os.fsdecode(b"t\xfe/x")


def main(layerfs: str) -> None:
    with Env(layerfs) as env:
        full = os.path.join(os.path.dirname(env.layerfs), "layerfs-full")
        env.run("init", env.store)
        mp = env.mountpoint("m")
        env.run("mount", "main", mp)
        pid = env.daemon_pid()
        check(pid is not None and alive(pid), "no daemon after mount")
        d = os.path.join(mp, "d")
        os.mkdir(d)
        for i, n in enumerate(NAMES):
            with open(os.path.join(d, n), "wb") as f:
                f.write(b"content %d" % i)
        os.symlink(LINK_TARGET, os.path.join(d, "link"))
        want = {"d/" + n for n in NAMES} | {"d", "d/link"}

        # status --json: rendered by the daemon for the front, by the full CLI itself.
        for prog in (env.layerfs, full):
            p = subprocess.run([prog, "status", mp, "--json"], env=env.env, capture_output=True, timeout=120)
            check(p.returncode == 0, f"{prog} status --json: exit {p.returncode}: {p.stderr!r}")
            paths = {c["path"] for c in json.loads(p.stdout)["changes"]}
            check(paths == want, f"{prog} status --json: {sorted(paths)} != {sorted(want)}")
            check(alive(pid), f"layerfsd died rendering {prog} status --json")
        # The escapes are those of surrogateescape, in the text itself.
        text = env.run("status", mp, "--json").stdout
        check(b'"d/bad\\udcffname"' in text and b'"d/caf\\udce9"' in text, f"escapes: {text[:400]!r}")

        env.run("commit", mp, "-m", "names")
        check(alive(pid), "layerfsd died committing")

        # A name as an argument: the front's request and the full CLI's (both once aborted).
        for i, n in enumerate(NAMES):
            for prog in (env.layerfs, full):
                p = subprocess.run([prog, "cat", f"main:d/{n}"], env=env.env, capture_output=True, timeout=120)
                check(p.returncode == 0 and p.stdout == b"content %d" % i,
                      f"{prog} cat {RAW[i]!r}: exit {p.returncode}, {p.stdout!r} {p.stderr!r}")
        # A name that does not exist: a one-line error naming it, in --json too.
        p = env.run("cat", "main:d/" + os.fsdecode(b"no\xffne"), "--json", check_rc=False)
        check(p.returncode == 1, f"cat of a missing name: exit {p.returncode}")
        err = json.loads(p.stderr)["error"]
        check(err["code"] == "ENOENT" and os.fsdecode(b"no\xffne") in err["message"], f"error: {err}")
        check(alive(pid), "layerfsd died on a missing name")

        # Listings and diffs in --json give the names back exactly.
        ents = env.json("list-dir", "main", "d")
        check({e["name"] for e in ents} == set(NAMES) | {"link"}, f"list-dir: {ents}")
        link = next(e for e in ents if e["name"] == "link")
        check(link["target"] == LINK_TARGET, f"symlink target: {link}")
        diff = env.json("diff", "main~1", "main")
        check({c["path"] for c in diff} == want, f"diff --json: {diff}")

        # The names in the mount, as a program would use them from a result.
        for i, n in enumerate(NAMES):
            with open(os.path.join(d, n), "rb") as f:
                check(f.read() == b"content %d" % i, f"open {RAW[i]!r} from its JSON name")

        # The control protocol, both ways: a path sent as escapes reaches the byte name.
        c = env.client()
        r = c.call("read_file", {"target": "main", "path": "d/" + NAMES[0]})
        check(base64.b64decode(r["content_base64"]) == b"content 0", f"read_file: {r}")
        c.call("write_file", {"target": "main", "path": "d/" + NAMES[1] + "2", "content": "new"})
        check(os.path.exists(os.path.join(d, os.fsdecode(RAW[1] + b"2"))), "write_file through escapes")
        # U+10FE80..U+10FEFF stand for bytes while a message is read; a name holding one of them,
        # raw or escaped, is still that character's UTF-8, and comes back as its bytes' escapes.
        for k, body in enumerate(('"d/pua\U0010fe80%d"', '"d/pua\\udbff\\ude80%d"')):
            c2 = env.client()
            c2.send_raw(('{"protocol":1,"id":7,"verb":"write_file","args":{"target":"main","path":%s,"content":"p"}}\n'
                         % (body % k)).encode())
            m = c2.read()
            check(m is not None and m["ok"] is True, f"stand-in {body}: {m}")
            c2.close()
            name = "pua\U0010fe80%d" % k
            check(os.path.exists(os.path.join(d, name)), f"{name!r} not in {os.listdir(d)}")
        ents = {e["name"] for e in c.call("list_dir", {"target": "main", "path": "d"})}
        check("pua\U0010fe800".encode() in {os.fsencode(e) for e in ents}, f"stand-in names listed: {ents}")
        # A literal backslash-u text is text.
        c.call("write_file", {"target": "main", "path": "d/lit\\udcff", "content": "x"})
        check(os.path.exists(os.path.join(d, "lit\\udcff")), "an escaped backslash is a backslash")
        c.close()
        check(alive(pid), "layerfsd died on the protocol cases")

        # export writes the byte names.
        out = env.path("out")
        env.run("export", "main", out)
        got = set(os.listdir(os.path.join(out.encode(), b"d")))
        check(set(RAW) <= got, f"export: {got}")

        # MCP: tool results carry the escapes; a tool call can name such a file.
        mcp = subprocess.Popen([env.layerfs, "mcp"], env=env.env, cwd=env.work, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "list_dir", "arguments": {"target": "main", "path": "d"}}},
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                 "params": {"name": "read_file", "arguments": {"target": "main", "path": "d/" + NAMES[3]}}}]
        stdout, stderr = mcp.communicate("".join(json.dumps(m) + "\n" for m in msgs).encode(), timeout=120)
        replies = {m["id"]: m for m in map(json.loads, stdout.splitlines()) if "id" in m}
        listed = json.loads(replies[2]["result"]["content"][0]["text"])
        check({e["name"] for e in listed} >= set(NAMES), f"mcp list_dir: {listed}")
        read = replies[3]["result"]
        check(read.get("isError") is False and base64.b64decode(read["structuredContent"]["content_base64"]) == b"content 3",
              f"mcp read_file: {read} {stderr!r}")

        # The Python SDK: names as os.listdir gives them, both ways.
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sdk", "python", "src"))
        import layerfs as sdk  # noqa: E402

        s = sdk.Store(env.store)
        names = {e.name for e in s.list_dir("main", "d")}
        check(set(NAMES) <= names, f"sdk list_dir: {names}")
        check(s.read_file("main", "d/" + NAMES[2]) == b"content 2", "sdk read_file")
        s.write_file("main", "d/" + NAMES[0] + ".sdk", b"from sdk")
        with open(os.path.join(d, os.fsdecode(RAW[0] + b".sdk")), "rb") as f:
            check(f.read() == b"from sdk", "sdk write_file of a byte name")
        paths = {ch.path for ch in s.status("main").changes}
        check("d/" + NAMES[0] + ".sdk" in paths, f"sdk status: {paths}")
        check(alive(pid), "layerfsd died during the SDK cases")
    print("names_test: ok")


if __name__ == "__main__":
    main(sys.argv[1])
