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
        assert last(fake)["args"]["append"] is True and last(fake)["args"]["mode"] == 0o600
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
        with pytest.raises(layerfs.Conflict) as e5:
            s.request("conflict")
        assert e5.value.result == {"conflicts": [{"path": "a", "kind": "content"}]}
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
    conflict = from_wire({"code": "CONFLICT", "errno": 0, "message": "2 conflicts", "result": {"conflicts": ["a"]}})
    assert conflict.result == {"conflicts": ["a"]}
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
        assert (store_dir / "fake-starts").read_text() == "--idle 7\n"
        # The daemon is running now: the next client connects without starting another.
        with layerfs.Store.open(store_dir) as s:
            s.fork("again")
        assert (store_dir / "fake-starts").read_text() == "--idle 7\n"
    finally:
        _end(store_dir)


def test_autostart_failure_is_a_clear_error(store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = tmp_path / "layerfsd"
    exe.write_text("#!/bin/sh\necho 'layerfsd: store is damaged: bad table' >&2\nexit 1\n")
    exe.chmod(0o755)
    monkeypatch.setenv("LAYERFSD", str(exe))
    with pytest.raises(layerfs.LayerFSError) as e:
        layerfs.Store.open(store_dir)
    assert e.value.message == f"cannot start layerfsd for {store_dir.resolve()}: store is damaged: bad table"
    monkeypatch.setenv("LAYERFSD", str(tmp_path / "missing"))
    with pytest.raises(layerfs.NotFound):
        layerfs.Store.open(store_dir)


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
