"""The SDK's side of docs/protocol.md, against a fake daemon: what goes on the wire for each verb,
how results, errors, events and lost connections come back, the asyncio client, auto-start."""

from __future__ import annotations

import asyncio
import base64
import errno
import os
import signal
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

import layerfs
from layerfs import _core
from fake_server import FakeDaemon

HEX32 = "0123456789abcdef"


def last(fake: FakeDaemon) -> dict:
    return fake.requests[-1]


def test_request_shape_and_results(fake: FakeDaemon, store_dir: Path) -> None:
    with layerfs.Store.open(store_dir) as s:
        [main] = s.branches()
        assert main.name == "main" and len(main.commit) == 32 and main.mountpoint is None
        req = last(fake)
        assert req["protocol"] == 1 and req["verb"] == "branches" and req["args"] == {}
        assert req["cwd"] == os.getcwd()
        ids = [r["id"] for r in fake.requests]
        assert len(set(ids)) == len(ids)

        b = s.fork("try", "main")
        assert (b.name, b.commit) == ("try", main.commit)
        assert last(fake)["args"] == {"name": "try", "from": "main"}

        m = s.mount("try", "rel/mp")
        assert last(fake)["args"] == {"ref": "try", "mountpoint": os.path.abspath("rel/mp")}
        assert m.branch == "try" and m.ref == "try" and m.read_only is False and m.mountpoint == os.path.abspath("rel/mp")
        s.mount(main.commit, "/ro", read_only=True)
        assert last(fake)["args"] == {"ref": main.commit, "mountpoint": "/ro", "read_only": True}
        s.mount(main.commit, "/ro2", single_threaded=True, no_follow_cpu=True)
        assert last(fake)["args"] == {"ref": main.commit, "mountpoint": "/ro2", "single_threaded": True,
                                      "no_follow_cpu": True}

        assert s.write_file("try", "a.txt", "hello\n") == 6
        wreq = last(fake)
        assert wreq["verb"] == "write_file"
        assert base64.b64decode(wreq["args"]["content_base64"]) == b"hello\n"
        assert "append" not in wreq["args"] and "mode" not in wreq["args"]
        assert s.write_file("try", "a.txt", b"more", append=True, mode=0o600) == 10
        # The protocol takes permission bits as octal digits in a string.
        assert last(fake)["args"]["append"] is True and last(fake)["args"]["mode"] == "0600"
        s.write_file("try", "x.sh", b"#!/bin/sh\n", mode="0755")
        assert last(fake)["args"]["mode"] == "0755"
        n = len(fake.requests)
        for bad in (0o17777, -1, True):
            with pytest.raises(layerfs.InvalidArgument):
                s.write_file("try", "x.sh", b"", mode=bad)  # type: ignore[arg-type]
        assert len(fake.requests) == n  # refused before anything was sent
        with pytest.raises(layerfs.InvalidArgument):
            s.write_file("try", "x.sh", b"", mode="9")  # the daemon's check
        s.remove_path("try", "x.sh")
        assert s.read_file("try", "a.txt") == b"hello\nmore"
        assert s.read_file("try", "a.txt", offset=6, length=2) == b"mo"
        assert last(fake)["args"] == {"target": "try", "path": "a.txt", "offset": 6, "length": 2}
        assert [(e.name, e.size) for e in s.list_dir("try")] == [("a.txt", 10)]

        st = s.status(os.path.abspath("rel/mp"))
        assert st.branch == "try" and [(c.path, c.change) for c in st.changes] == [("a.txt", "A")]
        assert st.changes[0].after is not None and st.changes[0].after.size == 10

        cid = s.commit(Path("rel/mp"), "first")
        assert isinstance(cid, str) and len(cid) == 32 and set(cid) <= set(HEX32)
        assert last(fake)["args"] == {"target": os.path.abspath("rel/mp"), "message": "first"}
        assert s.status("try").changes == []

        log = s.log("try")
        assert [c.id for c in log] == [cid, main.commit]
        assert log[0].parents == [main.commit] and log[0].message == "first"
        assert log[0].time == 1700000000 + 2 and log[0].datetime.year == 2023
        assert [c.id for c in s.log("try", max_count=1)] == [cid]
        assert last(fake)["args"] == {"ref": "try", "max_count": 1}

        shown = s.show(cid)
        assert shown.id == cid and [c.path for c in shown.changes or []] == ["a.txt"]
        d = s.diff(main.commit, cid)
        assert [(c.path, c.change) for c in d] == [("a.txt", "A")]
        assert d[0].before is None and d[0].after is not None and d[0].after.mode == "0644"
        assert s.diff(f"{main.commit}...{cid}") == d
        assert last(fake)["args"] == {"a": f"{main.commit}...{cid}"}
        assert s.cat(cid, "a.txt") == b"hello\nmore"
        assert last(fake)["args"] == {"commit": cid, "path": "a.txt", "length": _core.CHUNK}
        assert s.cat(cid, "a.txt", offset=1, length=3) == b"ell"
        assert last(fake)["args"] == {"commit": cid, "path": "a.txt", "offset": 1, "length": 3}

        s.remove_path("try", "a.txt")
        assert last(fake)["args"] == {"target": "try", "path": "a.txt"}
        r = s.reset("try")
        assert r.commit == cid and s.read_file("try", "a.txt") == b"hello\nmore"
        r = s.reset("try", hard="try~1")
        assert r.commit == main.commit and last(fake)["args"] == {"target": "try", "hard": "try~1"}

        mounts = s.mounts()
        assert [m.mountpoint for m in mounts] == [os.path.abspath("rel/mp")]
        assert {b.name: b.mountpoint for b in s.branches()}["try"] == os.path.abspath("rel/mp")
        s.umount("rel/mp")
        assert s.mounts() == []
        s.branch_delete("try")
        assert [b.name for b in s.branches()] == ["main"]

        assert s.stats()["policy"] == "16/8/8"
        assert s.export(main.commit, "out").dir == os.path.abspath("out")
        imp = s.import_dir("tree", branch="main", message="imp")
        assert len(imp.commit) == 32 and imp.files == 1
        assert last(fake)["args"] == {"dir": os.path.abspath("tree"), "branch": "main", "message": "imp"}
        v = s.verify([main.commit])
        assert v.ok and v.problems == [] and last(fake)["args"] == {"commits": [main.commit]}
        s.verify()
        assert last(fake)["args"] == {}
        g = s.gc()
        assert (g.objects_deleted, g.bytes_before, g.bytes_after) == (2, 100, 50)
        assert s.request("stats")["commits"] >= 2


