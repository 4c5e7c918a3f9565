"""The Python SDK against the real layerfsd and real FUSE mounts ($LAYERFS names the built CLI;
layerfsd is found beside it). Each test has its own Store; its daemon and mounts end with it."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import layerfs
from conftest import kill_daemon, layerfs_bin, protocol_verbs

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
        patched = {c.path: c.patch for c in s.status(mp, patch=True).changes}
        assert patched["notes.txt"] == ("diff --git a/notes.txt b/notes.txt\nnew file mode 100644\n"
                                        "index 0000000..9c59e24\n--- /dev/null\n+++ b/notes.txt\n"
                                        "@@ -0,0 +1 @@\n+first\n"), patched  # git hash-object's id
        assert patched["src/a.bin"].endswith("Binary files /dev/null and b/src/a.bin differ\n"), patched

        # diff A without B: from A to HEAD's working tree (the branch mounted at the working
        # directory, else main's), uncommitted changes included, as `git diff A`.
        assert s.diff(root) == []  # outside any mount: main's Workspace, unchanged
        cwd = os.getcwd()
        os.chdir(mp / "src")
        try:
            assert {(c.path, c.change) for c in s.diff(root)} == {(c.path, c.change) for c in st.changes}
            assert {c.path: c.patch for c in s.diff("HEAD", patch=True)} == patched
        finally:
            os.chdir(cwd)

        c1 = s.commit(mp, "two files")
        assert ID.match(c1)
        assert s.status("try").changes == []
        log = s.log("try")
        assert [c.id for c in log] == [c1, root]
        assert log[0].parents == [root] and log[0].message == "two files"
        assert abs(log[0].time - time.time()) < 3600 and 0 <= log[0].time_nsec < 10**9
        assert log[0].files == 3 and log[0].logical_bytes == len(payload) + 6  # entries: src, src/a.bin, notes.txt
        assert [c.id for c in s.log("try", max_count=1)] == [c1]
        # every branch, oldest first, each with what it changed (git log --all --reverse --name-status)
        every = s.log("try", all=True, changes=True, reverse=True)
        assert [c.id for c in every] == [root, c1]
        assert [(ch.change, ch.path) for ch in every[1].changes] == \
            [(ch.change, ch.path) for ch in s.show(c1).changes] and every[1].changes
        assert log[0].changes is None
        assert [c.id for c in s.log("try", grep="^TWO", ignore_case=True)] == [c1]
        assert c1 in [c.id for c in s.log("try", since=f"@{log[0].time}")]
        assert s.log("try", since=f"@{log[0].time + 1}") == []
        assert s.log("try", until="2000-01-01") == []
        with pytest.raises(layerfs.InvalidArgument):
            s.log("try", since="sometime")
        assert s.rev_parse("try") == c1 and s.rev_parse("try~1") == root and s.rev_parse(c1[:8]) == c1
        with pytest.raises(layerfs.NotFound):
            s.rev_parse("nosuch")

        (mp / "notes.txt").write_text("second\n")
        c2_part = s.commit(str(mp), "edit, in part")
        os.unlink(mp / "src" / "a.bin")
        # amend: the rest of the edit takes the head's place (Git's commit --amend)
        c2 = s.commit(str(mp), "edit", amend=True)
        assert c2 != c2_part and s.show(c2).parents == [c1] and s.rev_parse("try") == c2
        # restore: paths back as the head (or a source Commit) has them, in place.
        (mp / "notes.txt").write_text("scribble\n")
        assert [(c.path, c.change) for c in s.restore(mp, ["notes.txt"])] == [("notes.txt", "M")]
        assert (mp / "notes.txt").read_text() == "second\n" and s.status(mp).changes == []
        assert s.restore(mp, ["notes.txt"]) == []
        s.restore(mp, ["src/a.bin"], source=c1)  # from c1: an uncommitted change against the head
        assert (mp / "src" / "a.bin").read_bytes() == payload
        assert [(c.path, c.change) for c in s.status(mp).changes] == [("src/a.bin", "A")]
        with pytest.raises(layerfs.NotFound):
            s.restore(mp, ["nosuch"])
        s.reset(mp)
        assert not (mp / "src" / "a.bin").exists()
        changes = {c.path: c for c in s.diff(c1, c2)}
        # A...B: from the merge base of A and B (c1, on this straight line) to B.
        assert [(c.path, c.change) for c in s.diff(f"{root}...{c2}")] == [
            (c.path, c.change) for c in s.diff(root, c2)]
        assert {c.path for c in s.diff(f"{c2}...{c1}")} == set()
        with pytest.raises(layerfs.InvalidArgument):
            s.diff(f"{c1}...{c2}", c2)
        assert changes["notes.txt"].change == "M" and changes["src/a.bin"].change == "D"
        assert changes["notes.txt"].after is not None and changes["notes.txt"].after.size == 7
        assert changes["src/a.bin"].before is not None and changes["src/a.bin"].before.size == len(payload)
        shown = s.show(c2)
        assert shown.id == c2 and {c.path for c in shown.changes or []} == set(changes)
        assert all(c.patch is None for c in shown.changes or [])
        # With patch: Git's unified diff of each change.
        patched = {c.path: c.patch for c in s.diff(c1, c2, patch=True)}
        assert patched["notes.txt"] is not None and patched["notes.txt"].startswith(
            "diff --git a/notes.txt b/notes.txt\n") and "\n+second\n" in patched["notes.txt"], patched
        assert "deleted file mode 100644\n" in (patched["src/a.bin"] or ""), patched
        assert {c.path: c.patch for c in s.show(c2, patch=True).changes or []} == patched
        # paths: only the changes at or below them; log, only the Commits that changed them.
        assert [c.path for c in s.diff(c1, c2, paths=["src"])] == ["src/a.bin"]
        assert [c.id for c in s.log("try", paths=["src/a.bin"])] == [c2, c1]
        assert [c.id for c in s.log("try", paths=["notes.txt"], max_count=1)] == [c2]
        # log with patch: each Commit's changes with their patches, as show gives them.
        lp = s.log("try", paths=["notes.txt"], patch=True)
        assert [c.id for c in lp] == [c2, c1] and [ch.patch for ch in lp[0].changes or []] == [patched["notes.txt"]]
        assert s.cat(c1, "src/a.bin") == payload
        assert s.cat(c2, "notes.txt") == b"second\n"

        out = tmp_path / "export"
        ex = s.export(c1, out)
        assert ex.commit == c1 and ex.files == 3  # entries written: src, src/a.bin, notes.txt
        assert (out / "src" / "a.bin").read_bytes() == payload

        # Files of the live Workspace through the protocol; the mount sees them at once.
        assert s.write_file("try", "api.txt", "from the sdk\n") == 13
        assert (mp / "api.txt").read_text() == "from the sdk\n"
        s.write_file(mp, "api.txt", b"more\n", append=True)
        assert (mp / "api.txt").read_bytes() == b"from the sdk\nmore\n"
        (mp / "shell.txt").write_bytes(b"written by the shell")
        assert s.read_file("try", "shell.txt") == b"written by the shell"
        assert s.read_file("try", "shell.txt", offset=8, length=5) == b"by th"
        names = {e.name: e for e in s.list_dir("try")}
        assert {"api.txt", "shell.txt", "notes.txt", "src"} <= set(names)
        assert names["src"].type == "dir" and names["src"].mode == "0755" and names["shell.txt"].size == 20
        assert names["shell.txt"].mode == "0644" and names["shell.txt"].target is None
        # Permission bits: an int or octal digits, as the protocol's string.
        s.write_file("try", "bin/run.sh", "#!/bin/sh\necho hi\n", mode=0o755)
        assert stat.S_IMODE(os.stat(mp / "bin" / "run.sh").st_mode) == 0o755
        s.write_file("try", "bin/secret", b"s", mode="0600")
        assert stat.S_IMODE(os.stat(mp / "bin" / "secret").st_mode) == 0o600
        assert {e.name: e.mode for e in s.list_dir("try", "bin")} == {"run.sh": "0755", "secret": "0600"}
        with pytest.raises(layerfs.InvalidArgument):
            s.write_file("try", "bin/x", b"", mode="rwx")
        os.symlink("notes.txt", mp / "link")
        assert {e.name: e.target for e in s.list_dir("try")}["link"] == "notes.txt"
        s.remove_path("try", "bin", recursive=True)
        os.unlink(mp / "link")
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
        imp = s.import_dir(tree, branch="main", message="imported", jobs=2)
        assert ID.match(imp.commit) and imp.files == 1
        assert s.log("main", 1)[0].message == "imported"

        st = s.stats()
        assert st["commits"] >= 5 and st["branches"] == 2 and st["policy"] == "16/8/8"
        assert st["allocated_bytes"] > 0
        v = s.verify()
        assert v.ok and v.problems == [] and v.objects > 0
        assert v.commits == 4  # reachable from a branch: root, c1, c3 on try, the import on main (c2 was reset away)
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
    # init's failures come by code from `layerfs init --json`.
    with pytest.raises(layerfs.Exists) as e5:
        layerfs.Store.init(real_store)
    assert e5.value.errno == errno.EEXIST and str(real_store) in e5.value.message
    with pytest.raises(layerfs.InvalidArgument):
        layerfs.Store.init(tmp_path / "other", policy="1/2")
    with pytest.raises(layerfs.NotFound):
        layerfs.Store.init(tmp_path / "no" / "such" / "parent")
    with pytest.raises(layerfs.NotFound):
        layerfs.Store.init(tmp_path / "other", from_dir=tmp_path / "no-such-tree")
    assert not (tmp_path / "other").exists()


def test_a_store_held_by_another_process_is_busy(real_store: Path) -> None:
    # The daemon cannot start while another process holds the Store's database lock (as RocksDB
    # takes it: an fcntl lock on db/LOCK): layerfsd --json says EBUSY, and so does the SDK.
    subprocess.run([layerfs_bin(), "init", str(real_store)], check=True)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys; f = open(sys.argv[1], 'r+'); fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB); "
        "print('held', flush=True); sys.stdin.read()"), str(real_store / "db" / "LOCK")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        with pytest.raises(layerfs.Busy) as e:
            layerfs.Store.open(real_store)
        assert e.value.code == "EBUSY" and e.value.errno == errno.EBUSY
        assert e.value.message.startswith(f"cannot start layerfsd for {real_store}: ")

        async def aopen() -> None:
            await layerfs.AsyncStore.open(real_store)
        with pytest.raises(layerfs.Busy):
            asyncio.run(aopen())
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    with layerfs.Store.open(real_store) as s:  # once it is free, the daemon starts
        assert s.branches()[0].name == "main"


# Every verb the daemon serves has its method in both clients (the protocol's name on the left).
METHODS = {"branches": "branches", "fork": "fork", "branch_delete": "branch_delete", "log": "log",
           "rev_parse": "rev_parse", "show": "show",
           "diff": "diff", "cat": "cat", "export": "export", "import": "import_dir", "mount": "mount",
           "umount": "umount", "mounts": "mounts", "commit": "commit", "status": "status", "reset": "reset", "restore": "restore",
           "stats": "stats", "verify": "verify", "gc": "gc", "read_file": "read_file", "write_file": "write_file",
           "list_dir": "list_dir", "remove_path": "remove_path", "merge": "merge", "cherry_pick": "cherry_pick",
           "revert": "revert", "remote_list": "remote_list", "remote_add": "remote_add",
           "remote_remove": "remote_remove", "push": "push", "fetch": "fetch", "pull": "pull", "clone": "clone"}


def test_every_verb_of_the_daemon_is_covered_and_the_fake_speaks_its_arguments(real_store: Path) -> None:
    import fake_server

    subprocess.run([layerfs_bin(), "init", str(real_store)], check=True)
    verbs = protocol_verbs(real_store)
    assert sorted(verbs) == sorted(METHODS), "the daemon serves verbs the SDK does not cover (or the reverse)"
    for name in METHODS.values():
        assert callable(getattr(layerfs.Store, name)) and asyncio.iscoroutinefunction(getattr(layerfs.AsyncStore, name))
        assert (getattr(layerfs.Store, name).__doc__ or "").strip(), f"Store.{name} has no docstring"
        assert (getattr(layerfs.AsyncStore, name).__doc__ or "").strip(), f"AsyncStore.{name} has no docstring"
    # The fake daemon of test_fake.py checks requests against the daemon's own argument table.
    types = {"string": (str,), "integer": (int,), "boolean": (bool,), "array": (list,)}
    for verb, spec in verbs.items():
        assert verb in fake_server.ARGS, verb
        assert fake_server.ARGS[verb] == {k: types[t] for k, t in spec["args"].items()}, verb
        assert sorted(fake_server.REQUIRED.get(verb, [])) == spec["required"], verb


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
        r = s.exec("work", "echo built > out.txt; echo to-stdout; echo to-stderr >&2; exit 3", commit="exec run",
                   capture_output=True)
        assert (r.exit_code, r.signal, r.stdout, r.stderr) == (3, None, b"to-stdout\n", b"to-stderr\n")
        assert r.branch == "work" and r.mounted and not r.forked and not r.isolated
        assert r.commit is not None and ID.match(r.commit)
        assert s.cat(r.commit, "out.txt") == b"built\n" and s.show(r.commit).message == "exec run"
        assert s.mounts() == [] and not os.path.exists(r.mountpoint)
        # stdin passes through; argv form; PWD is the mount; no commit without commit=.
        r2 = s.exec("work", ["sh", "-c", "cat > in.txt; pwd; echo $PWD"], input=b"fed", capture_output=True)
        assert r2.commit is None and r2.stdout is not None
        assert r2.stdout.decode().split() == [r2.mountpoint, r2.mountpoint]
        assert s.read_file("work", "in.txt") == b"fed"
        # commit=True: the message is the command's, as `layerfs exec --commit` makes it.
        r2b = s.exec("work", ["touch", "t"], commit=True)
        assert r2b.commit is not None and s.show(r2b.commit).message == "exec: touch t"
        # A commit id forks first, into exec-ID12, then exec-ID12-2.
        r3 = s.exec(r.commit, "test -f out.txt && echo x > y", commit="on a fork")
        assert r3.forked and r3.branch == f"exec-{r.commit[:12]}" and r3.exit_code == 0
        assert s.log(r3.branch, 1)[0].parents == [r.commit]
        r3b = s.exec(r.commit[:10], "true")
        assert r3b.branch == f"exec-{r.commit[:12]}-2" and r3b.forked
        # A signal: 128 + N and its name, and what the command left is still committed.
        r4 = s.exec("work", "echo partial > p.txt; kill -KILL $$", commit=True)
        assert (r4.exit_code, r4.signal) == (137, "KILL") and r4.commit is not None
        assert s.cat(r4.commit, "p.txt") == b"partial\n"
        r5 = s.exec("work", ["sleep", "30"], timeout=0.5)
        assert (r5.exit_code, r5.signal) == (137, "KILL") and s.mounts() == []
        # A mounted branch runs in its mount and stays mounted; another mountpoint is Busy.
        mp = tmp_path / "mp"
        mp.mkdir()
        s.mount("work", mp)
        r6 = s.exec("work", "touch here")
        assert r6.mountpoint == str(mp) and not r6.mounted and (mp / "here").exists() and os.path.ismount(mp)
        with pytest.raises(layerfs.Busy):
            s.exec("work", "true", mountpoint=tmp_path / "elsewhere")
        s.umount(mp)
        # A given mountpoint is made, used and removed again.
        there = tmp_path / "given" / "mp"
        r7 = s.exec("work", "pwd", mountpoint=there, capture_output=True)
        assert r7.mountpoint == str(there) and r7.stdout == f"{there}\n".encode() and not there.exists()
        with pytest.raises(layerfs.NotFound):
            s.exec("nosuch", "true")
        with pytest.raises(layerfs.NotFound):
            s.exec("work", ["/no/such/program"])
        with pytest.raises(layerfs.InvalidArgument):
            s.exec("work", "true", no_network=True)
        assert s.mounts() == [] and sorted(b.name for b in s.branches()) == [
            "exec-" + r.commit[:12], "exec-" + r.commit[:12] + "-2", "main", "work"]


def test_exec_isolated(real_store: Path, tmp_path: Path) -> None:
    """isolate: the Workspace is writable at /workspace, nothing else of the host is (tried)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    with layerfs.Store.init(real_store) as s:
        s.fork("iso")
        r = s.exec("iso", "pwd; echo inside > made.txt", isolate=True, commit=True, capture_output=True)
        assert r.isolated and r.exit_code == 0 and r.stdout == b"/workspace\n"
        assert r.commit is not None and s.cat(r.commit, "made.txt") == b"inside\n"
        for target in ("/etc/layerfs-escape", "/root/layerfs-escape", "/var/tmp/layerfs-escape",
                       str(outside / "escape"), str(real_store / "escape")):
            p = s.exec("iso", f"echo x > '{target}'", isolate=True, capture_output=True)
            assert p.exit_code != 0, f"wrote {target} from the sandbox"
            assert not os.path.exists(target)
        # The Store is hidden: neither its data nor its control socket.
        p = s.exec("iso", f"ls -A '{real_store}' | wc -l", isolate=True, capture_output=True)
        assert p.stdout == b"0\n"
        # /tmp inside is private; the network is cut with no_network.
        # (/proc/net is the command's own network namespace; /sys/class/net is the host's, bound read-only.)
        p = s.exec("iso", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", isolate=True, no_network=True,
                   capture_output=True)
        assert p.exit_code == 0 and p.stdout == b"lo\n"
        k = s.exec("iso", "kill -TERM $$", isolate=True)
        assert k.exit_code == 143


