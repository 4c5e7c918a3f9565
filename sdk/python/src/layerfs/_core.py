"""What the synchronous and the asyncio clients share: finding the programs, starting a daemon,
encoding requests and decoding messages of protocol version 1 (docs/protocol.md), and one
``Call`` per verb (its name, its arguments by the protocol's names, and how to parse its result).

Nothing here does socket I/O; client.py and aio.py do, each in its own way.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import signal
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterator, Mapping, Sequence, TypeVar, cast

from . import errors
from .types import (
    Branch,
    Change,
    Commit,
    CommitResult,
    DirEntry,
    ExportResult,
    GcResult,
    ImportResult,
    MergeResult,
    Mount,
    Progress,
    ResetResult,
    Stats,
    VerifyResult,
    WorkspaceStatus,
)

PROTOCOL_VERSION = 1
MAX_MESSAGE = 64 << 20
"""The protocol's largest message, newline included (docs/protocol.md, Transport)."""
CHUNK = 16 << 20
"""File content moves in pieces of this many bytes (base64 makes a piece ~22 MiB on the wire)."""
DEFAULT_IDLE = 60
"""Seconds a daemon started by the SDK stays up with no mount and no connection."""

T = TypeVar("T")
ProgressCallback = Callable[[Progress], None]


def socket_path(store: str) -> str:
    return os.path.join(store, "control.sock")


def pid_path(store: str) -> str:
    return os.path.join(store, "layerfsd.pid")


def find_layerfs() -> str:
    """The `layerfs` program: ``$LAYERFS``, else the first on PATH (docs/protocol.md, "Starting
    the daemon")."""
    env = os.environ.get("LAYERFS")
    if env:
        return env
    found = shutil.which("layerfs")
    if not found:
        raise errors.make_error("ENOENT", "cannot find the layerfs program: set $LAYERFS or put it on PATH")
    return found


def find_layerfsd() -> str:
    """The `layerfsd` program: ``$LAYERFSD``; else the one beside `layerfs` (``$LAYERFS``, else
    the first on PATH, symbolic links resolved) when executable; else the first on PATH."""
    env = os.environ.get("LAYERFSD")
    if env:
        return env
    cli = os.environ.get("LAYERFS") or shutil.which("layerfs")
    if cli:
        beside = os.path.join(os.path.dirname(os.path.realpath(cli)), "layerfsd")
        if os.access(beside, os.X_OK):
            return beside
    found = shutil.which("layerfsd")
    if not found:
        raise errors.make_error("ENOENT", "cannot find the layerfsd program: set $LAYERFSD or put it on PATH")
    return found


def store_root(path: str | os.PathLike[str]) -> str:
    """The Store's absolute, symlink-free path; NotFound when there is no Store there."""
    p = os.path.realpath(os.fspath(path))
    if not os.path.isdir(p):
        raise errors.make_error("ENOENT", f"no Store at {os.fspath(path)}")
    if not os.path.exists(os.path.join(p, "LAYERFS")):
        raise errors.make_error("ENOENT", f"{os.fspath(path)} is not a LayerFS Store")
    return p


def _wait_for_exiting_daemon(store: str, limit: float = 6.0) -> None:
    # A daemon that stopped listening may still hold the Store while it exits: starting another
    # before it is gone would find the Store busy.
    try:
        with open(pid_path(store)) as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return
    deadline = time.monotonic() + limit
    while pid > 0 and time.monotonic() < deadline and _alive(pid):
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    # A daemon that exited may stay a zombie until its parent (often init) reaps it.
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def error_line(stderr: bytes) -> errors.LayerFSError | None:
    """The error a program run with ``--json`` reported: the last line of its stderr as
    ``{"error": {"code", "errno", "message"}}`` (docs/protocol.md); None when it is not one."""
    lines = stderr.decode(errors="replace").strip().splitlines()
    try:
        msg = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    if not isinstance(msg, dict) or not isinstance(msg.get("error"), dict):
        return None
    return errors.from_wire(msg["error"])


