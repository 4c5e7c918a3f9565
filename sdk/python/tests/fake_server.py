"""A small fake layerfsd that speaks docs/protocol.md (version 1) from an in-memory model.

It checks what the SDK sends (protocol version, id, verb, argument names and types: an unknown
argument or a wrong type is EINVAL, as the real daemon does) and answers with the documented
result shapes, error codes and progress events. It does not mount anything: ``mount`` only
records the mountpoint. Used by test_fake.py to pin the SDK's side of the protocol down without
a daemon; test_daemon.py runs the same verbs against the real one.

Run as a program (``fake_server.py --store S --idle N``) it behaves like ``layerfsd``: it forks,
listens on S/control.sock, and the parent exits 0 once the child listens (the auto-start test
points $LAYERFSD at it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import sys
import threading
import time
from typing import Any

ARGS: dict[str, dict[str, tuple[type, ...]]] = {
    "branches": {},
    "fork": {"name": (str,), "from": (str,)},
    "branch_delete": {"name": (str,)},
    "log": {"ref": (str,), "max_count": (int,), "graph": (bool,), "all": (bool,), "reverse": (bool,),
            "changes": (bool,), "paths": (list,), "patch": (bool,), "renames": (bool,), "grep": (str,),
            "ignore_case": (bool,), "since": (str,), "until": (str,)},
    "remote_list": {},
    "remote_add": {"name": (str,), "url": (str,), "lazy": (bool,)},
    "remote_remove": {"name": (str,)},
    "push": {"remote": (str,), "branches": (list,), "force": (bool,)},
    "fetch": {"remote": (str,)},
    "pull": {"remote": (str,), "branch": (str,)},
    "clone": {"url": (str,), "store": (str,), "lazy": (bool,)},
    "rev_parse": {"ref": (str,)},
    "show": {"commit": (str,), "patch": (bool,), "paths": (list,), "renames": (bool,)},
    "diff": {"a": (str,), "b": (str,), "patch": (bool,), "paths": (list,), "renames": (bool,)},
    "cat": {"commit": (str,), "path": (str,), "offset": (int,), "length": (int,)},
    "export": {"commit": (str,), "dir": (str,)},
    "import": {"dir": (str,), "branch": (str,), "message": (str,), "jobs": (int,)},
    "mount": {"ref": (str,), "mountpoint": (str,), "read_only": (bool,), "allow_other": (bool,),
              "single_threaded": (bool,), "threads": (bool,), "no_follow_cpu": (bool,)},
    "umount": {"mountpoint": (str,)},
    "mounts": {},
    "commit": {"target": (str,), "message": (str,), "amend": (bool,)},
    "status": {"target": (str,), "patch": (bool,), "paths": (list,), "renames": (bool,)},
    "reset": {"target": (str,), "hard": (str,)},
    "restore": {"target": (str,), "paths": (list,), "source": (str,)},
    "stats": {},
    "verify": {"commits": (list,), "fetch": (bool,)},
    "gc": {},
    "read_file": {"target": (str,), "path": (str,), "offset": (int,), "length": (int,)},
    "write_file": {"target": (str,), "path": (str,), "content_base64": (str,), "content": (str,), "mode": (str,),
                   "append": (bool,)},
    "list_dir": {"target": (str,), "path": (str,)},
    "remove_path": {"target": (str,), "path": (str,), "recursive": (bool,)},
    "merge": {"source": (str,), "into": (str,), "message": (str,), "ff_only": (bool,), "no_ff": (bool,),
              "strategy": (str,), "strategy_option": (str,), "continue": (bool,), "abort": (bool,)},
    "cherry_pick": {"commit": (str,), "into": (str,), "strategy_option": (str,), "continue": (bool,), "abort": (bool,)},
    "revert": {"commit": (str,), "into": (str,), "strategy_option": (str,), "continue": (bool,), "abort": (bool,)},
}
REQUIRED = {"fork": ["name"], "branch_delete": ["name"], "rev_parse": ["ref"],
            "cat": ["commit", "path"], "export": ["commit", "dir"], "import": ["dir"],
            "mount": ["ref", "mountpoint"], "umount": ["mountpoint"], "commit": ["message"],
            "read_file": ["target", "path"], "write_file": ["target", "path"],
            "list_dir": ["target"], "remove_path": ["target", "path"],
            "remote_add": ["name", "url"], "remote_remove": ["name"], "restore": ["paths"],
            "clone": ["store", "url"]}
ERRNO = {"ENOENT": 2, "EEXIST": 17, "EBUSY": 16, "EINVAL": 22, "EISDIR": 21, "ENOTDIR": 20,
         "NOT_FAST_FORWARD": 0, "PROTOCOL": 0, "EIO": 5, "CONFLICT": 0}


class Fail(Exception):
    def __init__(self, code: str, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.result = code, message, result


class Model:
    """Branches, Commits and Workspaces: enough to answer every verb consistently."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.commits: dict[str, dict[str, Any]] = {}
        self.trees: dict[str, dict[str, bytes]] = {}
        self.branches: dict[str, str] = {}
        self.work: dict[str, dict[str, bytes]] = {}
        self.mounts: dict[str, str] = {}  # mountpoint -> branch
        self.merging: dict[str, str] = {}  # branch -> the Commit a stopped merge brings in
        self.seq = 0
        root = self._make_commit([], "init", {})
        self.branches["main"] = root
        self.work["main"] = {}

    def _make_commit(self, parents: list[str], message: str, tree: dict[str, bytes]) -> str:
        self.seq += 1
        cid = hashlib.md5(f"{self.seq}:{message}".encode()).hexdigest()
        self.commits[cid] = {"id": cid, "parents": parents, "root": hashlib.md5(repr(sorted(tree.items())).encode()).hexdigest(),
                             "message": message, "time": 1700000000 + self.seq, "time_nsec": 5,
                             "logical_bytes": sum(len(v) for v in tree.values()), "files": len(tree),
                             "from_a_newer_daemon": {"clients": "ignore it"}}
        self.trees[cid] = dict(tree)
        return cid

    def resolve(self, ref: str) -> str:
        base, _, back = ref.partition("~")
        if base in self.branches:
            cid = self.branches[base]
        else:
            hits = [c for c in self.commits if c.startswith(base)] if len(base) >= 4 else []
            if len(hits) != 1:
                raise Fail("ENOENT", f"no branch or commit '{ref}'")
            cid = hits[0]
        for _ in range(int(back or 0) if back else 0):
            parents = self.commits[cid]["parents"]
            if not parents:
                raise Fail("ENOENT", f"no branch or commit '{ref}'")
            cid = parents[0]
        return cid

    def branch_of(self, target: str | None) -> str:
        if target is None:
            raise Fail("EINVAL", "no target given and the working directory is not in a mount")
        if target in self.mounts:
            return self.mounts[target]
        if target in self.branches:
            return target
        raise Fail("ENOENT", f"no branch or mount '{target}'")

    @staticmethod
    def entry(data: bytes) -> dict[str, Any]:
        return {"type": "file", "mode": "0644", "size": len(data), "id": hashlib.md5(data).hexdigest()}

    def changes(self, a: dict[str, bytes], b: dict[str, bytes]) -> list[dict[str, Any]]:
        out = []
        for p in sorted(set(a) | set(b)):
            if p not in a:
                out.append({"path": p, "change": "A", "after": self.entry(b[p])})
            elif p not in b:
                out.append({"path": p, "change": "D", "before": self.entry(a[p])})
            elif a[p] != b[p]:
                out.append({"path": p, "change": "M", "before": self.entry(a[p]), "after": self.entry(b[p])})
        return out