def test_merge_on_real_mounts(real_store: Path, tmp_path: Path) -> None:
    with layerfs.Store.init(real_store) as s:
        for b in ("x", "y"):
            s.fork(b)
        s.write_file("y", "f.txt", "from y\n")
        y1 = s.commit("y", "y1")
        ff = s.merge("y", "x", ff_only=True)
        assert ff.op == "merge" and ff.fast_forward and ff.commit == y1 and ff.branch == "x"
        assert s.merge("y", "x").up_to_date
        s.write_file("x", "f.txt", "from x\n")
        x2 = s.commit("x", "x2")
        s.write_file("y", "f.txt", "from y again\n")
        s.write_file("y", "other.txt", "y only\n")
        y2 = s.commit("y", "y2")
        with pytest.raises(layerfs.NotFastForward):
            s.merge("y", "x", ff_only=True)
        # Not mounted: the conflict changes nothing and its result is a MergeResult.
        with pytest.raises(layerfs.Conflict) as e:
            s.merge("y", "x")
        res = e.value.result
        assert isinstance(res, layerfs.MergeResult) and res.commit is None and not res.stopped
        assert res.ours == x2 and res.theirs == y2 and res.base == y1 and res.bases == [y1]
        [c] = res.conflicts
        assert (c.path, c.kind) == ("f.txt", "content") and c.ours and c.theirs and c.base
        assert s.log("x", 1)[0].id == x2
        # Mounted: the merge stops in the mount, status shows it; abort puts it back.
        mp = tmp_path / "mx"
        mp.mkdir()
        s.mount("x", mp)
        with pytest.raises(layerfs.Conflict) as e2:
            s.merge("y", mp)
        stopped = e2.value.result
        assert isinstance(stopped, layerfs.MergeResult) and stopped.stopped and stopped.mountpoint == str(mp)
        assert (mp / "other.txt").read_text() == "y only\n"
        assert "<<<<<<<" in (mp / "f.txt").read_text()
        st = s.status(mp)
        assert st.merging is not None and st.merging.source == "y" and st.merging.theirs == y2
        assert st.merging.unresolved == 1 and [(x.path, x.resolved) for x in st.conflicts] == [("f.txt", False)]
        with pytest.raises(layerfs.Busy):
            s.commit(mp, "not while merging")
        ab = s.merge_abort(mp)
        assert ab.aborted and ab.branch == "x" and ab.op == "merge"
        assert (mp / "f.txt").read_text() == "from x\n" and not (mp / "other.txt").exists()
        assert s.status(mp).merging is None and s.status(mp).conflicts == []
        # Again, resolved by hand in the mount, then continue: a merge Commit with two parents.
        with pytest.raises(layerfs.Conflict):
            s.merge("y", "x")  # by branch name: through its mount
        with pytest.raises(layerfs.Busy):
            s.merge_continue(mp)  # still unresolved: the merge stays stopped
        (mp / "f.txt").write_text("both\n")
        st = s.status("x")
        assert st.merging is not None and st.merging.unresolved == 0 and st.conflicts[0].resolved is True
        done = s.merge_continue(mp, message="merged by hand")
        assert done.commit is not None and not done.conflicts
        head = s.log("x", 1)[0]
        assert head.id == done.commit and head.parents == [x2, y2] and head.message == "merged by hand"
        assert s.cat(done.commit, "f.txt") == b"both\n" and s.cat(done.commit, "other.txt") == b"y only\n"
        s.umount(mp)
        # Strategies, cherry-pick and revert in the Store.
        s.fork("z", x2)
        t = s.merge("y", "z", strategy_option="theirs", message="take theirs")
        assert t.commit is not None and s.cat(t.commit, "f.txt") == b"from y again\n"
        s.fork("o", x2)
        o = s.merge("y", "o", strategy="ours")
        assert o.commit is not None and s.cat(o.commit, "f.txt") == b"from x\n"
        assert s.log("o", 1)[0].parents == [x2, y2]
        s.fork("p", x2)
        s.write_file("y", "new.txt", "picked\n")
        y3 = s.commit("y", "y3")
        pk = s.cherry_pick(y3, "p")
        assert pk.op == "cherry-pick" and pk.commit is not None
        assert s.cat(pk.commit, "new.txt") == b"picked\n" and s.log("p", 1)[0].parents == [x2]
        rv = s.revert(pk.commit, "p")
        assert rv.op == "revert" and rv.commit is not None
        assert "new.txt" not in {c.path for c in s.diff(x2, rv.commit)}
        # A cherry-pick stopped in a mount continues as a cherry-pick.
        s.fork("q", x2)
        mq = tmp_path / "mq"
        mq.mkdir()
        s.mount("q", mq)
        with pytest.raises(layerfs.Conflict) as e3:
            s.cherry_pick(y2, mq)
        assert isinstance(e3.value.result, layerfs.MergeResult) and e3.value.result.op == "cherry-pick"
        (mq / "f.txt").write_text("resolved\n")
        qd = s.merge_continue(mq, op="cherry-pick")
        assert qd.op == "cherry-pick" and qd.commit is not None and s.log("q", 1)[0].parents == [x2]
        s.umount(mq)


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
            assert r.exit_code == 0 and r.mounted and await s.cat(r.commit or "", "a.txt") == b"async\n"
            r2 = await s.exec("p1", ["sleep", "30"], timeout=0.5, commit=True)
            assert (r2.exit_code, r2.signal) == (137, "KILL") and r2.commit is not None
            assert await s.mounts() == []
            with pytest.raises(layerfs.Conflict):
                await s.write_file("p0", "a.txt", "p0\n")
                await s.commit("p0", "p0")
                await s.write_file("p1", "a.txt", "p1\n")
                await s.commit("p1", "p1")
                await s.merge("p1", "p0")
            m = await s.merge("p1", "p0", strategy_option="ours")
            assert m.commit is not None and await s.cat(m.commit, "a.txt") == b"p0\n"

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