def start_daemon(store: str, idle: int, connected: Callable[[], bool]) -> None:
    """Starts ``layerfsd --store STORE --json --idle IDLE`` (it returns once it listens).

    A failure is raised with the code layerfsd reported (EBUSY: the Store is held by another
    process; ENOENT: no Store). ``connected()`` is tried first: another client may have started
    the daemon at the same moment, and then the Store is busy because it is served, which is
    what we wanted.
    """
    _wait_for_exiting_daemon(store)
    argv = [find_layerfsd(), "--store", store, "--json", "--idle", str(idle)]
    # stderr goes to a file, not a pipe: the daemon's child could keep a pipe open for its life.
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        except OSError as e:
            raise errors.make_error("ENOENT", f"cannot run {argv[0]}: {e.strerror}") from None
        try:
            rc = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise errors.make_error("ETIMEDOUT", f"{argv[0]} did not start within 120 s") from None
        if rc == 0 or connected():
            return
        err.seek(0)
        stderr = err.read()
    why = error_line(stderr)
    if why is None:  # not a layerfsd that speaks --json: no code to give but EIO
        text = stderr.decode(errors="replace").strip()
        why = errors.make_error("EIO", text.splitlines()[-1] if text else f"exit status {rc}")
    raise errors.make_error(why.code, f"cannot start layerfsd for {store}: {why.message}", why.errno)


def run_cli_json(argv: list[str]) -> Any:
    """Runs ``layerfs ... --json`` for a verb no daemon serves (init, clone) and returns its JSON
    result; a failure is raised with the code of the error object it printed on stderr (a usage
    error, exit status 2, has none: InvalidArgument)."""
    try:
        proc = subprocess.run([*argv, "--json"], stdin=subprocess.DEVNULL, capture_output=True)
    except OSError as e:
        raise errors.make_error("ENOENT", f"cannot run {argv[0]}: {e.strerror}") from None
    if proc.returncode == 0:
        try:
            return json.loads(proc.stdout)
        except ValueError:
            raise errors.make_error("PROTOCOL", f"{' '.join(argv[:2])} --json printed no JSON") from None
    why = error_line(proc.stderr)
    if why is not None:
        raise why
    text = proc.stderr.decode(errors="replace").strip()
    line = text.splitlines()[-1] if text else f"{' '.join(argv[:2])} exited with status {proc.returncode}"
    line = line[len("layerfs: "):] if line.startswith("layerfs: ") else line
    raise errors.make_error("EINVAL" if proc.returncode == 2 else "EIO", line)


def run_init(path: str, policy: str | None, from_dir: str | None, message: str | None) -> Any:
    """Runs ``layerfs init --json`` (there is no daemon for a Store that does not exist yet) and
    returns its result, ``{"store", "policy", "commit"}``."""
    argv = [find_layerfs(), "init", path]
    if policy is not None:
        argv += ["--policy", policy]
    if from_dir is not None:
        argv += ["--from", os.fspath(from_dir)]
    if message is not None:
        argv += ["-m", message]
    return run_cli_json(argv)


def encode_request(rid: int, verb: str, args: Mapping[str, Any], cwd: str | None) -> bytes:
    msg: dict[str, Any] = {"protocol": PROTOCOL_VERSION, "id": rid, "verb": verb, "args": dict(args)}
    if cwd:
        msg["cwd"] = cwd
    try:
        line = json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    except UnicodeEncodeError:
        # A name that is not UTF-8, as os.fsdecode gives it (lone surrogates \udc80..\udcff):
        # escaped, the daemon reads each back as its byte (docs/protocol.md).
        line = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
    if len(line) > MAX_MESSAGE:
        raise errors.make_error("TOO_LARGE", f"request '{verb}' is {len(line)} bytes, over the protocol's {MAX_MESSAGE}")
    return line


def decode_message(line: bytes) -> dict[str, Any]:
    try:
        msg = json.loads(line)
    except ValueError as e:
        raise errors.make_error("PROTOCOL", f"layerfsd sent a message that is not JSON: {e}") from None
    if not isinstance(msg, dict):
        raise errors.make_error("PROTOCOL", "layerfsd sent a message that is not a JSON object")
    return msg