class FakeDaemon:
    def __init__(self, store: str, protocol: int = 1) -> None:
        self.store = store
        self.protocol = protocol
        self.model = Model()
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path = os.path.join(store, "control.sock")
        if os.path.exists(path):
            os.unlink(path)
        self.sock.bind(path)
        os.chmod(path, 0o600)
        self.sock.listen(64)
        self.stopped = False
        self.clients: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stops listening and drops every connection, as a daemon that exits does."""
        self.stopped = True
        try:
            os.unlink(os.path.join(self.store, "control.sock"))
        except FileNotFoundError:
            pass
        self.sock.close()
        for c in list(self.clients):
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def drop_connections(self) -> None:
        for c in list(self.clients):
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _accept(self) -> None:
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self.clients.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket) -> None:
        f = c.makefile("rwb")
        try:
            for line in f:
                keep = self._one(f, line)
                f.flush()
                if not keep:
                    break
        except (OSError, ValueError):
            pass
        finally:
            try:
                c.close()
            except OSError:
                pass
            if c in self.clients:
                self.clients.remove(c)

    @staticmethod
    def _send(f: Any, msg: dict[str, Any]) -> None:
        f.write(json.dumps(msg).encode() + b"\n")

    def _one(self, f: Any, line: bytes) -> bool:
        try:
            req = json.loads(line)
        except ValueError:
            self._send(f, {"id": None, "ok": False, "error": {"code": "PROTOCOL", "errno": 0, "message": "bad JSON"}})
            return True
        self.requests.append(req)
        rid = req.get("id")
        if req.get("protocol") != self.protocol:
            self._send(f, {"id": rid, "ok": False, "error": {
                "code": "PROTOCOL", "errno": 0,
                "message": f"client speaks protocol {req.get('protocol')}, this layerfsd speaks {self.protocol}"}})
            return False
        verb = req.get("verb")
        args = req.get("args", {})
        try:
            if verb not in ARGS and verb not in ("slow", "boom"):
                raise Fail("EINVAL", f"unknown verb '{verb}'")
            for k, v in args.items():
                spec = ARGS.get(verb, {})
                if k not in spec:
                    raise Fail("EINVAL", f"{verb}: unknown argument '{k}'")
                if not isinstance(v, spec[k]) or (spec[k] == (int,) and isinstance(v, bool)):
                    raise Fail("EINVAL", f"{verb}: argument '{k}' has the wrong type")
            for k in REQUIRED.get(verb, []):
                if k not in args:
                    raise Fail("EINVAL", f"{verb}: missing argument '{k}'")
            with self.model.lock:
                result = self._verb(f, rid, verb, args, req.get("cwd", "/"))
            self._send(f, {"id": rid, "ok": True, "result": result})
        except Fail as e:
            error: dict[str, Any] = {"code": e.code, "errno": ERRNO.get(e.code, 0), "message": e.message}
            if e.result is not None:
                error["result"] = e.result
            self._send(f, {"id": rid, "ok": False, "error": error})
        return True

    def _merge(self, verb: str, a: dict[str, Any]) -> Any:
        """Merges as far as the SDK's side needs: a fast-forward, a clean merge Commit, or a
        conflict on every path both sides changed (stopped when the branch is mounted)."""
        m = self.model
        op = verb.replace("_", "-")
        into = m.branch_of(a.get("into"))
        mounted = into in m.mounts.values()
        mp = {"mountpoint": next(p for p, b in m.mounts.items() if b == into)} if mounted else {}
        if a.get("abort"):
            if into not in m.merging:
                raise Fail("ENOENT", f"no merge in progress in {into}")
            del m.merging[into]
            return {"op": op, "branch": into, "aborted": True}
        if a.get("continue"):
            if into not in m.merging:
                raise Fail("ENOENT", f"no merge in progress in {into}")
            theirs = m.merging.pop(into)
            ours = m.branches[into]
            cid = m._make_commit([ours, theirs], a.get("message", "merge"), {**m.trees[ours], **m.trees[theirs]})
            m.branches[into] = cid
            return {"op": op, "branch": into, **mp, "commit": cid, "fast_forward": False, "up_to_date": False,
                    "base": None, "bases": [], "ours": ours, "theirs": theirs, "stopped": False, "conflicts": []}
        theirs = m.resolve(a["source"] if verb == "merge" else a["commit"])
        ours = m.branches[into]
        out = {"op": op, "branch": into, **mp, "commit": None, "fast_forward": False, "up_to_date": False,
               "base": ours, "bases": [ours], "ours": ours, "theirs": theirs, "stopped": False, "conflicts": [],
               "from_a_newer_daemon": 1}
        if m.commits[theirs]["parents"][:1] == [ours] and not a.get("no_ff"):
            m.branches[into] = theirs
            return {**out, "commit": theirs, "fast_forward": True}
        if a.get("ff_only"):
            raise Fail("NOT_FAST_FORWARD", f"{into} cannot fast-forward to {a['source']}")
        both = sorted(p for p in m.trees[theirs] if p in m.trees[ours] and m.trees[theirs][p] != m.trees[ours][p])
        if both and a.get("strategy_option") not in ("ours", "theirs"):
            conflicts = [{"path": p, "kind": "content", "base": None, "ours": hashlib.md5(m.trees[ours][p]).hexdigest(),
                          "theirs": hashlib.md5(m.trees[theirs][p]).hexdigest(), "sides": []} for p in both]
            out = {**out, "stopped": mounted, "conflicts": conflicts}
            if mounted:
                m.merging[into] = theirs
            raise Fail("CONFLICT", f"{op} of {a.get('source')} into {into} has {len(both)} conflict(s)", out)
        cid = m._make_commit([ours, theirs], a.get("message", "merge"), {**m.trees[ours], **m.trees[theirs]})
        m.branches[into] = cid
        return {**out, "commit": cid}

    def _progress(self, f: Any, rid: Any, phase: str, n: int) -> None:
        for i in range(1, n + 1):
            self._send(f, {"id": rid, "event": "progress",
                           "progress": {"phase": phase, "objects": i, "objects_total": n, "bytes": i * 10}})
        self._send(f, {"id": rid, "event": "progress", "progress": {"phase": phase, "objects": n, "done": True}})
        self._send(f, {"id": rid, "event": "something-newer", "detail": 1})  # clients skip unknown events

    def _verb(self, f: Any, rid: Any, verb: str, a: dict[str, Any], cwd: str) -> Any:
        m = self.model
        if verb == "branches":
            mounted = {b: mp for mp, b in m.mounts.items()}
            return [{"name": n, "commit": c, **({"mountpoint": mounted[n]} if n in mounted else {})}
                    for n, c in sorted(m.branches.items())]
        if verb == "fork":
            if a["name"] in m.branches:
                raise Fail("EEXIST", f"branch '{a['name']}' already exists")
            cid = m.resolve(a.get("from", "main"))
            m.branches[a["name"]] = cid
            m.work[a["name"]] = dict(m.trees[cid])
            return {"branch": a["name"], "commit": cid}
        if verb == "branch_delete":
            if a["name"] not in m.branches:
                raise Fail("ENOENT", f"no branch '{a['name']}'")
            if a["name"] in m.mounts.values():
                raise Fail("EBUSY", f"branch '{a['name']}' is mounted")
            del m.branches[a["name"]]
            return {"branch": a["name"]}
        if verb == "log":
            cid, out = m.resolve(a.get("ref", "main")), []
            while cid and len(out) < a.get("max_count", 1 << 30):
                c = m.commits[cid]
                before = m.trees[c["parents"][0]] if c["parents"] else {}
                out.append({**c, "changes": m.changes(before, m.trees[cid])} if a.get("changes") else c)
                cid = c["parents"][0] if c["parents"] else None
            return out[::-1] if a.get("reverse") else out
        if verb == "rev_parse":
            return {"ref": a["ref"], "commit": m.resolve(a["ref"])}
        if verb == "show":
            cid = m.resolve(a["commit"])
            c = m.commits[cid]
            before = m.trees[c["parents"][0]] if c["parents"] else {}
            return {**c, "changes": m.changes(before, m.trees[cid])}
        if verb == "diff":
            x, y = (a["a"].split("...", 1) if "b" not in a else (a["a"], a["b"]))
            return m.changes(m.trees[m.resolve(x)], m.trees[m.resolve(y)])
        if verb == "cat":
            tree = m.trees[m.resolve(a["commit"])]
            if a["path"] not in tree:
                raise Fail("ENOENT", f"no path '{a['path']}' in {a['commit']}")
            data = tree[a["path"]]
            off = a.get("offset", 0)
            piece = data[off: off + a["length"] if "length" in a else None]
            return {"path": a["path"], "type": "file", "size": len(data), "content_base64": base64.b64encode(piece).decode()}
        if verb in ("export", "import", "verify", "gc"):
            self._progress(f, rid, verb, 3)
            if verb == "gc":
                return {"objects_deleted": 2, "bytes_before": 100, "bytes_after": 50}
            if verb == "verify":
                return {"ok": True, "commits": len(m.commits), "objects": 9, "bytes": 99, "problems": []}
            if verb == "export":
                return {"commit": m.resolve(a["commit"]), "dir": a["dir"], "files": 1, "bytes": 3}
            b = a.get("branch", "main")
            cid = m._make_commit([m.branches[b]], a.get("message", "import"), {"imported": b"x"})
            m.branches[b] = cid
            return {"commit": cid, "files": 1, "dirs": 1, "hashed": 1, "stat_hits": 0, "objects_added": 2, "bytes_added": 1}
        if verb == "mount":
            if a["mountpoint"] in m.mounts:
                raise Fail("EBUSY", f"{a['mountpoint']} is mounted already")
            if a["ref"] in m.branches:
                if a["ref"] in m.mounts.values():
                    raise Fail("EBUSY", f"branch '{a['ref']}' is mounted")
                m.mounts[a["mountpoint"]] = a["ref"]
                return {"mountpoint": a["mountpoint"], "ref": a["ref"], "branch": a["ref"], "commit": m.branches[a["ref"]],
                        "read_only": bool(a.get("read_only")), "transport": "fake"}
            cid = m.resolve(a["ref"])
            return {"mountpoint": a["mountpoint"], "commit": cid, "read_only": True, "transport": "fake"}
        if verb == "umount":
            if a["mountpoint"] not in m.mounts:
                raise Fail("ENOENT", f"{a['mountpoint']} is not mounted")
            del m.mounts[a["mountpoint"]]
            return {"mountpoint": a["mountpoint"]}
        if verb == "mounts":
            return [{"mountpoint": mp, "branch": b, "commit": m.branches[b], "read_only": False, "transport": "fake"}
                    for mp, b in sorted(m.mounts.items())]
        if verb == "commit":
            b = m.branch_of(a.get("target"))
            parents = [m.branches[b]]
            if a.get("amend"):
                parents = m.commits[parents[0]]["parents"]
            cid = m._make_commit(parents, a["message"], m.work[b])
            m.branches[b] = cid
            return {"commit": cid, "branch": b, "parents": parents}
        if verb == "status":
            b = m.branch_of(a.get("target"))
            st = {"branch": b, "changes": m.changes(m.trees[m.branches[b]], m.work[b]), "conflicts": []}
            if b in m.merging:
                st["conflicts"] = [{"path": "f", "kind": "content", "base": None, "ours": "1" * 32,
                                    "theirs": "2" * 32, "sides": [], "resolved": False}]
                st["merging"] = {"source": "y", "theirs": m.merging[b], "unresolved": 1}
            return st
        if verb == "reset":
            b = m.branch_of(a.get("target"))
            if "hard" in a:
                m.branches[b] = m.resolve(a["hard"])
            m.work[b] = dict(m.trees[m.branches[b]])
            return {"branch": b, "commit": m.branches[b]}
        if verb == "stats":
            return {"policy": "16/8/8", "commits": len(m.commits), "branches": len(m.branches)}
        if verb == "read_file":
            w = m.work[m.branch_of(a["target"])]
            if a["path"] not in w:
                raise Fail("ENOENT", f"no such file '{a['path']}'")
            off = a.get("offset", 0)
            data = w[a["path"]][off: off + a["length"] if "length" in a else None]
            return {"path": a["path"], "size": len(w[a["path"]]), "content_base64": base64.b64encode(data).decode()}
        if verb == "write_file":
            w = m.work[m.branch_of(a["target"])]
            if ("content" in a) == ("content_base64" in a):
                raise Fail("EINVAL", "write_file: give exactly one of content and content_base64")
            if "mode" in a and not (a["mode"] and all(ch in "01234567" for ch in a["mode"]) and int(a["mode"], 8) <= 0o7777):
                raise Fail("EINVAL", f"write_file: mode '{a['mode']}' is not octal permission bits")
            data = a["content"].encode() if "content" in a else base64.b64decode(a["content_base64"])
            w[a["path"]] = (w.get(a["path"], b"") + data) if a.get("append") else data
            return {"path": a["path"], "size": len(w[a["path"]])}
        if verb == "list_dir":
            w = m.work[m.branch_of(a["target"])]
            return [{"name": p, "type": "file", "mode": "0644", "size": len(d)} for p, d in sorted(w.items())]
        if verb == "remove_path":
            w = m.work[m.branch_of(a["target"])]
            if a["path"] not in w:
                raise Fail("ENOENT", f"no such file '{a['path']}'")
            del w[a["path"]]
            return {"path": a["path"]}
        if verb in ("merge", "cherry_pick", "revert"):
            return self._merge(verb, a)
        if verb == "slow":
            time.sleep(0.2)
            return {"slept": 0.2}
        raise Fail("EIO", "boom")


def main() -> int:
    store = sys.argv[sys.argv.index("--store") + 1]
    idle = int(sys.argv[sys.argv.index("--idle") + 1])
    log = os.path.join(store, "fake-starts")
    with open(log, "a") as f:
        f.write(" ".join(a for a in sys.argv[1:] if a != store) + "\n")
    r, w = os.pipe()
    pid = os.fork()
    if pid > 0:
        os.close(w)
        ok = os.read(r, 2) == b"ok"
        return 0 if ok else 1
    os.close(r)
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    FakeDaemon(store)
    with open(os.path.join(store, "layerfsd.pid"), "w") as f:
        f.write(f"{os.getpid()}\n")
    os.write(w, b"ok")
    os.close(w)
    time.sleep(idle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