def test_remotes_over_file_urls(real_store: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    try:
        remotes_over_file_urls(real_store, tmp_path / "remote", other)
    finally:
        kill_daemon(other)


def remotes_over_file_urls(real_store: Path, remote: Path, other: Path) -> None:
    url = f"file://{remote}"
    with layerfs.Store.init(real_store) as a:
        a.write_file("main", "f.txt", "one\n")
        c1 = a.commit("main", "one")
        assert a.remote_add("origin", url) == {"name": "origin", "url": url, "lazy": False, "branches": {}}
        with pytest.raises(layerfs.Exists):
            a.remote_add("origin", url)
        with pytest.raises(layerfs.InvalidArgument):
            a.remote_add("x", "ftp://h/p")
        with pytest.raises(layerfs.NotFound):
            a.push("nosuch")
        events: list[layerfs.Progress] = []
        p = a.push("origin", ["main"], progress=events.append)
        assert [(r["branch"], r["status"], r["new"]) for r in p["refs"]] == [("main", "created", c1)]
        assert a.remote_list() == [{"name": "origin", "url": url, "lazy": False, "branches": {"main": c1}}]
        # Another Store cloned from it, with a Commit of its own pushed back.
        with layerfs.Store.clone(url, other) as b:
            assert [(x.name, x.commit) for x in b.branches() if x.name == "main"] == [("main", c1)]
            assert b.cat("main", "f.txt") == b"one\n"
            b.write_file("main", "f.txt", "two\n")
            c2 = b.commit("main", "two")
            assert b.push()["refs"][0]["status"] == "fast-forward"  # origin, its only remote
        # A diverges: its push is refused; fetch sees B's Commit, pull merges it.
        a.write_file("main", "g.txt", "a only\n")
        a.commit("main", "a's own")
        with pytest.raises(layerfs.NotFastForward):
            a.push("origin", ["main"])
        f = a.fetch()  # origin
        assert [(r["branch"], r["new"]) for r in f["refs"]] == [("main", c2)]
        assert a.remote_list()[0]["branches"] == {"main": c2}
        pl = a.pull("origin", "main")
        assert pl["status"] == "merged" and not pl["conflicts"]
        head = a.log("main", 1)[0]
        assert head.id == pl["new"] and c2 in head.parents
        assert a.cat("main", "f.txt") == b"two\n" and a.cat("main", "g.txt") == b"a only\n"
        assert a.push("origin", ["main"])["refs"][0]["status"] == "fast-forward"
        assert a.remote_remove("origin")["name"] == "origin" and a.remote_list() == []
        with pytest.raises(layerfs.Exists):
            layerfs.Store.clone(url, real_store)