class Outcome:
    """Feeds one request's messages in; says when the final response has come."""

    __slots__ = ("rid", "verb", "progress", "done", "result")

    def __init__(self, rid: int, verb: str, progress: ProgressCallback | None) -> None:
        self.rid, self.verb, self.progress = rid, verb, progress
        self.done = False
        self.result: Any = None

    def feed(self, msg: dict[str, Any]) -> None:
        """Takes one message; raises the verb's error; sets ``done``/``result`` on the response."""
        mid = msg.get("id")
        if mid != self.rid:
            if mid is None and msg.get("ok") is False:
                raise errors.from_wire(msg.get("error"))  # the daemon could not read our request
            raise errors.make_error("PROTOCOL", f"layerfsd answered request {mid!r} while {self.rid} was waiting")
        if "event" in msg:
            if msg["event"] == "progress" and self.progress is not None:
                self.progress(Progress.from_json(msg.get("progress")))
            return  # events of kinds this SDK does not know are skipped
        ok = msg.get("ok")
        if ok is True:
            self.done, self.result = True, msg.get("result")
        elif ok is False:
            self.done = True
            raise errors.from_wire(msg.get("error"))  # with error.result when the failure has one
        else:
            raise errors.make_error("PROTOCOL", f"layerfsd sent a message with neither 'ok' nor 'event' for '{self.verb}'")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request: the verb, its arguments, and the parser of its result."""

    verb: str
    args: dict[str, Any]
    parse: Callable[[Any], T]


def _args(**kw: Any) -> dict[str, Any]:
    out = {}
    for k, v in kw.items():
        if v is None or v is False:
            continue
        out[k] = os.fspath(v) if isinstance(v, os.PathLike) else v
    return out


def _path(p: str | os.PathLike[str]) -> str:
    return os.path.abspath(os.fspath(p))


def _list(cls: Any) -> Callable[[Any], list[Any]]:
    def parse(r: Any) -> list[Any]:
        if not isinstance(r, list):
            raise errors.make_error("PROTOCOL", f"expected a JSON array, got {type(r).__name__}")
        return [cls.from_json(x) for x in r]
    return parse


def _none(_: Any) -> None:
    return None


def _dict(r: Any) -> dict[str, Any]:
    if not isinstance(r, dict):
        raise errors.make_error("PROTOCOL", f"expected a JSON object, got {type(r).__name__}")
    return r


def _content(r: Any) -> tuple[bytes, int]:
    """A piece of content and the whole file's size (``cat`` and ``read_file``)."""
    try:
        d = _dict(r)
        data = base64.b64decode(d["content_base64"], validate=True)
        size = d.get("size")
        return data, size if isinstance(size, int) else -1
    except (KeyError, ValueError) as e:
        raise errors.make_error("PROTOCOL", f"bad content_base64 from layerfsd: {e}") from None


def piece_size(length: int | None, got: int) -> int:
    """How much the next piece of a read asks for."""
    return CHUNK if length is None else min(CHUNK, length - got)


def pieces_done(offset: int, length: int | None, got: int, want: int, piece: int, size: int) -> bool:
    """Whether a read in pieces has all it asked for: a short piece, the length reached, or the
    end of the file (``size`` is the whole file's)."""
    return piece < want or (length is not None and got >= length) or (0 <= size <= offset + got)


# One function per verb of docs/protocol.md; argument names are the protocol's.
def branches() -> Call[list[Branch]]:
    return Call("branches", {}, _list(Branch))


def fork(name: str, at: str) -> Call[Branch]:
    return Call("fork", {"name": name, "from": at}, Branch.from_json)


def branch_delete(name: str) -> Call[None]:
    return Call("branch_delete", {"name": name}, _none)


def _paths(paths: Sequence[str] | None) -> list[str] | None:
    return [os.fspath(p) for p in paths] if paths else None