def test_errors_by_code(fake: FakeDaemon, store_dir: Path) -> None:
    with layerfs.Store.open(store_dir) as s:
        with pytest.raises(layerfs.NotFound) as e:
            s.fork("x", "nosuch")
        assert e.value.code == "ENOENT" and e.value.errno == errno.ENOENT
        assert e.value.message == "no branch or commit 'nosuch'"
        assert str(e.value) == "layerfs: no branch or commit 'nosuch'"
        assert isinstance(e.value, layerfs.LayerFSError)

        s.fork("x")
        with pytest.raises(layerfs.Exists) as e2:
            s.fork("x")
        assert e2.value.errno == errno.EEXIST

        s.mount("x", "/mp")
        with pytest.raises(layerfs.Busy) as e3:
            s.branch_delete("x")
        assert e3.value.code == "EBUSY" and e3.value.errno == errno.EBUSY
        with pytest.raises(layerfs.Busy):
            s.mount("x", "/mp2")

        with pytest.raises(layerfs.InvalidArgument) as e4:
            s.request("log", {"nonsense": 1})
        assert "nonsense" in e4.value.message
        with pytest.raises(layerfs.IOFailure):
            s.request("boom")
        # After errors the connection is still good.
        assert [b.name for b in s.branches()] == ["main", "x"]


