"""The Python SDK against the real layerfsd and real FUSE mounts ($LAYERFS names the built CLI;
layerfsd is found beside it). Each test has its own Store; its daemon and mounts end with it."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

import layerfs
from conftest import layerfs_bin

ID = re.compile(r"^[0-9a-f]{32}$")


def daemon_pid(store: Path) -> int | None:
    try:
        pid = int((store / "layerfsd.pid").read_text().split()[0])
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError, IndexError):
        return None


def test_init_open_and_the_verbs_on_a_real_mount(real_store: Path, tmp_path: Path) -> None:
    layerfs_bin()
    with layerfs.Store.init(real_store) as s:
        [main] = s.branches()
        assert main.name == "main" and ID.match(main.commit) and main.mountpoint is None
        root = main.commit

        b = s.fork("try", "main")
        assert (b.name, b.commit) == ("try", root)
        mp = tmp_path / "mp"
        mp.mkdir()
        m = s.mount("try", mp)
        assert m.mountpoint == str(mp) and m.branch == "try" and m.read_only is False
        assert [x.mountpoint for x in s.mounts()] == [str(mp)]
        assert {x.name: x.mountpoint for x in s.branches()}["try"] == str(mp)

        payload = os.urandom(200_000)
        (mp / "src").mkdir()
        (mp / "src" / "a.bin").write_bytes(payload)
        (mp / "notes.txt").write_text("first\n")
        st = s.status(mp)
        assert st.branch == "try"
        assert {(c.path, c.change) for c in st.changes} >= {("src/a.bin", "A"), ("notes.txt", "A")}

        c1 = s.commit(mp, "two files")
        assert ID.match(c1)
        assert s.status("try").changes == []
        log = s.log("try")
        assert [c.id for c in log] == [c1, root]
        assert log[0].parents == [root] and log[0].message == "two files"
        assert abs(log[0].time - time.time()) < 3600 and 0 <= log[0].time_nsec < 10**9
        assert log[0].files == 3 and log[0].logical_bytes == len(payload) + 6  # entries: src, src/a.bin, notes.txt
        assert [c.id for c in s.log("try", max_count=1)] == [c1]

        (mp / "notes.txt").write_text("second\n")
        os.unlink(mp / "src" / "a.bin")
        c2 = s.commit(str(mp), "edit")
        changes = {c.path: c for c in s.diff(c1, c2)}
        assert changes["notes.txt"].change == "M" and changes["src/a.bin"].change == "D"
        assert changes["notes.txt"].after is not None and changes["notes.txt"].after.size == 7
        assert changes["src/a.bin"].before is not None and changes["src/a.bin"].before.size == len(payload)
        shown = s.show(c2)
        assert shown.id == c2 and {c.path for c in shown.changes or []} == set(changes)
        assert s.cat(c1, "src/a.bin") == payload
        assert s.cat(c2, "notes.txt") == b"second\n"

        out = tmp_path / "export"
        ex = s.export(c1, out)
        assert ex.commit == c1 and ex.files == 2
        assert (out / "src" / "a.bin").read_bytes() == payload

        # Files of the live Workspace through the protocol; the mount sees them at once.
        assert s.write_file("try", "api.txt", "from the sdk\n") == 13
        assert (mp / "api.txt").read_text() == "from the sdk\n"
        s.write_file(mp, "api.txt", b"more\n", append=True)
        assert (mp / "api.txt").read_bytes() == b"from the sdk\nmore\n"
        (mp / "shell.txt").write_bytes(b"written by the shell")
        assert s.read_file("try", "shell.txt") == b"written by the shell"
        assert s.read_file("try", "shell.txt", offset=11, length=5) == b"by th"
        names = {e.name: e for e in s.list_dir("try")}
        assert {"api.txt", "shell.txt", "notes.txt", "src"} <= set(names)
        assert names["src"].type in ("dir", "directory") and names["shell.txt"].size == 20
        s.remove_path("try", "shell.txt")
        assert not (mp / "shell.txt").exists()
        s.remove_path("try", "src", recursive=True)
        assert not (mp / "src").exists()

        r = s.reset(mp)
        assert r.branch == "try" and r.commit == c2
        assert not (mp / "api.txt").exists() and (mp / "src").is_dir()
        r = s.reset("try", hard=c1)
        assert r.commit == c1 and (mp / "notes.txt").read_text() == "first\n"

        s.umount(mp)
        assert s.mounts() == [] and not os.path.ismount(mp)

        # An unmounted branch's Workspace is reachable too.
        s.write_file("try", "offline.txt", b"no mount")
        assert s.read_file("try", "offline.txt") == b"no mount"
        c3 = s.commit("try", "offline")
        assert s.cat(c3, "offline.txt") == b"no mount"

        tree = tmp_path / "tree"
        (tree / "d").mkdir(parents=True)
        (tree / "d" / "x").write_bytes(b"x" * 1000)
        imp = s.import_dir(tree, branch="main", message="imported")
        assert ID.match(imp.commit) and imp.files == 1
        assert s.log("main", 1)[0].message == "imported"

        st = s.stats()
        assert st["commits"] >= 5 and st["branches"] == 2 and st["policy"] == "16/8/8"
        assert st["allocated_bytes"] > 0
        v = s.verify()
        assert v.ok and v.problems == [] and v.commits >= 5 and v.objects > 0
        assert s.verify([c1]).ok
        s.branch_delete("try")
        assert [b.name for b in s.branches()] == ["main"]
        g = s.gc()
        assert g.objects_deleted > 0 and g.bytes_after <= g.bytes_before


def test_errors_carry_codes(real_store: Path, tmp_path: Path) -> None:
    with layerfs.Store.init(real_store) as s:
        with pytest.raises(layerfs.NotFound) as e:
            s.log("no-such-branch")
        assert e.value.code == "ENOENT" and e.value.errno == errno.ENOENT and "no-such-branch" in e.value.message
        with pytest.raises(layerfs.NotFound):
            s.cat("main", "absent.txt")
        s.fork("b")
        with pytest.raises(layerfs.Exists) as e2:
            s.fork("b")
        assert e2.value.code == "EEXIST" and e2.value.errno == errno.EEXIST
        mp = tmp_path / "mp"
        mp.mkdir()
        s.mount("b", mp)
        with pytest.raises(layerfs.Busy) as e3:
            s.branch_delete("b")
        assert e3.value.code == "EBUSY" and e3.value.errno == errno.EBUSY
        other = tmp_path / "mp2"
        other.mkdir()
        with pytest.raises(layerfs.Busy):
            s.mount("b", other)
        with pytest.raises(layerfs.InvalidArgument):
            s.request("log", {"no_such_argument": 1})
        with pytest.raises(layerfs.InvalidArgument):
            s.request("log", {"max_count": "ten"})
        with pytest.raises(layerfs.LayerFSError) as e4:
            s.request("no_such_verb")
        assert e4.value.code in ("EINVAL", "PROTOCOL")
        s.umount(mp)
        # A failed verb leaves the Store as it was.
        assert [b.name for b in s.branches()] == ["b", "main"]
    with pytest.raises(layerfs.Exists):
        layerfs.Store.init(real_store)
    with pytest.raises(layerfs.InvalidArgument):
        layerfs.Store.init(tmp_path / "other", policy="1/2")
    with pytest.raises(layerfs.NotFound):
        layerfs.Store.init(tmp_path / "no" / "such" / "parent")
    assert not (tmp_path / "other").exists()


def test_autostart_and_idle_exit(real_store: Path) -> None:
    subprocess.run([layerfs_bin(), "init", str(real_store)], check=True)
    assert daemon_pid(real_store) is None
    s = layerfs.Store.open(real_store, idle=1)
    pid = daemon_pid(real_store)
    assert pid is not None
    assert s.branches()[0].name == "main"
    # The CLI forwards to the daemon the SDK started.
    out = subprocess.run([layerfs_bin(), "--store", str(real_store), "fork", "cli-made"], capture_output=True)
    assert out.returncode == 0, out.stderr
    assert "cli-made" in [b.name for b in s.branches()]
    s.close()
    # With no mount and no connection the daemon goes after its idle time.
    for _ in range(600):
        if daemon_pid(real_store) is None:
            break
        time.sleep(0.05)
    assert daemon_pid(real_store) is None
    # The next client starts a new one.
    with layerfs.Store.open(real_store) as s2:
        assert "cli-made" in [b.name for b in s2.branches()]
        assert daemon_pid(real_store) not in (None, pid)


def test_survives_a_daemon_restart(real_store: Path) -> None:
    with layerfs.Store.init(real_store) as s:
        s.fork("x")
        pid = daemon_pid(real_store)
        assert pid is not None
        os.kill(pid, 15)
        for _ in range(600):
            if daemon_pid(real_store) is None:
                break
            time.sleep(0.05)
        # The pooled connection is dead; the next verb connects again (starting a daemon).
        assert [b.name for b in s.branches()] == ["main", "x"]
        assert daemon_pid(real_store) not in (None, pid)


def test_exec(real_store: Path, tmp_path: Path) -> None:
    with layerfs.Store.init(real_store) as s:
        s.fork("work")
        r = s.exec("work", "echo built > out.txt; echo to-stdout; exit 3", commit="exec run",
                   capture_output=True)
        assert r.returncode == 3 and r.stdout == b"to-stdout\n" and r.branch == "work" and not r.forked
        assert r.commit is not None and ID.match(r.commit)
        assert s.cat(r.commit, "out.txt") == b"built\n"
        assert s.mounts() == [] and not os.path.exists(r.mountpoint)
        # stdin passes through; argv form; no commit without commit=.
        r2 = s.exec("work", ["sh", "-c", "cat > in.txt; pwd"], input=b"fed", capture_output=True)
        assert r2.commit is None and r2.stdout is not None
        assert r2.stdout.decode().strip() == r2.mountpoint
        assert s.read_file("work", "in.txt") == b"fed"
        # A commit id forks first; a mounted branch runs in its mount and stays mounted.
        r3 = s.exec(r.commit, "test -f out.txt && echo x > y", commit="on a fork")
        assert r3.forked and r3.branch != "work" and r3.returncode == 0
        assert s.log(r3.branch, 1)[0].parents == [r.commit]
        mp = tmp_path / "mp"
        mp.mkdir()
        s.mount("work", mp)
        r4 = s.exec("work", "touch here")
        assert r4.mountpoint == str(mp) and (mp / "here").exists() and os.path.ismount(mp)
        s.umount(mp)
        with pytest.raises(layerfs.NotFound):
            s.exec("nosuch", "true")


def test_async_api_with_parallel_mounts(real_store: Path, tmp_path: Path) -> None:
    async def main() -> None:
        async with await layerfs.AsyncStore.init(real_store) as s:
            root = (await s.log())[0].id
            names = [f"p{i}" for i in range(4)]
            await asyncio.gather(*(s.fork(n, root) for n in names))
            mps = [tmp_path / n for n in names]
            for p in mps:
                p.mkdir()
            await asyncio.gather(*(s.mount(n, p) for n, p in zip(names, mps)))
            for i, p in enumerate(mps):
                (p / "f").write_bytes(bytes([i]) * (1000 + i))
            ids = await asyncio.gather(*(s.commit(p, f"c{i}") for i, p in enumerate(mps)))
            assert len(set(ids)) == 4
            for i, cid in enumerate(ids):
                assert await s.cat(cid, "f") == bytes([i]) * (1000 + i)
                assert (await s.log(names[i]))[0].parents == [root]
            await asyncio.gather(*(s.umount(p) for p in mps))
            assert await s.mounts() == []
            with pytest.raises(layerfs.NotFound):
                await s.show("0" * 32)
            r = await s.exec("p0", "echo async > a.txt", commit="async exec")
            assert r.returncode == 0 and await s.cat(r.commit or "", "a.txt") == b"async\n"

    asyncio.run(main())


def test_progress_reaches_the_callback(real_store: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(3000):
        (tree / f"f{i:05d}").write_bytes(hashlib.sha256(str(i).encode()).digest() * 64)
    seen: list[layerfs.Progress] = []
    with layerfs.Store.init(real_store) as s:
        imp = s.import_dir(tree, message="many files", progress=seen.append)
        assert imp.files == 3000
        v = s.verify(progress=seen.append)
        assert v.ok
    assert seen, "no progress event for an import of 3000 files and a verify"
    assert all(isinstance(p, layerfs.Progress) and p.phase for p in seen)
