"""The synchronous client: ``Store``, with the CLI's verbs as methods.

A Store talks to the Store's daemon over its control socket (docs/protocol.md), starting one when
none listens. It keeps a small pool of connections, so one Store may be used from many threads at
once: each call takes an idle connection (or opens one) and gives it back when its response is
in. ``close()`` (or leaving a ``with`` block) closes them; a daemon the SDK started then exits
after its idle time if nothing else holds it.
"""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import tempfile
import threading
from typing import Any, Mapping, Sequence

from . import _core, errors
from ._core import Call, ProgressCallback, T
from .types import (
    Branch,
    Change,
    Commit,
    DirEntry,
    ExecResult,
    ExportResult,
    GcResult,
    ImportResult,
    MergeResult,
    Mount,
    ResetResult,
    Stats,
    VerifyResult,
    WorkspaceStatus,
)

PathArg = str | os.PathLike[str]


class _Conn:
    """One connection: a socket and the bytes read past the last message."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(path)
        except BaseException:
            self.sock.close()
            raise
        self.buf = bytearray()
        self.used = False

    def close(self) -> None:
        self.sock.close()

    def alive(self) -> bool:
        """False once the daemon has closed its end (it exited while we were idle)."""
        try:
            return self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False

    def read_message(self) -> dict[str, Any]:
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line = bytes(self.buf[:nl])
                del self.buf[: nl + 1]
                return _core.decode_message(line)
            if len(self.buf) > _core.MAX_MESSAGE:
                raise errors.make_error("TOO_LARGE", "layerfsd sent a message over the protocol's size limit")
            chunk = self.sock.recv(65536)
            if not chunk:
                raise errors.make_error("ECONNRESET", "layerfsd closed the connection before it answered")
            self.buf += chunk


class Store:
    """A LayerFS Store, driven through its daemon.

    ``Store.open(path)`` connects (starting ``layerfsd`` when none runs); ``Store.init(path)``
    creates a Store first. Every verb of the CLI is a method; failures raise the
    ``layerfs.LayerFSError`` subclass of their code. Thread-safe.
    """

    def __init__(self, path: PathArg, *, idle: int = _core.DEFAULT_IDLE,
                 progress: ProgressCallback | None = None, autostart: bool = True) -> None:
        """Use ``Store.open`` (the same thing, named as the CLI would)."""
        self.path = _core.store_root(path)
        self.idle = idle
        self.progress = progress
        self.autostart = autostart
        self._sock_path = _core.socket_path(self.path)
        self._idle: list[_Conn] = []
        self._lock = threading.Lock()
        self._closed = False
        self._ids = itertools.count(1)
        self._put(self._connect())  # fail now, not at the first verb, when there is no daemon

    # -- life cycle ------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: PathArg, *, idle: int = _core.DEFAULT_IDLE, progress: ProgressCallback | None = None,
             autostart: bool = True) -> Store:
        """Opens the Store at ``path``: connects to its daemon, starting ``layerfsd --idle IDLE``
        when none listens (unless ``autostart=False``: then NotConnected). ``progress`` receives
        the progress events of every verb that does not pass its own callback."""
        return cls(path, idle=idle, progress=progress, autostart=autostart)

    @classmethod
    def init(cls, path: PathArg, *, policy: str | None = None, from_dir: PathArg | None = None,
             message: str | None = None, **open_kw: Any) -> Store:
        """Creates a Store at ``path`` (``layerfs init``: branch main, policy W/C/M such as
        "16/8/8", optionally a first Commit of ``from_dir``), then opens it. ``layerfs`` is
        ``$LAYERFS``, else the first on PATH. Failures by code: Exists (a non-empty directory is
        there), InvalidArgument (a bad policy), NotFound (no parent directory, no ``from_dir``)."""
        _core.run_init(os.path.abspath(os.fspath(path)), policy,
                       os.path.abspath(os.fspath(from_dir)) if from_dir is not None else None, message)
        return cls.open(path, **open_kw)

    def close(self) -> None:
        """Closes the connections. The Store object cannot be used afterwards."""
        with self._lock:
            self._closed = True
            conns, self._idle = self._idle, []
        for c in conns:
            c.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.path!r})"

    # -- transport -------------------------------------------------------------------------------

    def _connect(self) -> _Conn:
        try:
            return _Conn(self._sock_path)
        except (FileNotFoundError, ConnectionRefusedError):
            if not self.autostart:
                raise errors.make_error("ENOTCONN", f"no layerfsd serves {self.path}") from None
        _core.start_daemon(self.path, self.idle, self._can_connect)
        try:
            return _Conn(self._sock_path)
        except OSError as e:
            raise errors.make_error("ENOTCONN", f"layerfsd for {self.path} does not answer: {e.strerror}") from None

    def _can_connect(self) -> bool:
        try:
            _Conn(self._sock_path).close()
            return True
        except OSError:
            return False

    def _take(self) -> _Conn:
        with self._lock:
            if self._closed:
                raise errors.make_error("ENOTCONN", f"Store {self.path} is closed")
            while self._idle:
                c = self._idle.pop()
                if c.alive():
                    return c
                c.close()
        return self._connect()

    def _put(self, c: _Conn) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(c)
                return
        c.close()

    def _run(self, call: Call[T], progress: ProgressCallback | None = None) -> T:
        try:
            result = self._request(call.verb, call.args, progress or self.progress)
        except errors.LayerFSError as e:
            raise _core.with_result(e, call) from None
        return call.parse(result)

    def _request(self, verb: str, args: Mapping[str, Any], progress: ProgressCallback | None) -> Any:
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = None
        rid = next(self._ids)
        line = _core.encode_request(rid, verb, args, cwd)  # TOO_LARGE before any connection is taken
        for attempt in range(2):
            conn = self._take()
            try:
                conn.sock.sendall(line)
            except (BrokenPipeError, ConnectionResetError):
                # The daemon went away while this connection was idle (its last mount ended,
                # or it was restarted): it never saw the request, so a new connection may retry.
                conn.close()
                if attempt == 0 and conn.used:
                    continue
                raise errors.make_error("ECONNRESET", "layerfsd closed the connection") from None
            conn.used = True
            out = _core.Outcome(rid, verb, progress)
            try:
                while not out.done:
                    out.feed(conn.read_message())
            except errors.LayerFSError as e:
                if out.done and e.code not in ("PROTOCOL", "TOO_LARGE"):
                    self._put(conn)
                else:
                    conn.close()
                raise
            except BaseException:
                conn.close()  # a half-read response (an exception in a callback, ^C) spoils it
                raise
            self._put(conn)
            return out.result
        raise AssertionError("unreachable")

    def request(self, verb: str, args: Mapping[str, Any] | None = None,
                progress: ProgressCallback | None = None) -> Any:
        """Sends any verb of the protocol with ``args`` by the protocol's names and returns its
        raw JSON result (for verbs or arguments newer than this SDK's methods)."""
        return self._run(_core.raw(verb, args), progress)

    # -- branches and history --------------------------------------------------------------------

    def branches(self) -> list[Branch]:
        """Every branch with its head Commit and its mountpoint when mounted (``layerfs branch``)."""
        return self._run(_core.branches())

    def fork(self, name: str, at: str = "main") -> Branch:
        """Creates branch ``name`` at ``at`` (a branch, commit id, unique prefix or REF~N), O(1).
        Exists when the name is taken, NotFound when ``at`` names nothing."""
        return self._run(_core.fork(name, at))

    def branch_delete(self, name: str) -> None:
        """Deletes branch ``name`` (``layerfs branch -d``); Busy while it is mounted. Its Commits
        stay until ``gc`` frees what no branch reaches."""
        self._run(_core.branch_delete(name))

    def log(self, ref: str = "main", max_count: int | None = None, graph: bool = False,
            paths: Sequence[str] | None = None, patch: bool = False, *, all: bool = False,
            changes: bool = False, reverse: bool = False, renames: bool = False, grep: str | None = None,
            ignore_case: bool = False, since: str | None = None, until: str | None = None) -> list[Commit]:
        """Commits newest first along first parents from ``ref``; at most ``max_count``. With
        ``graph``, every Commit reachable through all parents, children before their parents
        (``layerfs log --graph``); with ``all``, from every branch and remote-tracking ref as
        well (``git log --all``). With ``paths`` (tree paths, files or directories), only the
        Commits that changed one of them against their first parent. With ``changes``, each
        Commit's ``changes`` against its first parent (a root Commit's: its tree, added); with
        ``patch``, those with their Git unified diffs, as ``show``; ``renames`` as in ``diff``.
        ``grep`` keeps the Commits whose message matches an extended regular expression
        (``ignore_case``), ``since`` and ``until`` those made in that span (``"2026-12-01"``,
        ``"2026-12-01 12:00"``, ``"@SECONDS"``, ``"3 hours ago"``); ``max_count`` counts what they
        keep. With ``reverse``, oldest first (after ``max_count`` chose the newest)."""
        return self._run(_core.log(ref, max_count, graph, paths, patch, all, changes, reverse, renames, grep,
                                   ignore_case, since, until))

    def rev_parse(self, ref: str) -> str:
        """The Commit id ``ref`` names (a branch, REMOTE/BRANCH, an id prefix, REF~N, REF^N),
        as ``git rev-parse``; NotFound when it names nothing."""
        return self._run(_core.rev_parse(ref))

    def show(self, commit: str, patch: bool = False, paths: Sequence[str] | None = None, *,
             renames: bool = False) -> Commit:
        """A Commit with ``changes``: the paths it changed against its first parent (a root
        Commit: its whole tree, added); with ``patch``, each change's Git unified diff in
        ``Change.patch``; with ``paths``, only the changes at or below them; ``renames`` as in
        ``diff``."""
        return self._run(_core.show(commit, patch, paths, renames))

    def diff(self, a: str, b: str | None = None, patch: bool = False,
             paths: Sequence[str] | None = None, *, renames: bool = False) -> list[Change]:
        """Paths added, deleted, modified, type- or mode-changed from ``a`` to ``b``
        (or ``a`` given as "A...B"; without ``b``, to HEAD's working tree, uncommitted changes
        included, as ``git diff A``); with ``patch``, each with its Git unified diff; with
        ``paths``, only the changes at or below them. With ``renames`` (Git's ``-M``), a file
        moved, the same or at least half similar, is one change ``R`` at its new path with
        ``from_path`` and ``similarity``, instead of a ``D`` and an ``A``."""
        return self._run(_core.diff(a, b, patch, paths, renames))

    def cat(self, commit: str, path: str, offset: int = 0, length: int | None = None) -> bytes:
        """The content of ``path`` in ``commit`` (a symlink's target for a symlink): ``length``
        bytes from ``offset`` (default: to the end; a large file comes in pieces)."""
        out = bytearray()
        while True:
            want = _core.piece_size(length, len(out))
            data, size = self._run(_core.cat(commit, path, offset + len(out), want))
            out += data
            if _core.pieces_done(offset, length, len(out), want, len(data), size):
                return bytes(out)

    def export(self, commit: str, dir: PathArg, progress: ProgressCallback | None = None) -> ExportResult:
        """Writes ``commit``'s tree into ``dir`` (absent or empty)."""
        return self._run(_core.export(commit, dir), progress)

    def import_dir(self, dir: PathArg, branch: str | None = None, message: str | None = None,
                   progress: ProgressCallback | None = None, jobs: int | None = None) -> ImportResult:
        """Commits the tree of ``dir`` as the next Commit of ``branch`` (default main)
        (``layerfs import``; unchanged files cost a stat; ``jobs`` files are read and encoded
        at once, default one per core)."""
        return self._run(_core.import_dir(dir, branch, message, jobs), progress)

    # -- mounts and Workspaces -------------------------------------------------------------------

    def mount(self, ref: str, mountpoint: PathArg, read_only: bool = False, allow_other: bool = False, *,
              single_threaded: bool = False, threads: bool = False, no_follow_cpu: bool = False) -> Mount:
        """Mounts branch ``ref`` writable (a commit read-only) at ``mountpoint`` and returns once
        it is mounted. Busy when the branch is mounted already. ``allow_other`` lets other users
        see it; ``single_threaded`` / ``threads`` / ``no_follow_cpu`` choose how the daemon serves
        it, as the CLI's flags of those names do."""
        return self._run(_core.mount(ref, mountpoint, read_only, allow_other, single_threaded, threads,
                                     no_follow_cpu))

    def umount(self, mountpoint: PathArg) -> None:
        """Flushes and unmounts ``mountpoint`` (what was written stays in the branch's
        Workspace, uncommitted)."""
        self._run(_core.umount(mountpoint))

    def mounts(self) -> list[Mount]:
        """The daemon's live mounts."""
        return self._run(_core.mounts())

    def commit(self, target: PathArg | None, message: str, amend: bool = False) -> str:
        """Commits what was written to ``target`` (a mountpoint or a branch, mounted or not) and
        returns the new Commit's id. Data still in the page cache and in mmaps is included. With
        ``amend``, the new Commit replaces the head (Git's ``commit --amend``): the head's parents,
        its tree with what was written since."""
        return self._run(_core.commit(target, message, amend)).commit

    def status(self, target: PathArg | None = None, patch: bool = False,
               paths: Sequence[str] | None = None, *, renames: bool = False) -> WorkspaceStatus:
        """Uncommitted changes of ``target``'s Workspace (a mountpoint or a branch); with
        ``patch``, each with its Git unified diff against the head Commit (``Change.patch``);
        ``renames`` as in ``diff``."""
        return self._run(_core.status(target, patch, paths, renames))

    def reset(self, target: PathArg | None = None, hard: str | None = None) -> ResetResult:
        """Discards ``target``'s uncommitted changes; with ``hard=REF`` also moves the branch
        to REF."""
        return self._run(_core.reset(target, hard))

    def restore(self, target: PathArg | None, paths: Sequence[str], source: str | None = None) -> list[Change]:
        """Brings ``paths`` (files or directories) of ``target``'s Workspace back as ``source``
        (default: its head Commit) has them, as ``git restore``: changed and removed files come
        back; files ``source`` does not have stay. Returns what was restored."""
        return self._run(_core.restore(target, paths, source))

    # -- whole Store -----------------------------------------------------------------------------

    def stats(self) -> Stats:
        """Allocated bytes (payload / metadata / other), objects and chain depths, as
        ``layerfs stats --json`` prints them."""
        return self._run(_core.stats())

    def verify(self, commits: Sequence[str] | None = None, progress: ProgressCallback | None = None,
               fetch: bool = False) -> VerifyResult:
        """Reads back every object reachable from ``commits`` (default: all) and checks every
        hash. Damage is reported in the result (``ok`` False, ``problems``), not raised. ``fetch``:
        in a lazy clone, fetch and check what was never read."""
        return self._run(_core.verify(list(commits) if commits else None, fetch), progress)

    def gc(self, progress: ProgressCallback | None = None) -> GcResult:
        """Frees what no branch reaches any more."""
        return self._run(_core.gc(), progress)

    # -- remotes ---------------------------------------------------------------------------------

    @classmethod
    def clone(cls, url: str, path: PathArg, *, lazy: bool = False, **open_kw: Any) -> Store:
        """Makes a Store at ``path`` from the remote at ``url`` (``layerfs clone``; ``lazy``: refs
        and indexes only, objects fetched on first read), then opens it."""
        _core.run_clone(url, os.path.abspath(os.fspath(path)), lazy)
        return cls.open(path, **open_kw)

    def remote_list(self) -> list[dict[str, Any]]:
        """The remotes: ``name``, ``url``, ``lazy``, ``branches`` (remote-tracking refs)."""
        return self._run(_core.remote_list())

    def remote_add(self, name: str, url: str, lazy: bool = False) -> dict[str, Any]:
        """Adds remote ``name`` at ``url`` (``layerfs remote add``)."""
        return self._run(_core.remote_add(name, url, lazy))

    def remote_remove(self, name: str) -> dict[str, Any]:
        """Removes remote ``name`` and its remote-tracking refs."""
        return self._run(_core.remote_remove(name))

    def push(self, remote: str | None = None, branches: Sequence[str] | None = None, force: bool = False,
             progress: ProgressCallback | None = None) -> dict[str, Any]:
        """Pushes ``branches`` (default: main) to ``remote`` (default: origin, else the only
        remote); a refused branch raises NotFastForward (or Stale when another pusher won the
        race)."""
        return self._run(_core.push(remote, list(branches) if branches else None, force), progress)

    def fetch(self, remote: str | None = None, progress: ProgressCallback | None = None) -> dict[str, Any]:
        """Fetches ``remote``'s branches into its remote-tracking refs."""
        return self._run(_core.fetch(remote), progress)

    def pull(self, remote: str | None = None, branch: str | None = None, progress: ProgressCallback | None = None) -> dict[str, Any]:
        """Fetches ``remote`` and brings REMOTE/BRANCH into ``branch`` with the merge machinery."""
        return self._run(_core.pull(remote, branch), progress)

    # -- files of a live Workspace (for agents without a shell) ----------------------------------

    def read_file(self, target: PathArg, path: str, offset: int = 0, length: int | None = None) -> bytes:
        """Reads ``path`` from the live Workspace of ``target`` (a branch or a mountpoint; the
        branch need not be mounted): ``length`` bytes from ``offset`` (default: to the end)."""
        out = bytearray()
        while True:
            want = _core.piece_size(length, len(out))
            data, size = self._run(_core.read_file(target, path, offset + len(out), want))
            out += data
            if _core.pieces_done(offset, length, len(out), want, len(data), size):
                return bytes(out)

    def write_file(self, target: PathArg, path: str, data: bytes | str, mode: int | str | None = None,
                   append: bool = False) -> int:
        """Writes ``data`` (str is UTF-8) to ``path`` in ``target``'s live Workspace, replacing
        the file (or appending); missing parent directories are made. ``mode`` sets the
        permission bits (``0o755`` or ``"0755"``; a new file is 0644 without it). A mounted
        branch's users see the change at once. Returns the file's size after the write."""
        raw = _core.as_bytes(data)
        bits = _core.mode_string(mode)
        size = 0
        for i in range(0, max(len(raw), 1), _core.CHUNK):
            size = self._run(_core.write_file(target, path, raw[i:i + _core.CHUNK], bits, append or i > 0))
        return size

    def list_dir(self, target: PathArg, path: str | None = None) -> list[DirEntry]:
        """The entries of directory ``path`` (default: the root) in ``target``'s live Workspace."""
        return self._run(_core.list_dir(target, path))

    def remove_path(self, target: PathArg, path: str, recursive: bool = False) -> None:
        """Removes ``path`` (a directory only with ``recursive``) from ``target``'s Workspace."""
        self._run(_core.remove_path(target, path, recursive))

    # -- merges ------------------------------------------------------------------------------------

    def merge(self, source: str, into: PathArg | None = None, *, message: str | None = None,
              ff_only: bool = False, no_ff: bool = False, strategy: str | None = None,
              strategy_option: str | None = None) -> MergeResult:
        """Merges ``source`` (a branch, commit, prefix, REF~N or REF^N) into ``into`` (a branch or
        a mountpoint; default: the mount holding the working directory), as ``layerfs merge``.

        A fast-forward moves the branch; otherwise a merge Commit is made (``message``, default
        "merge SOURCE"). ``ff_only`` refuses anything but a fast-forward (NotFastForward),
        ``no_ff`` makes a merge Commit even when a fast-forward is possible. ``strategy`` "ours"
        or "theirs" takes that side's whole tree; ``strategy_option`` "ours" or "theirs" resolves
        each conflict with that side. A mounted branch (or one with uncommitted changes) merges
        through its Workspace, live in the mount.

        Conflicts raise ``Conflict`` whose ``.result`` is this MergeResult: for a mounted branch
        the merge has stopped there (``stopped``) with the conflicts written into the mount, to be
        resolved and then ``merge_continue`` (or ``merge_abort``); otherwise nothing changed."""
        return self._run(_core.merge(source, into, message, ff_only, no_ff, strategy, strategy_option))

    def cherry_pick(self, commit: str, into: PathArg | None = None, *,
                    strategy_option: str | None = None) -> MergeResult:
        """Applies the change ``commit`` made (against its first parent) onto ``into`` as a new
        Commit (``layerfs cherry-pick``); conflicts as for ``merge``."""
        return self._run(_core.pick("cherry_pick", commit, into, strategy_option))

    def revert(self, commit: str, into: PathArg | None = None, *, strategy_option: str | None = None) -> MergeResult:
        """Undoes the change ``commit`` made, as a new Commit on ``into`` (``layerfs revert``);
        conflicts as for ``merge``."""
        return self._run(_core.pick("revert", commit, into, strategy_option))

    def merge_continue(self, into: PathArg | None = None, *, message: str | None = None,
                       op: str = "merge") -> MergeResult:
        """Commits a stopped merge once its conflicts are resolved in the mount (``layerfs
        merge --continue``; ``op`` "cherry-pick" or "revert" for those, which take no
        ``message``). Conflict again while some are still unresolved."""
        return self._run(_core.merge_step(op, into, message, "continue"))

    def merge_abort(self, into: PathArg | None = None, *, op: str = "merge") -> MergeResult:
        """Puts the Workspace back as it was before the stopped merge (``--abort``); the result
        has ``aborted`` set."""
        return self._run(_core.merge_step(op, into, None, "abort"))

    # -- exec (client side: mount, run, commit, umount) -------------------------------------------

    def exec(self, ref: str, command: Sequence[str] | str, *, commit: bool | str = False, isolate: bool = False,
             no_network: bool = False, mountpoint: PathArg | None = None, capture_output: bool = False,
             input: bytes | None = None, env: Mapping[str, str] | None = None,
             timeout: float | None = None) -> ExecResult:
        """Runs ``command`` with its working directory in ``ref``'s Workspace, as ``layerfs
        exec`` does (docs/protocol.md): a branch that is not mounted is mounted for the run (at
        ``mountpoint``, made if missing, or a fresh temporary directory) and unmounted after, even
        when the command or the commit fails; a mounted one runs in its mount (Busy when
        ``mountpoint`` names another place). When ``ref`` is a commit, not a branch, it is forked
        first into ``exec-ID12`` (``-2``, ``-3``... when taken): ``result.branch``,
        ``result.forked``.

        A str command runs under ``/bin/sh -c``. ``commit`` commits what the command left,
        whatever its exit status: True with the message "exec: COMMAND", or a str as the message.
        ``isolate`` runs it in the same bubblewrap sandbox as ``layerfs exec --isolate`` (the
        Workspace writable at /workspace, the host's system read-only); ``no_network`` (with
        ``isolate``) gives it only a private loopback. Standard streams pass through unless
        ``capture_output`` (``input`` is fed to stdin). After ``timeout`` seconds the command is
        killed (SIGKILL), which the result shows. A command that cannot be started raises
        NotFound (or PermissionDenied) after the cleanup."""
        _core.check_exec(command, isolate, no_network)
        branch, forked, mp = self._exec_branch(ref)
        want = os.path.realpath(os.fspath(mountpoint)) if mountpoint is not None else None
        if mp is not None and want is not None and want != mp:
            raise errors.make_error("EBUSY", f"branch '{branch}' is mounted at {mp}, not {want}")
        mounted = made_dir = False
        if mp is None:
            if want is None:
                want = tempfile.mkdtemp(prefix="layerfs-exec.")
                made_dir = True
            elif not os.path.exists(want):
                os.makedirs(want)
                made_dir = True
            try:
                mp = self.mount(branch, want).mountpoint
            except BaseException:
                if made_dir:
                    os.rmdir(want)
                raise
            mounted = True
        try:
            argv = _core.exec_argv(command, mp, self.path, isolate, no_network)
            pipe = subprocess.PIPE if capture_output else None
            try:
                proc = subprocess.Popen(argv, cwd=mp, env=_core.exec_env(env, mp, isolate),
                                        stdin=subprocess.PIPE if input is not None else None, stdout=pipe, stderr=pipe)
            except OSError as e:
                raise errors.make_error("EACCES" if e.errno == 13 else "ENOENT",
                                        f"exec: {argv[0]}: {e.strerror}") from None
            try:
                out, err = proc.communicate(input, timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            cid = None
            if commit is not False:
                cid = self.commit(mp, _core.exec_message(command) if commit is True else str(commit))
        finally:
            if mounted:
                self.umount(mp)
                if made_dir and want is not None:
                    os.rmdir(want)
        code = proc.returncode
        return ExecResult(exit_code=128 - code if code < 0 else code,
                          signal=_core.signal_name(-code) if code < 0 else None, branch=branch, mountpoint=mp,
                          mounted=mounted, forked=forked, isolated=isolate, commit=cid, stdout=out, stderr=err)

    def _exec_branch(self, ref: str) -> tuple[str, bool, str | None]:
        """The branch exec runs in, whether it was forked, and its mountpoint if mounted."""
        branches = self.branches()
        for b in branches:
            if b.name == ref:
                return ref, False, b.mountpoint
        head = self.log(ref, 1)[0].id  # NotFound when ref names nothing
        taken = {b.name for b in branches}
        for name in _core.exec_branch_names(head):
            if name in taken:
                continue
            try:
                self.fork(name, head)
            except errors.Exists:
                continue
            return name, True, None
        raise AssertionError("unreachable")
