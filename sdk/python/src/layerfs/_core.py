"""What the synchronous and the asyncio clients share: finding the programs, starting a daemon,
encoding requests and decoding messages of protocol version 1 (docs/protocol.md), and one
``Call`` per verb (its name, its arguments by the protocol's names, and how to parse its result).

Nothing here does socket I/O; client.py and aio.py do, each in its own way.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Mapping, TypeVar, cast

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
    """The `layerfs` program: ``$LAYERFS``, else the first on PATH."""
    env = os.environ.get("LAYERFS")
    if env:
        return env
    found = shutil.which("layerfs")
    if not found:
        raise errors.make_error("ENOENT", "cannot find the layerfs program: set $LAYERFS or put it on PATH")
    return found


def find_layerfsd() -> str:
    """The `layerfsd` program: ``$LAYERFSD``, beside `layerfs`, or on PATH (as the CLI looks)."""
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
    while pid > 0 and time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            return
        time.sleep(0.02)


def start_daemon(store: str, idle: int, connected: Callable[[], bool]) -> None:
    """Starts ``layerfsd --store STORE --idle IDLE`` (it returns once it listens).

    ``connected()`` is tried when the start fails: another client may have started the daemon at
    the same moment, and then the Store is busy because it is served, which is what we wanted.
    """
    _wait_for_exiting_daemon(store)
    argv = [find_layerfsd(), "--store", store, "--idle", str(idle)]
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
        line = err.read().decode(errors="replace").strip().splitlines()
    reason = line[-1] if line else f"exit status {rc}"
    if reason.startswith("layerfsd: "):
        reason = reason[len("layerfsd: "):]
    # layerfsd reports why in words only; the Store's lock held elsewhere is the one case a
    # program must tell apart, so it gets its code.
    code = "EBUSY" if ("lock" in reason.lower() or "in use" in reason.lower()) else "EIO"
    raise errors.make_error(code, f"cannot start layerfsd for {store}: {reason}")


def run_init(path: str, policy: str | None, from_dir: str | None, message: str | None) -> None:
    """Runs ``layerfs init`` (there is no daemon for a Store that does not exist yet)."""
    argv = [find_layerfs(), "init", path]
    if policy is not None:
        argv += ["--policy", policy]
    if from_dir is not None:
        argv += ["--from", os.fspath(from_dir)]
    if message is not None:
        argv += ["-m", message]
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        lines = proc.stderr.decode(errors="replace").strip().splitlines()
        msg = lines[-1] if lines else f"layerfs init exited with status {proc.returncode}"
        if msg.startswith("layerfs: "):
            msg = msg[len("layerfs: "):]
        raise errors.make_error(_init_code(path, msg), msg)


def _init_code(path: str, msg: str) -> str:
    # `layerfs init` reports failures as text only; name the cases a program acts on.
    low = msg.lower()
    if "exist" in low or "not empty" in low:
        return "EEXIST"
    if "polic" in low or "invalid" in low:
        return "EINVAL"
    if not os.path.isdir(os.path.dirname(os.path.abspath(path)) or "/"):
        return "ENOENT"
    return "EIO"


def encode_request(rid: int, verb: str, args: Mapping[str, Any], cwd: str | None) -> bytes:
    msg: dict[str, Any] = {"protocol": PROTOCOL_VERSION, "id": rid, "verb": verb, "args": dict(args)}
    if cwd:
        msg["cwd"] = cwd
    line = json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
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
            err = errors.from_wire(msg.get("error"))
            if err.result is None and "result" in msg:
                err.result = msg["result"]  # a CONFLICT's outcome may travel beside its error
            raise err
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


def log(ref: str, max_count: int | None) -> Call[list[Commit]]:
    return Call("log", _args(ref=ref, max_count=max_count), _list(Commit))


def show(commit: str) -> Call[Commit]:
    return Call("show", {"commit": commit}, Commit.from_json)


def diff(a: str, b: str | None) -> Call[list[Change]]:
    return Call("diff", _args(a=a, b=b), _list(Change))


def cat(commit: str, path: str, offset: int, length: int | None) -> Call[tuple[bytes, int]]:
    return Call("cat", _args(commit=commit, path=path, offset=offset or None, length=length), _content)


def export(commit: str, dir: str | os.PathLike[str]) -> Call[ExportResult]:
    return Call("export", {"commit": commit, "dir": _path(dir)}, ExportResult.from_json)


def import_dir(dir: str | os.PathLike[str], branch: str | None, message: str | None) -> Call[ImportResult]:
    return Call("import", _args(dir=_path(dir), branch=branch, message=message), ImportResult.from_json)


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


def commit(target: str | os.PathLike[str] | None, message: str) -> Call[CommitResult]:
    return Call("commit", _args(target=_target(target), message=message), CommitResult.from_json)


def status(target: str | os.PathLike[str] | None) -> Call[WorkspaceStatus]:
    return Call("status", _args(target=_target(target)), WorkspaceStatus.from_json)


def reset(target: str | os.PathLike[str] | None, hard: str | None) -> Call[ResetResult]:
    return Call("reset", _args(target=_target(target), hard=hard), ResetResult.from_json)


def stats() -> Call[Stats]:
    return Call("stats", {}, lambda r: cast(Stats, _dict(r)))


def verify(commits: list[str] | None) -> Call[VerifyResult]:
    return Call("verify", _args(commits=list(commits) if commits else None), VerifyResult.from_json)


def gc() -> Call[GcResult]:
    return Call("gc", {}, GcResult.from_json)


def read_file(target: str | os.PathLike[str], path: str, offset: int, length: int | None) -> Call[tuple[bytes, int]]:
    return Call("read_file", _args(target=_target(target), path=path, offset=offset or None, length=length),
                _content)


def write_file(target: str | os.PathLike[str], path: str, data: bytes, mode: int | str | None,
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


def raw(verb: str, args: Mapping[str, Any] | None) -> Call[Any]:
    return Call(verb, dict(args or {}), lambda r: r)


def as_bytes(data: bytes | bytearray | memoryview | str) -> bytes:
    return data.encode() if isinstance(data, str) else bytes(data)


def exec_branch_name(commit_id: str) -> str:
    return f"exec-{commit_id[:8]}-{os.urandom(3).hex()}"
