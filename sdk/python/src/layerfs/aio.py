"""The asyncio client: ``AsyncStore``, the same verbs as ``Store`` as coroutines.

Each concurrent call uses its own connection from a small pool, so ``asyncio.gather`` over many
verbs runs them at once in the daemon (which serves each connection on its own thread). Use it
from one event loop; ``await store.close()`` (or ``async with``) closes the connections.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import tempfile
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


class _AConn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.used = False

    def close(self) -> None:
        self.writer.close()

    async def read_message(self) -> dict[str, Any]:
        try:
            line = await self.reader.readuntil(b"\n")
        except asyncio.IncompleteReadError:
            raise errors.make_error("ECONNRESET", "layerfsd closed the connection before it answered") from None
        except asyncio.LimitOverrunError:
            raise errors.make_error("TOO_LARGE", "layerfsd sent a message over the protocol's size limit") from None
        return _core.decode_message(line[:-1])


class AsyncStore:
    """A LayerFS Store driven through its daemon from asyncio; see ``layerfs.Store`` for the verbs.

    ``await AsyncStore.open(path)`` connects (starting ``layerfsd`` when none runs);
    ``await AsyncStore.init(path)`` creates the Store first.
    """

    def __init__(self, path: str, idle: int, progress: ProgressCallback | None, autostart: bool) -> None:
        """Use ``await AsyncStore.open(path)``."""
        self.path = path
        self.idle = idle
        self.progress = progress
        self.autostart = autostart
        self._sock_path = _core.socket_path(path)
        self._idle: list[_AConn] = []
        self._closed = False
        self._ids = itertools.count(1)

    @classmethod
    async def open(cls, path: PathArg, *, idle: int = _core.DEFAULT_IDLE, progress: ProgressCallback | None = None,
                   autostart: bool = True) -> AsyncStore:
        """Opens the Store at ``path``, starting its daemon when none runs (see ``Store.open``)."""
        s = cls(_core.store_root(path), idle, progress, autostart)
        s._idle.append(await s._connect())
        return s

    @classmethod
    async def init(cls, path: PathArg, *, policy: str | None = None, from_dir: PathArg | None = None,
                   message: str | None = None, **open_kw: Any) -> AsyncStore:
        """Creates a Store at ``path`` (``layerfs init``), then opens it (see ``Store.init``)."""
        await asyncio.to_thread(_core.run_init, os.path.abspath(os.fspath(path)), policy,
                                os.path.abspath(os.fspath(from_dir)) if from_dir is not None else None, message)
        return await cls.open(path, **open_kw)

    @classmethod
    async def clone(cls, url: str, path: PathArg, *, lazy: bool = False, **open_kw: Any) -> AsyncStore:
        """Makes a Store at ``path`` from the remote at ``url`` (see ``Store.clone``)."""
        await asyncio.to_thread(_core.run_clone, url, os.path.abspath(os.fspath(path)), lazy)
        return await cls.open(path, **open_kw)

    async def close(self) -> None:
        """Closes the connections."""
        self._closed = True
        conns, self._idle = self._idle, []
        for c in conns:
            c.close()
            try:
                await c.writer.wait_closed()
            except OSError:
                pass

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncStore({self.path!r})"

    async def _open_conn(self) -> _AConn:
        r, w = await asyncio.open_unix_connection(self._sock_path, limit=_core.MAX_MESSAGE + 1)
        return _AConn(r, w)

    async def _connect(self) -> _AConn:
        try:
            return await self._open_conn()
        except (FileNotFoundError, ConnectionRefusedError):
            if not self.autostart:
                raise errors.make_error("ENOTCONN", f"no layerfsd serves {self.path}") from None
        await asyncio.to_thread(_core.start_daemon, self.path, self.idle, self._can_connect)
        try:
            return await self._open_conn()
        except OSError as e:
            raise errors.make_error("ENOTCONN", f"layerfsd for {self.path} does not answer: {e.strerror}") from None

    def _can_connect(self) -> bool:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(self._sock_path)
            return True
        except OSError:
            return False
        finally:
            s.close()

    async def _take(self) -> _AConn:
        if self._closed:
            raise errors.make_error("ENOTCONN", f"Store {self.path} is closed")
        while self._idle:
            c = self._idle.pop()
            if not (c.reader.at_eof() or c.writer.transport.is_closing()):
                return c
            c.close()  # the daemon exited while this connection was idle
        return await self._connect()

    def _put(self, c: _AConn) -> None:
        if self._closed:
            c.close()
        else:
            self._idle.append(c)

    async def _run(self, call: Call[T], progress: ProgressCallback | None = None) -> T:
        try:
            result = await self._request(call.verb, call.args, progress or self.progress)
        except errors.LayerFSError as e:
            raise _core.with_result(e, call) from None
        return call.parse(result)

    async def _request(self, verb: str, args: Mapping[str, Any], progress: ProgressCallback | None) -> Any:
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = None
        rid = next(self._ids)
        line = _core.encode_request(rid, verb, args, cwd)  # TOO_LARGE before any connection is taken
        for attempt in range(2):
            conn = await self._take()
            conn.writer.write(line)
            try:
                await conn.writer.drain()
                if conn.writer.transport.is_closing():
                    raise BrokenPipeError
            except (BrokenPipeError, ConnectionResetError):
                conn.close()
                if attempt == 0 and conn.used:
                    continue  # the daemon left while the connection was idle; it never saw this
                raise errors.make_error("ECONNRESET", "layerfsd closed the connection") from None
            conn.used = True
            out = _core.Outcome(rid, verb, progress)
            try:
                while not out.done:
                    out.feed(await conn.read_message())
            except errors.LayerFSError as e:
                if out.done and e.code not in ("PROTOCOL", "TOO_LARGE"):
                    self._put(conn)
                else:
                    conn.close()
                raise
            except BaseException:
                conn.close()  # cancelled or a callback raised mid-response: the stream is spoiled
                raise
            self._put(conn)
            return out.result
        raise AssertionError("unreachable")

    async def request(self, verb: str, args: Mapping[str, Any] | None = None,
                      progress: ProgressCallback | None = None) -> Any:
        """Sends any verb with raw arguments; returns its raw JSON result (see ``Store.request``)."""
        return await self._run(_core.raw(verb, args), progress)

    async def branches(self) -> list[Branch]:
        """Every branch with its head and mountpoint (see ``Store.branches``)."""
        return await self._run(_core.branches())

    async def fork(self, name: str, at: str = "main") -> Branch:
        """Creates branch ``name`` at ``at``, O(1) (see ``Store.fork``)."""
        return await self._run(_core.fork(name, at))

    async def branch_delete(self, name: str) -> None:
        """Deletes branch ``name`` (see ``Store.branch_delete``)."""
        await self._run(_core.branch_delete(name))

    async def log(self, ref: str = "main", max_count: int | None = None, graph: bool = False,
                  paths: Sequence[str] | None = None, patch: bool = False, *, all: bool = False,
                  changes: bool = False, reverse: bool = False, renames: bool = False, grep: str | None = None,
                  ignore_case: bool = False, since: str | None = None, until: str | None = None) -> list[Commit]:
        """Commits newest first from ``ref`` (see ``Store.log``)."""
        return await self._run(_core.log(ref, max_count, graph, paths, patch, all, changes, reverse, renames, grep,
                                         ignore_case, since, until))

    async def rev_parse(self, ref: str) -> str:
        """The Commit id ``ref`` names (see ``Store.rev_parse``)."""
        return await self._run(_core.rev_parse(ref))

    async def show(self, commit: str, patch: bool = False, paths: Sequence[str] | None = None, *,
                   renames: bool = False) -> Commit:
        """A Commit with its changes (see ``Store.show``)."""
        return await self._run(_core.show(commit, patch, paths, renames))

    async def diff(self, a: str, b: str | None = None, patch: bool = False,
                   paths: Sequence[str] | None = None, *, renames: bool = False) -> list[Change]:
        """Changes from ``a`` to ``b`` (see ``Store.diff``)."""
        return await self._run(_core.diff(a, b, patch, paths, renames))

    async def cat(self, commit: str, path: str, offset: int = 0, length: int | None = None) -> bytes:
        """A file of a Commit (see ``Store.cat``)."""
        out = bytearray()
        while True:
            want = _core.piece_size(length, len(out))
            data, size = await self._run(_core.cat(commit, path, offset + len(out), want))
            out += data
            if _core.pieces_done(offset, length, len(out), want, len(data), size):
                return bytes(out)

    async def export(self, commit: str, dir: PathArg, progress: ProgressCallback | None = None) -> ExportResult:
        """Writes a Commit's tree into ``dir`` (see ``Store.export``)."""
        return await self._run(_core.export(commit, dir), progress)

    async def import_dir(self, dir: PathArg, branch: str | None = None, message: str | None = None,
                         progress: ProgressCallback | None = None, jobs: int | None = None) -> ImportResult:
        """Commits a directory's tree (see ``Store.import_dir``)."""
        return await self._run(_core.import_dir(dir, branch, message, jobs), progress)

    async def mount(self, ref: str, mountpoint: PathArg, read_only: bool = False, allow_other: bool = False, *,
                    single_threaded: bool = False, threads: bool = False, no_follow_cpu: bool = False) -> Mount:
        """Mounts ``ref`` at ``mountpoint`` (see ``Store.mount``)."""
        return await self._run(_core.mount(ref, mountpoint, read_only, allow_other, single_threaded, threads,
                                           no_follow_cpu))

    async def umount(self, mountpoint: PathArg) -> None:
        """Unmounts ``mountpoint`` (see ``Store.umount``)."""
        await self._run(_core.umount(mountpoint))

    async def mounts(self) -> list[Mount]:
        """The daemon's live mounts (see ``Store.mounts``)."""
        return await self._run(_core.mounts())

    async def commit(self, target: PathArg | None, message: str, amend: bool = False) -> str:
        """Commits ``target`` and returns the new Commit's id (see ``Store.commit``)."""
        return (await self._run(_core.commit(target, message, amend))).commit

    async def status(self, target: PathArg | None = None, patch: bool = False,
                     paths: Sequence[str] | None = None, *, renames: bool = False) -> WorkspaceStatus:
        """Uncommitted changes (see ``Store.status``)."""
        return await self._run(_core.status(target, patch, paths, renames))

    async def reset(self, target: PathArg | None = None, hard: str | None = None) -> ResetResult:
        """Discards changes, or moves the branch with ``hard`` (see ``Store.reset``)."""
        return await self._run(_core.reset(target, hard))

    async def restore(self, target: PathArg | None, paths: Sequence[str], source: str | None = None) -> list[Change]:
        """Brings paths back as a Commit has them (see ``Store.restore``)."""
        return await self._run(_core.restore(target, paths, source))

    async def stats(self) -> Stats:
        """Space and chain statistics (see ``Store.stats``)."""
        return await self._run(_core.stats())

    async def verify(self, commits: Sequence[str] | None = None,
                     progress: ProgressCallback | None = None, fetch: bool = False) -> VerifyResult:
        """Checks every hash reachable from ``commits`` (see ``Store.verify``)."""
        return await self._run(_core.verify(list(commits) if commits else None, fetch), progress)

    async def gc(self, progress: ProgressCallback | None = None) -> GcResult:
        """Frees what no branch reaches (see ``Store.gc``)."""
        return await self._run(_core.gc(), progress)

    async def remote_list(self) -> list[dict[str, Any]]:
        """The remotes (see ``Store.remote_list``)."""
        return await self._run(_core.remote_list())

    async def remote_add(self, name: str, url: str, lazy: bool = False) -> dict[str, Any]:
        """Adds a remote (see ``Store.remote_add``)."""
        return await self._run(_core.remote_add(name, url, lazy))

    async def remote_remove(self, name: str) -> dict[str, Any]:
        """Removes a remote (see ``Store.remote_remove``)."""
        return await self._run(_core.remote_remove(name))

    async def push(self, remote: str | None = None, branches: Sequence[str] | None = None, force: bool = False,
                   progress: ProgressCallback | None = None) -> dict[str, Any]:
        """Pushes branches (see ``Store.push``)."""
        return await self._run(_core.push(remote, list(branches) if branches else None, force), progress)

    async def fetch(self, remote: str | None = None, progress: ProgressCallback | None = None) -> dict[str, Any]:
        """Fetches a remote (see ``Store.fetch``)."""
        return await self._run(_core.fetch(remote), progress)

    async def pull(self, remote: str | None = None, branch: str | None = None,
                   progress: ProgressCallback | None = None) -> dict[str, Any]:
        """Fetches and merges (see ``Store.pull``)."""
        return await self._run(_core.pull(remote, branch), progress)

    async def read_file(self, target: PathArg, path: str, offset: int = 0, length: int | None = None) -> bytes:
        """Reads a file of a live Workspace (see ``Store.read_file``)."""
        out = bytearray()
        while True:
            want = _core.piece_size(length, len(out))
            data, size = await self._run(_core.read_file(target, path, offset + len(out), want))
            out += data
            if _core.pieces_done(offset, length, len(out), want, len(data), size):
                return bytes(out)

    async def write_file(self, target: PathArg, path: str, data: bytes | str, mode: int | str | None = None,
                         append: bool = False) -> int:
        """Writes a file of a live Workspace (see ``Store.write_file``)."""
        raw = _core.as_bytes(data)
        bits = _core.mode_string(mode)
        size = 0
        for i in range(0, max(len(raw), 1), _core.CHUNK):
            size = await self._run(_core.write_file(target, path, raw[i:i + _core.CHUNK], bits, append or i > 0))
        return size

    async def list_dir(self, target: PathArg, path: str | None = None) -> list[DirEntry]:
        """A directory of a live Workspace (see ``Store.list_dir``)."""
        return await self._run(_core.list_dir(target, path))

    async def remove_path(self, target: PathArg, path: str, recursive: bool = False) -> None:
        """Removes a path of a live Workspace (see ``Store.remove_path``)."""
        await self._run(_core.remove_path(target, path, recursive))

    async def merge(self, source: str, into: PathArg | None = None, *, message: str | None = None,
                    ff_only: bool = False, no_ff: bool = False, strategy: str | None = None,
                    strategy_option: str | None = None) -> MergeResult:
        """Merges ``source`` into ``into`` (see ``Store.merge``)."""
        return await self._run(_core.merge(source, into, message, ff_only, no_ff, strategy, strategy_option))

    async def cherry_pick(self, commit: str, into: PathArg | None = None, *,
                          strategy_option: str | None = None) -> MergeResult:
        """Applies ``commit``'s change onto ``into`` (see ``Store.cherry_pick``)."""
        return await self._run(_core.pick("cherry_pick", commit, into, strategy_option))

    async def revert(self, commit: str, into: PathArg | None = None, *,
                     strategy_option: str | None = None) -> MergeResult:
        """Undoes ``commit``'s change on ``into`` (see ``Store.revert``)."""
        return await self._run(_core.pick("revert", commit, into, strategy_option))

    async def merge_continue(self, into: PathArg | None = None, *, message: str | None = None,
                             op: str = "merge") -> MergeResult:
        """Commits a stopped merge once resolved (see ``Store.merge_continue``)."""
        return await self._run(_core.merge_step(op, into, message, "continue"))

    async def merge_abort(self, into: PathArg | None = None, *, op: str = "merge") -> MergeResult:
        """Ends a stopped merge, putting the Workspace back (see ``Store.merge_abort``)."""
        return await self._run(_core.merge_step(op, into, None, "abort"))

    async def exec(self, ref: str, command: Sequence[str] | str, *, commit: bool | str = False,
                   isolate: bool = False, no_network: bool = False, mountpoint: PathArg | None = None,
                   capture_output: bool = False, input: bytes | None = None, env: Mapping[str, str] | None = None,
                   timeout: float | None = None) -> ExecResult:
        """Runs ``command`` in ``ref``'s Workspace, mounting it for the run (see ``Store.exec``).
        Cancelling the task kills the command, then unmounts."""
        _core.check_exec(command, isolate, no_network)
        branch, forked, mp = await self._exec_branch(ref)
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
                mp = (await self.mount(branch, want)).mountpoint
            except BaseException:
                if made_dir:
                    os.rmdir(want)
                raise
            mounted = True
        try:
            argv = _core.exec_argv(command, mp, self.path, isolate, no_network)
            pipe = asyncio.subprocess.PIPE if capture_output else None
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv, cwd=mp, env=_core.exec_env(env, mp, isolate),
                    stdin=asyncio.subprocess.PIPE if input is not None else None, stdout=pipe, stderr=pipe)
            except OSError as e:
                raise errors.make_error("EACCES" if e.errno == 13 else "ENOENT",
                                        f"exec: {argv[0]}: {e.strerror}") from None
            talk = asyncio.ensure_future(proc.communicate(input))
            try:
                out, err = await asyncio.wait_for(asyncio.shield(talk), timeout)
            except asyncio.TimeoutError:
                proc.kill()
                out, err = await talk
            except BaseException:
                if proc.returncode is None:
                    proc.kill()
                await asyncio.gather(talk, return_exceptions=True)
                raise
            cid = None
            if commit is not False:
                cid = await self.commit(mp, _core.exec_message(command) if commit is True else str(commit))
        finally:
            if mounted:
                await self.umount(mp)
                if made_dir and want is not None:
                    os.rmdir(want)
        code = proc.returncode
        assert code is not None
        return ExecResult(exit_code=128 - code if code < 0 else code,
                          signal=_core.signal_name(-code) if code < 0 else None, branch=branch, mountpoint=mp,
                          mounted=mounted, forked=forked, isolated=isolate, commit=cid, stdout=out, stderr=err)

    async def _exec_branch(self, ref: str) -> tuple[str, bool, str | None]:
        """The branch exec runs in, whether it was forked, and its mountpoint if mounted."""
        branches = await self.branches()
        for b in branches:
            if b.name == ref:
                return ref, False, b.mountpoint
        head = (await self.log(ref, 1))[0].id
        taken = {b.name for b in branches}
        for name in _core.exec_branch_names(head):
            if name in taken:
                continue
            try:
                await self.fork(name, head)
            except errors.Exists:
                continue
            return name, True, None
        raise AssertionError("unreachable")
