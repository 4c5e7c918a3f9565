#!/usr/bin/env python3
"""`layerfs mcp` driven by a scripted MCP client (JSON-RPC 2.0 over stdio, revision 2025-06-18):
initialize, tools/list with a schema per tool, calls of several tools (a fork, a file written in
the Workspace, a commit, log, diff, a mount), tool errors and JSON-RPC errors, ping; the daemon is
started on demand.

Usage: mcp_test.py BUILD/layerfs
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from lfs import Env, alive, check, fail, is_mounted  # noqa: E402


class McpClient:
    def __init__(self, env: Env):
        self.p = subprocess.Popen([env.layerfs, "mcp"], env=env.env, cwd=env.work, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.next_id = 1

    def send(self, msg) -> None:
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()

    def send_raw(self, data: bytes) -> None:
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def read(self) -> dict:
        line = self.p.stdout.readline()
        if not line.endswith(b"\n"):
            fail(f"mcp closed stdout (stderr: {self.p.stderr.read()!r})")
        m = json.loads(line)
        check(m.get("jsonrpc") == "2.0", f"not JSON-RPC 2.0: {m}")
        return m

    def request(self, method: str, params=None) -> dict:
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        while True:
            m = self.read()
            if m.get("method") == "notifications/progress":
                continue
            check(m.get("id") == rid, f"response for another request: {m}")
            return m

    def result(self, method: str, params=None):
        m = self.request(method, params)
        check("result" in m and "error" not in m, f"{method}: {m}")
        return m["result"]

    def tool(self, tool_name: str, **arguments):
        """A tool call that must succeed: its structuredContent, checked against its text."""
        r = self.result("tools/call", {"name": tool_name, "arguments": arguments})
        check(r.get("isError") is False, f"{tool_name} {arguments}: {r}")
        check(r["content"][0]["type"] == "text", f"{r}")
        sc = r["structuredContent"]
        check(isinstance(sc, dict), f"structuredContent must be an object: {sc}")
        text = json.loads(r["content"][0]["text"])
        unwrapped = sc["result"] if list(sc) == ["result"] and not isinstance(text, dict) else sc
        if isinstance(text, dict) and "content" in text and "content_base64" in sc:
            check(base64.b64decode(sc["content_base64"]).decode() == text["content"], "file text differs")
        else:
            check(text == unwrapped, f"text and structuredContent differ: {text} {sc}")
        return unwrapped

    def tool_error(self, tool_name: str, **arguments) -> str:
        r = self.result("tools/call", {"name": tool_name, "arguments": arguments})
        check(r.get("isError") is True and "structuredContent" not in r, f"{tool_name} should have failed: {r}")
        return r["content"][0]["text"]

    def close(self) -> int:
        self.p.stdin.close()
        rc = self.p.wait(timeout=60)
        self.p.stdout.close()
        self.p.stderr.close()
        return rc


def session(env: Env) -> None:
    env.run("init", env.store)
    check(env.daemon_pid() is None, "a daemon before the first call")
    c = McpClient(env)
    init = c.result("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                   "clientInfo": {"name": "test", "version": "1"}})
    check(init["protocolVersion"] == "2025-06-18", f"{init}")
    check("tools" in init["capabilities"] and init["serverInfo"]["name"] == "layerfs", f"{init}")
    c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    check(c.result("ping") == {}, "ping")  # the notification got no response: this is ping's

    tools = {t["name"]: t for t in c.result("tools/list")["tools"]}
    for name in ("fork", "commit", "log", "diff", "status", "branches", "mount", "umount", "show", "cat", "reset",
                 "read_file", "write_file", "list_dir", "remove_path", "merge", "cherry_pick", "revert"):
        check(name in tools, f"no tool {name}: {sorted(tools)}")
    check("init" not in tools and "exec" not in tools and "mcp" not in tools, "client-side verbs listed as tools")
    for t in tools.values():
        s = t["inputSchema"]
        check(s["type"] == "object" and isinstance(s["properties"], dict) and t["description"], f"{t}")
        check(isinstance(t["annotations"]["readOnlyHint"], bool), f"{t}")
    check(tools["fork"]["inputSchema"]["required"] == ["name"], f"{tools['fork']}")
    check(tools["log"]["inputSchema"]["properties"]["max_count"]["type"] == "integer", f"{tools['log']}")
    check(tools["log"]["annotations"]["readOnlyHint"] is True, "log is read-only")
    check(tools["branch_delete"]["annotations"]["destructiveHint"] is True, "branch_delete is destructive")

    main = c.tool("branches")[0]["commit"]
    check(env.daemon_pid() is not None and alive(env.daemon_pid()), "no daemon was started for the call")
    f = c.tool("fork", name="agent")
    check(f == {"branch": "agent", "commit": main}, f"{f}")
    w = c.tool("write_file", target="agent", path="notes/plan.md", content_base64=base64.b64encode(b"step 1\n").decode())
    check(w["size"] == 7, f"{w}")
    r = c.tool("read_file", target="agent", path="notes/plan.md")
    check(base64.b64decode(r["content_base64"]) == b"step 1\n", f"{r}")
    ls = c.tool("list_dir", target="agent")
    check([e["name"] for e in ls] == ["notes"] and ls[0]["type"] == "dir", f"{ls}")
    st = c.tool("status", target="agent")
    check({(x["path"], x["change"]) for x in st["changes"]} == {("notes", "A"), ("notes/plan.md", "A")} or
          {(x["path"], x["change"]) for x in st["changes"]} == {("notes/plan.md", "A")}, f"{st}")
    cm = c.tool("commit", target="agent", message="plan from an agent")
    check(cm["branch"] == "agent" and cm["parents"] == [main], f"{cm}")
    log = c.tool("log", ref="agent")
    check(log[0]["id"] == cm["commit"] and log[0]["message"] == "plan from an agent", f"{log}")
    d = c.tool("diff", a=main, b="agent")
    check("notes/plan.md" in [x["path"] for x in d], f"{d}")
    check(env.run("cat", f"{cm['commit']}:notes/plan.md").stdout == b"step 1\n", "the CLI sees the commit")
    # Text content of a file comes back readable in the text block.
    r = c.result("tools/call", {"name": "cat", "arguments": {"commit": "agent", "path": "notes/plan.md"}})
    check(json.loads(r["content"][0]["text"])["content"] == "step 1\n", f"{r}")

    # A mount through MCP, seen by the shell; a file written through MCP seen in the mount.
    mp = env.mountpoint("mp")
    m = c.tool("mount", ref="agent", mountpoint=mp)
    check(m["mountpoint"] == mp and is_mounted(mp), f"{m}")
    c.tool("write_file", target=mp, path="live.txt", content_base64=base64.b64encode(b"live").decode())
    check(open(os.path.join(mp, "live.txt"), "rb").read() == b"live", "the mount does not see write_file")
    c.tool("umount", mountpoint=mp)
    check(not is_mounted(mp), "still mounted")

    # Tool errors: isError with the code and message; JSON-RPC errors for what is not a call.
    text = c.tool_error("log", ref="nosuch")
    check(text.startswith("ENOENT: ") and "nosuch" in text, text)
    text = c.tool_error("fork", name="agent")
    check(text.startswith("EEXIST: "), text)
    m = c.request("tools/call", {"name": "no_such_tool", "arguments": {}})
    check(m["error"]["code"] == -32602 and "no_such_tool" in m["error"]["message"], f"{m}")
    m = c.request("tools/call", {"name": "log", "arguments": {"max_count": "ten"}})
    check(m["error"]["code"] == -32602 and "max_count" in m["error"]["message"], f"{m}")
    m = c.request("tools/call", {"name": "log", "arguments": {"bogus": 1}})
    check(m["error"]["code"] == -32602, f"{m}")
    m = c.request("tools/call", {"name": "fork"})
    check(m["error"]["code"] == -32602 and "name" in m["error"]["message"], f"{m}")
    m = c.request("resources/list")
    check(m["error"]["code"] == -32601, f"{m}")
    c.send_raw(b"{not json\n")
    m = c.read()
    check(m["id"] is None and m["error"]["code"] == -32700, f"{m}")
    c.send_raw(b'[{"jsonrpc": "2.0", "id": 99, "method": "ping"}]\n')
    m = c.read()
    check(m["error"]["code"] == -32600, f"{m}")
    c.send({"jsonrpc": "2.0", "id": 100})
    m = c.read()
    check(m["id"] == 100 and m["error"]["code"] == -32600, f"{m}")
    check(c.result("ping") == {}, "serving after the errors")
    check(c.close() == 0, "mcp exit status")

    # Without a store it says so and exits non-zero.
    p = subprocess.run([env.layerfs, "mcp"], env={k: v for k, v in env.env.items() if k != "LAYERFS_STORE"},
                       cwd="/", input=b"", capture_output=True)
    check(p.returncode == 1 and b"store" in p.stderr and p.stdout == b"", f"{p}")


def main() -> None:
    with Env(sys.argv[1]) as env:
        session(env)
    print("ok session")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