def test_error_classes_map_every_documented_code() -> None:
    from layerfs.errors import from_wire

    cases = {"ENOENT": layerfs.NotFound, "EEXIST": layerfs.Exists, "EBUSY": layerfs.Busy,
             "EINVAL": layerfs.InvalidArgument, "ENOTDIR": layerfs.NotADirectory,
             "EISDIR": layerfs.IsADirectory, "EROFS": layerfs.ReadOnly, "ENOSPC": layerfs.NoSpace,
             "EIO": layerfs.IOFailure, "EACCES": layerfs.PermissionDenied,
             "ENOTCONN": layerfs.NotConnected, "ESTALE": layerfs.Stale, "ETIMEDOUT": layerfs.Unreachable,
             "ECONNREFUSED": layerfs.Unreachable, "EHOSTUNREACH": layerfs.Unreachable,
             "NOT_FAST_FORWARD": layerfs.NotFastForward, "CONFLICT": layerfs.Conflict,
             "DIVERGED": layerfs.Diverged, "PROTOCOL": layerfs.ProtocolError, "TOO_LARGE": layerfs.TooLarge}
    for code, cls in cases.items():
        e = from_wire({"code": code, "errno": 7, "message": "m"})
        assert type(e) is cls and e.code == code and e.errno == 7 and e.message == "m"
    other = from_wire({"code": "ENAMETOOLONG", "errno": 36, "message": "long"})
    assert type(other) is layerfs.LayerFSError and other.code == "ENAMETOOLONG"
    conflict = from_wire({"code": "CONFLICT", "errno": 0, "message": "2 conflicts", "result": {"conflicts": []}})
    assert conflict.result == {"conflicts": []}
    assert type(from_wire("junk")) is layerfs.ProtocolError


def test_protocol_version_mismatch(store_dir: Path) -> None:
    d = FakeDaemon(str(store_dir), protocol=2)
    try:
        with layerfs.Store.open(store_dir) as s:
            with pytest.raises(layerfs.ProtocolError) as e:
                s.branches()
            assert e.value.message == "client speaks protocol 1, this layerfsd speaks 2"
    finally:
        d.stop()


def test_progress_events(fake: FakeDaemon, store_dir: Path) -> None:
    seen: list[layerfs.Progress] = []
    with layerfs.Store.open(store_dir) as s:
        s.gc(progress=seen.append)
        assert [(p.phase, p.objects, p.objects_total, p.bytes_total, p.done) for p in seen] == [
            ("gc", 1, 3, None, None), ("gc", 2, 3, None, None), ("gc", 3, 3, None, None), ("gc", 3, None, None, True)]
        assert s.verify().ok  # events without a callback are read and dropped
    default: list[layerfs.Progress] = []
    with layerfs.Store.open(store_dir, progress=default.append) as s:
        s.import_dir("d")
        assert [p.phase for p in default] == ["import"] * 4
        mine: list[layerfs.Progress] = []
        s.export("main", "x", progress=mine.append)
        assert len(mine) == 4 and len(default) == 4


def test_progress_callback_that_raises_spoils_only_its_connection(fake: FakeDaemon, store_dir: Path) -> None:
    def bad(_: layerfs.Progress) -> None:
        raise RuntimeError("stop")

    with layerfs.Store.open(store_dir) as s:
        with pytest.raises(RuntimeError):
            s.gc(progress=bad)
        assert s.branches()[0].name == "main"


def test_reconnects_when_the_daemon_dropped_an_idle_connection(fake: FakeDaemon, store_dir: Path) -> None:
    with layerfs.Store.open(store_dir) as s:
        s.branches()
        before = fake.connections
        fake.drop_connections()
        time.sleep(0.05)
        assert s.branches()[0].name == "main"
        assert fake.connections == before + 1


def test_threads_share_one_store(fake: FakeDaemon, store_dir: Path) -> None:
    errors: list[BaseException] = []
    with layerfs.Store.open(store_dir) as s:
        def work(i: int) -> None:
            try:
                s.fork(f"b{i}")
                for _ in range(20):
                    assert any(b.name == f"b{i}" for b in s.branches())
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert errors == []
        assert len(s.branches()) == 9


def test_large_content_moves_in_pieces(fake: FakeDaemon, store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_core, "CHUNK", 1000)
    data = os.urandom(2500)
    with layerfs.Store.open(store_dir) as s:
        n0 = len(fake.requests)
        assert s.write_file("main", "big", data) == 2500
        writes = fake.requests[n0:]
        assert [r["args"].get("append", False) for r in writes] == [False, True, True]
        n1 = len(fake.requests)
        assert s.read_file("main", "big") == data
        assert [r["args"]["offset"] if "offset" in r["args"] else 0 for r in fake.requests[n1:]] == [0, 1000, 2000]
        assert s.read_file("main", "big", offset=900, length=1200) == data[900:2100]
        s.commit("main", "big")
        n2 = len(fake.requests)
        assert s.cat("main", "big") == data
        # The whole file's size ends the read without a last empty piece.
        assert [r["args"].get("offset", 0) for r in fake.requests[n2:]] == [0, 1000, 2000]
        assert s.cat("main", "big", offset=2400) == data[2400:]
        assert s.write_file("main", "empty", b"") == 0
        assert s.read_file("main", "empty") == b""