def log(ref: str, max_count: int | None, graph: bool = False, paths: Sequence[str] | None = None,
        patch: bool = False, all: bool = False, changes: bool = False,
        reverse: bool = False, renames: bool = False, grep: str | None = None, ignore_case: bool = False,
        since: str | None = None, until: str | None = None) -> Call[list[Commit]]:
    return Call("log", _args(ref=ref, max_count=max_count, graph=graph, all=all, paths=_paths(paths),
                             changes=changes, patch=patch, reverse=reverse, renames=renames, grep=grep,
                             ignore_case=ignore_case, since=since, until=until),
                _list(Commit))


def rev_parse(ref: str) -> Call[str]:
    return Call("rev_parse", {"ref": ref}, lambda r: str(r["commit"]))


def show(commit: str, patch: bool, paths: Sequence[str] | None = None, renames: bool = False) -> Call[Commit]:
    return Call("show", _args(commit=commit, patch=patch, paths=_paths(paths), renames=renames), Commit.from_json)


def diff(a: str, b: str | None, patch: bool, paths: Sequence[str] | None = None,
         renames: bool = False) -> Call[list[Change]]:
    return Call("diff", _args(a=a, b=b, patch=patch, paths=_paths(paths), renames=renames), _list(Change))


def cat(commit: str, path: str, offset: int, length: int | None) -> Call[tuple[bytes, int]]:
    return Call("cat", _args(commit=commit, path=path, offset=offset or None, length=length), _content)


def export(commit: str, dir: str | os.PathLike[str]) -> Call[ExportResult]:
    return Call("export", {"commit": commit, "dir": _path(dir)}, ExportResult.from_json)


def import_dir(dir: str | os.PathLike[str], branch: str | None, message: str | None,
               jobs: int | None = None) -> Call[ImportResult]:
    return Call("import", _args(dir=_path(dir), branch=branch, message=message, jobs=jobs), ImportResult.from_json)


def mount(ref: str, mountpoint: str | os.PathLike[str], read_only: bool, allow_other: bool,
          single_threaded: bool = False, threads: bool = False, no_follow_cpu: bool = False) -> Call[Mount]:
    return Call("mount", _args(ref=ref, mountpoint=_path(mountpoint), read_only=read_only,
                               allow_other=allow_other, single_threaded=single_threaded, threads=threads,
                               no_follow_cpu=no_follow_cpu), Mount.from_json)


def umount(mountpoint: str | os.PathLike[str]) -> Call[None]:
    return Call("umount", {"mountpoint": _path(mountpoint)}, _none)


def mounts() -> Call[list[Mount]]:
    return Call("mounts", {}, _list(Mount))


def _target(t: str | os.PathLike[str] | None) -> str | None:
    # A mountpoint is a path; a branch is a name. Anything with a '/' or a PathLike is a path.
    if t is None:
        return None
    if isinstance(t, os.PathLike):
        return _path(t)
    return t


def commit(target: str | os.PathLike[str] | None, message: str, amend: bool = False) -> Call[CommitResult]:
    return Call("commit", _args(target=_target(target), message=message, amend=amend), CommitResult.from_json)


def status(target: str | os.PathLike[str] | None, patch: bool = False,
           paths: Sequence[str] | None = None, renames: bool = False) -> Call[WorkspaceStatus]:
    return Call("status", _args(target=_target(target), patch=patch, paths=_paths(paths), renames=renames),
                WorkspaceStatus.from_json)


def reset(target: str | os.PathLike[str] | None, hard: str | None) -> Call[ResetResult]:
    return Call("reset", _args(target=_target(target), hard=hard), ResetResult.from_json)


def restore(target: str | os.PathLike[str] | None, paths: Sequence[str], source: str | None) -> Call[list[Change]]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not paths:
        raise errors.make_error("EINVAL", "restore: name at least one path")
    parse = _list(Change)
    return Call("restore", _args(target=_target(target), paths=_paths(paths), source=source),
                lambda r: parse(r["restored"] if isinstance(r, dict) else r))


def stats() -> Call[Stats]:
    return Call("stats", {}, lambda r: cast(Stats, _dict(r)))


def verify(commits: list[str] | None, fetch: bool = False) -> Call[VerifyResult]:
    return Call("verify", _args(commits=list(commits) if commits else None, fetch=fetch), VerifyResult.from_json)