def test_open_needs_a_store(tmp_path: Path) -> None:
    with pytest.raises(layerfs.NotFound):
        layerfs.Store.open(tmp_path / "absent")
    with pytest.raises(layerfs.NotFound):
        layerfs.Store.open(tmp_path)  # a directory, but no LAYERFS marker


def test_no_daemon_without_autostart(store_dir: Path) -> None:
    with pytest.raises(layerfs.NotConnected):
        layerfs.Store.open(store_dir, autostart=False)


def _fake_layerfsd(tmp_path: Path) -> str:
    exe = tmp_path / "layerfsd"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {Path(__file__).parent / 'fake_server.py'} \"$@\"\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe)


def _end(store_dir: Path) -> None:
    try:
        os.kill(int((store_dir / "layerfsd.pid").read_text()), signal.SIGKILL)
    except (OSError, ValueError):
        pass


def test_autostart_runs_layerfsd_with_idle(store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAYERFSD", _fake_layerfsd(tmp_path))
    try:
        with layerfs.Store.open(store_dir, idle=7) as s:
            assert s.branches()[0].name == "main"
        assert (store_dir / "fake-starts").read_text() == "--store --json --idle 7\n"
        # The daemon is running now: the next client connects without starting another.
        with layerfs.Store.open(store_dir) as s:
            s.fork("again")
        assert (store_dir / "fake-starts").read_text() == "--store --json --idle 7\n"
    finally:
        _end(store_dir)


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_autostart_failure_keeps_the_daemons_code(store_dir: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # layerfsd --json reports why on its last stderr line; the code is taken from there alone.
    for code, cls, num in [("EBUSY", layerfs.Busy, 16), ("EIO", layerfs.IOFailure, 5),
                           ("ENOENT", layerfs.NotFound, 2), ("EWHATEVER", layerfs.LayerFSError, 99)]:
        monkeypatch.setenv("LAYERFSD", _script(tmp_path / f"layerfsd-{code}", (
            'echo "$@" > "$0.args"\necho "some log line" >&2\n'
            f'echo \'{{"error": {{"code": "{code}", "errno": {num}, "message": "the store is in use: lock held"}}}}\' >&2\n'
            "exit 1\n")))
        with pytest.raises(layerfs.LayerFSError) as e:
            layerfs.Store.open(store_dir)
        assert type(e.value) is cls and e.value.code == code and e.value.errno == num
        assert e.value.message == f"cannot start layerfsd for {store_dir.resolve()}: the store is in use: lock held"
        assert (tmp_path / f"layerfsd-{code}.args").read_text().split() == [
            "--store", str(store_dir.resolve()), "--json", "--idle", "60"]
    # Words without the error object give no code but EIO, whatever they say.
    monkeypatch.setenv("LAYERFSD", _script(tmp_path / "old", "echo 'layerfsd: store is in use (lock)' >&2\nexit 1\n"))
    with pytest.raises(layerfs.IOFailure) as e2:
        layerfs.Store.open(store_dir)
    assert e2.value.message.endswith(": layerfsd: store is in use (lock)")
    monkeypatch.setenv("LAYERFSD", str(tmp_path / "missing"))
    with pytest.raises(layerfs.NotFound):
        layerfs.Store.open(store_dir)


def test_init_runs_layerfs_init_json_and_keeps_its_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for code, cls in [("EEXIST", layerfs.Exists), ("EINVAL", layerfs.InvalidArgument), ("ENOENT", layerfs.NotFound),
                      ("EACCES", layerfs.PermissionDenied)]:
        monkeypatch.setenv("LAYERFS", _script(tmp_path / f"layerfs-{code}", (
            'printf "%s\\n" "$@" > "$0.args"\n'
            f'echo \'{{"error": {{"code": "{code}", "errno": 1, "message": "m"}}}}\' >&2\nexit 1\n')))
        with pytest.raises(layerfs.LayerFSError) as e:
            layerfs.Store.init(tmp_path / "rel" / "s", policy="8/4/4", from_dir="tree", message="first")
        assert type(e.value) is cls and e.value.code == code and e.value.message == "m"
        assert (tmp_path / f"layerfs-{code}.args").read_text().splitlines() == [
            "init", str(tmp_path / "rel" / "s"), "--policy", "8/4/4", "--from", os.path.abspath("tree"), "-m", "first",
            "--json"]
    # A usage error (exit 2, text) is InvalidArgument; other text is EIO.
    monkeypatch.setenv("LAYERFS", _script(tmp_path / "usage", "echo 'layerfs: --policy: 1 required' >&2\nexit 2\n"))
    with pytest.raises(layerfs.InvalidArgument) as e2:
        layerfs.Store.init(tmp_path / "u")
    assert e2.value.message == "--policy: 1 required"
    monkeypatch.setenv("LAYERFS", _script(tmp_path / "crash", "echo 'Segmentation fault: already exists' >&2\nexit 139\n"))
    with pytest.raises(layerfs.IOFailure):
        layerfs.Store.init(tmp_path / "u")
    monkeypatch.setenv("LAYERFS", str(tmp_path / "missing"))
    with pytest.raises(layerfs.NotFound):
        layerfs.Store.init(tmp_path / "u")


def test_finding_the_programs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # docs/protocol.md: layerfs is $LAYERFS, else on PATH; layerfsd is $LAYERFSD, else beside
    # layerfs (symbolic links resolved), else on PATH.
    real = tmp_path / "opt" / "bin"
    real.mkdir(parents=True)
    _script(real / "layerfs", "")
    _script(real / "layerfsd", "")
    onpath = tmp_path / "path"
    onpath.mkdir()
    (onpath / "layerfs").symlink_to(real / "layerfs")
    _script(onpath / "layerfsd", "")
    monkeypatch.delenv("LAYERFS", raising=False)
    monkeypatch.delenv("LAYERFSD", raising=False)
    monkeypatch.setenv("PATH", str(onpath))
    assert _core.find_layerfs() == str(onpath / "layerfs")
    assert _core.find_layerfsd() == str(real / "layerfsd")
    (real / "layerfsd").unlink()
    assert _core.find_layerfsd() == str(onpath / "layerfsd")
    monkeypatch.setenv("LAYERFS", str(real / "layerfs"))
    assert _core.find_layerfs() == str(real / "layerfs")
    monkeypatch.setenv("LAYERFSD", "/x/layerfsd")
    assert _core.find_layerfsd() == "/x/layerfsd"
    monkeypatch.delenv("LAYERFS")
    monkeypatch.delenv("LAYERFSD")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(layerfs.NotFound):
        _core.find_layerfs()
    with pytest.raises(layerfs.NotFound):
        _core.find_layerfsd()


def test_merge_verbs_and_conflicts(fake: FakeDaemon, store_dir: Path) -> None:
    with layerfs.Store.open(store_dir) as s:
        for b in ("x", "y"):
            s.fork(b)
        s.write_file("y", "f", "y\n")
        y1 = s.commit("y", "y1")
        ff = s.merge("y", "x")
        assert last(fake)["args"] == {"source": "y", "into": "x"}
        assert ff.op == "merge" and ff.fast_forward and ff.commit == y1 and ff.conflicts == [] and not ff.aborted
        s.write_file("x", "f", "x\n")
        s.commit("x", "x2")
        s.write_file("y", "f", "y2\n")
        s.commit("y", "y2")
        with pytest.raises(layerfs.NotFastForward):
            s.merge("y", "x", ff_only=True)
        assert last(fake)["args"] == {"source": "y", "into": "x", "ff_only": True}
        # Not mounted: the conflict changes nothing, and its result is a MergeResult.
        with pytest.raises(layerfs.Conflict) as e:
            s.merge("y", "x", message="m", no_ff=True, strategy="ort")
        assert last(fake)["args"] == {"source": "y", "into": "x", "message": "m", "no_ff": True, "strategy": "ort"}
        r = e.value.result
        assert isinstance(r, layerfs.MergeResult) and r.commit is None and not r.stopped
        assert [(c.path, c.kind, c.sides) for c in r.conflicts] == [("f", "content", [])]
        assert isinstance(r.conflicts[0], layerfs.MergeConflict) and len(r.conflicts[0].ours or "") == 32
        ok = s.merge("y", "x", strategy_option="theirs")
        assert ok.commit is not None and len(ok.bases) == 1
        # Mounted: the merge stops; status shows it; continue and abort.
        s.fork("z", "x~1")
        s.write_file("z", "f", "z\n")
        s.commit("z", "z")
        s.mount("z", "/mz")
        with pytest.raises(layerfs.Conflict) as e2:
            s.merge("y", "/mz")
        assert isinstance(e2.value.result, layerfs.MergeResult) and e2.value.result.stopped
        assert e2.value.result.mountpoint == "/mz"
        st = s.status("z")
        assert st.merging == layerfs.MergeState(source="y", theirs=st.merging.theirs if st.merging else "", unresolved=1)
        assert [(c.path, c.resolved) for c in st.conflicts] == [("f", False)]
        ab = s.merge_abort("/mz")
        assert last(fake)["args"] == {"into": "/mz", "abort": True}
        assert ab.aborted and ab.branch == "z" and ab.op == "merge" and ab.commit is None
        with pytest.raises(layerfs.Conflict):
            s.cherry_pick("y", "z")
        assert last(fake)["verb"] == "cherry_pick" and last(fake)["args"] == {"commit": "y", "into": "z"}
        picked = s.merge_continue("z", op="cherry-pick")
        assert last(fake)["verb"] == "cherry_pick" and last(fake)["args"] == {"into": "z", "continue": True}
        assert picked.op == "cherry-pick" and picked.commit is not None
        s.write_file("z", "f", "z again\n")
        s.commit("z", "z2")
        with pytest.raises(layerfs.Conflict):
            s.merge("y", "/mz")
        done = s.merge_continue("z", message="resolved")
        assert last(fake)["verb"] == "merge"
        assert last(fake)["args"] == {"into": "z", "message": "resolved", "continue": True}
        assert done.commit is not None and done.conflicts == [] and s.status("z").merging is None
        s.revert(y1, "x", strategy_option="ours")
        assert last(fake)["verb"] == "revert" and last(fake)["args"] == {"commit": y1, "into": "x",
                                                                          "strategy_option": "ours"}
        with pytest.raises(layerfs.InvalidArgument):
            s.merge_continue("z", op="rebase")


def test_unknown_fields_and_events_are_ignored(fake: FakeDaemon, store_dir: Path) -> None:
    # docs/protocol.md, "Versions and compatibility": a newer daemon of version 1 may add them.
    with layerfs.Store.open(store_dir) as s:
        seen: list[layerfs.Progress] = []
        log = s.log()
        assert log[0].message == "init" and not hasattr(log[0], "from_a_newer_daemon")
        s.verify(progress=seen.append)  # the fake ends with an event kind no SDK knows
        assert len(seen) == 4
        assert s.branches()[0].name == "main"  # and the connection is still in step


def test_async_api(fake: FakeDaemon, store_dir: Path) -> None:
    async def main() -> None:
        seen: list[layerfs.Progress] = []
        async with await layerfs.AsyncStore.open(store_dir) as s:
            branches = await asyncio.gather(*(s.fork(f"a{i}") for i in range(6)))
            assert sorted(b.name for b in branches) == [f"a{i}" for i in range(6)]
            assert fake.connections >= 2  # concurrent calls use their own connections
            await s.write_file("a0", "f", b"x" * 10)
            cid = await s.commit("a0", "async")
            log = await s.log("a0")
            assert log[0].id == cid and log[0].message == "async"
            assert (await s.cat(cid, "f")) == b"x" * 10
            assert [c.change for c in await s.diff("main", cid)] == ["A"]
            await s.gc(progress=seen.append)
            assert len(seen) == 4 and seen[-1].done
            with pytest.raises(layerfs.NotFound) as e:
                await s.log("nosuch")
            assert e.value.errno == errno.ENOENT
            with pytest.raises(layerfs.Exists):
                await s.fork("a1")
            fake.drop_connections()
            await asyncio.sleep(0.05)
            assert len(await s.branches()) == 7
        with pytest.raises(layerfs.NotConnected):
            await s.branches()

    asyncio.run(main())


def test_a_request_over_the_limit_is_refused_before_sending(fake: FakeDaemon, store_dir: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_core, "MAX_MESSAGE", 4096)
    with layerfs.Store.open(store_dir) as s:
        n = len(fake.requests)
        with pytest.raises(layerfs.TooLarge) as e:
            s.request("write_file", {"target": "main", "path": "x", "content_base64": "A" * 5000})
        assert e.value.code == "TOO_LARGE" and len(fake.requests) == n
        assert s.branches()[0].name == "main"