def gc() -> Call[GcResult]:
    return Call("gc", {}, GcResult.from_json)


# Remotes (docs/protocol.md): results are the protocol's objects, as dicts.
def remote_list() -> Call[list[dict[str, Any]]]:
    return Call("remote_list", {}, lambda r: [dict(x) for x in r])


def remote_add(name: str, url: str, lazy: bool) -> Call[dict[str, Any]]:
    return Call("remote_add", _args(name=name, url=url, lazy=lazy), _dict)


def remote_remove(name: str) -> Call[dict[str, Any]]:
    return Call("remote_remove", {"name": name}, _dict)


def push(remote: str | None, branches: list[str] | None, force: bool) -> Call[dict[str, Any]]:
    return Call("push", _args(remote=remote, branches=list(branches) if branches else None, force=force), _dict)


def fetch(remote: str | None) -> Call[dict[str, Any]]:
    return Call("fetch", _args(remote=remote), _dict)


def pull(remote: str | None, branch: str | None) -> Call[dict[str, Any]]:
    return Call("pull", _args(remote=remote, branch=branch), _dict)


def run_clone(url: str, path: str, lazy: bool) -> Any:
    """Runs ``layerfs clone --json`` (it makes a new Store, which no daemon holds yet)."""
    return run_cli_json([find_layerfs(), "clone", url, path, *(["--lazy"] if lazy else [])])


def read_file(target: str | os.PathLike[str], path: str, offset: int, length: int | None) -> Call[tuple[bytes, int]]:
    return Call("read_file", _args(target=_target(target), path=path, offset=offset or None, length=length),
                _content)


def mode_string(mode: int | str | None) -> str | None:
    """``write_file``'s mode as the protocol takes it: octal digits in a string ("0755")."""
    if mode is None or isinstance(mode, str):
        return mode
    if isinstance(mode, bool) or not 0 <= mode <= 0o7777:
        raise errors.make_error("EINVAL", f"write_file: mode {mode!r} is not permission bits (0 to 0o7777)")
    return f"{mode:04o}"


def write_file(target: str | os.PathLike[str], path: str, data: bytes, mode: str | None,
               append: bool) -> Call[int]:
    def parse(r: Any) -> int:
        return int(_dict(r).get("size", 0))
    return Call("write_file", _args(target=_target(target), path=path,
                                    content_base64=base64.b64encode(data).decode(), mode=mode,
                                    append=append), parse)


def list_dir(target: str | os.PathLike[str], path: str | None) -> Call[list[DirEntry]]:
    return Call("list_dir", _args(target=_target(target), path=path), _list(DirEntry))


def remove_path(target: str | os.PathLike[str], path: str, recursive: bool) -> Call[None]:
    return Call("remove_path", _args(target=_target(target), path=path, recursive=recursive), _none)


def merge(source: str, into: str | os.PathLike[str] | None, message: str | None, ff_only: bool, no_ff: bool,
          strategy: str | None, strategy_option: str | None) -> Call[MergeResult]:
    return Call("merge", _args(source=source, into=_target(into), message=message, ff_only=ff_only, no_ff=no_ff,
                               strategy=strategy, strategy_option=strategy_option), MergeResult.from_json)


def pick(verb: str, commit: str, into: str | os.PathLike[str] | None,
         strategy_option: str | None) -> Call[MergeResult]:
    return Call(verb, _args(commit=commit, into=_target(into), strategy_option=strategy_option), MergeResult.from_json)


MERGE_VERBS = {"merge": "merge", "cherry-pick": "cherry_pick", "cherry_pick": "cherry_pick", "revert": "revert"}


def merge_step(op: str, into: str | os.PathLike[str] | None, message: str | None, step: str) -> Call[MergeResult]:
    """``--continue`` (step "continue") or ``--abort`` of the merge, cherry-pick or revert ``op``."""
    verb = MERGE_VERBS.get(op)
    if verb is None:
        raise errors.make_error("EINVAL", f"unknown merge operation '{op}' (merge, cherry-pick, revert)")
    return Call(verb, _args(into=_target(into), message=message, **{step: True}), MergeResult.from_json)


def raw(verb: str, args: Mapping[str, Any] | None) -> Call[Any]:
    return Call(verb, dict(args or {}), lambda r: r)


def as_bytes(data: bytes | bytearray | memoryview | str) -> bytes:
    return data.encode() if isinstance(data, str) else bytes(data)


def with_result(e: errors.LayerFSError, call: Call[Any]) -> errors.LayerFSError:
    """``e`` with the result it carries (a CONFLICT's merge outcome) parsed as ``call``'s result."""
    if e.result is not None:
        try:
            e.result = call.parse(e.result)
        except (errors.LayerFSError, TypeError, ValueError):
            pass  # not the verb's shape: leave it as the daemon sent it
    return e


# exec: the same choices as `layerfs exec` (src/client/exec.cc), made from protocol verbs.
def exec_branch_names(commit_id: str) -> Iterator[str]:
    """Names for the branch a commit REF is forked into: exec-ID12, then exec-ID12-2, -3, ..."""
    base = f"exec-{commit_id[:12]}"
    yield base
    for i in itertools.count(2):
        yield f"{base}-{i}"


def exec_message(command: Sequence[str] | str) -> str:
    """The default message of an exec's Commit: "exec: CMD ARGS", at most 200 characters."""
    msg = "exec: " + (command if isinstance(command, str) else " ".join(command))
    return msg if len(msg) <= 200 else msg[:197] + "..."


def check_exec(command: Sequence[str] | str, isolate: bool, no_network: bool) -> list[str]:
    """The command's argv (a str under ``/bin/sh -c``), after the checks made before anything is
    mounted: a command, ``no_network`` only with ``isolate``, bubblewrap there for ``isolate``."""
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    if not argv:
        raise errors.make_error("EINVAL", "exec: no command")
    if no_network and not isolate:
        raise errors.make_error("EINVAL", "exec: no_network needs isolate")
    if isolate and not (os.access("/usr/bin/bwrap", os.X_OK) or os.access("/bin/bwrap", os.X_OK)):
        raise errors.make_error("ENOENT", "isolate needs bubblewrap (bwrap): apt-get install bubblewrap")
    return argv


def exec_argv(command: Sequence[str] | str, mountpoint: str, store: str, isolate: bool,
              no_network: bool) -> list[str]:
    """The command line to run: a str under ``/bin/sh -c``; with ``isolate`` inside bubblewrap
    exactly as ``layerfs exec --isolate`` builds it (docs/design.md, "Agent interface": the
    Workspace writable at /workspace, the host's system read-only, a private /tmp, /dev and
    /proc, the Store hidden, new PID/IPC/UTS namespaces, no capabilities; ``no_network``: only a
    private loopback)."""
    argv = check_exec(command, isolate, no_network)
    if not isolate:
        return argv
    a = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
         "--unshare-cgroup-try", "--cap-drop", "ALL"]
    if no_network:
        a.append("--unshare-net")
    for n in sorted(os.listdir("/")):
        if n in ("proc", "dev", "tmp", "workspace"):
            continue
        p = "/" + n
        if os.path.islink(p):
            a += ["--symlink", os.readlink(p), p]
        else:
            a += ["--ro-bind", p, p]
    a += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    if store and store != "/" and not store.startswith("/tmp/"):
        a += ["--tmpfs", store, "--remount-ro", store]
    a += ["--bind", mountpoint, "/workspace", "--remount-ro", "/", "--chdir", "/workspace", "--setenv", "PWD",
          "/workspace", "--"]
    return a + argv


def exec_env(env: Mapping[str, str] | None, mountpoint: str, isolate: bool) -> dict[str, str]:
    """The command's environment: ``env`` (default: this process's) with PWD at the mount."""
    out = dict(os.environ if env is None else env)
    if not isolate:
        out["PWD"] = mountpoint
    return out


def signal_name(num: int) -> str:
    """A signal's name without "SIG", as ``layerfs exec --json`` gives it ("KILL")."""
    try:
        return signal.Signals(num).name[3:]
    except ValueError:
        return str(num)
