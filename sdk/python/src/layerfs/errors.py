"""Errors raised by the LayerFS SDK: one class per stable error code of docs/protocol.md.

Every failure of a verb arrives as ``{"code", "errno", "message"}``; the SDK raises the class
registered for ``code`` (``LayerFSError`` itself for a code it does not know), so a program can
catch exactly what it handles::

    try:
        store.fork("try", "main")
    except layerfs.Exists:
        ...

``.code`` is the stable name ("ENOENT", "NOT_FAST_FORWARD", ...), ``.errno`` the POSIX number
(0 when there is none) and ``.message`` the one line the CLI prints after ``layerfs: ``.
"""

from __future__ import annotations

import errno as _errno
from typing import Any


class LayerFSError(Exception):
    """Base of every error a verb reports. ``str(e)`` is ``"layerfs: " + message``."""

    code: str
    errno: int
    message: str

    def __init__(self, code: str, errno: int, message: str, result: Any = None) -> None:
        super().__init__(f"layerfs: {message}")
        self.code = code
        self.errno = errno
        self.message = message
        # Some errors carry a result too (CONFLICT lists the conflicts).
        self.result = result

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, errno={self.errno}, message={self.message!r})"


class NotFound(LayerFSError):
    """ENOENT: no such branch, commit, path, remote or mount."""


class Exists(LayerFSError):
    """EEXIST: the branch, remote or directory already exists."""


class Busy(LayerFSError):
    """EBUSY: in use (the branch is mounted, the Store is held by another process)."""


class InvalidArgument(LayerFSError):
    """EINVAL: a bad argument (name, policy, REF syntax, unknown argument, wrong type)."""


class NotADirectory(LayerFSError):
    """ENOTDIR: a path is not a directory."""


class IsADirectory(LayerFSError):
    """EISDIR: a path is a directory."""


class ReadOnly(LayerFSError):
    """EROFS: a read-only mount or view."""


class NoSpace(LayerFSError):
    """ENOSPC: the Store's disk is full."""


class IOFailure(LayerFSError):
    """EIO: damaged data (a hash mismatch, a damaged table) or an I/O error."""


class PermissionDenied(LayerFSError):
    """EACCES: not the Store's owner, or refused by a remote."""


class NotConnected(LayerFSError):
    """ENOTCONN: the verb needs the daemon and was run without one."""


class ConnectionLost(LayerFSError):
    """ECONNRESET: the daemon closed the connection before it answered (the verb may have run)."""


class Stale(LayerFSError):
    """ESTALE: a remote ref moved underneath (compare-and-swap lost)."""


class Unreachable(LayerFSError):
    """ETIMEDOUT, ECONNREFUSED, EHOSTUNREACH: a remote could not be reached."""


class NotFastForward(LayerFSError):
    """NOT_FAST_FORWARD: a push or pull that is not a fast-forward (fetch/merge, or force)."""


class Conflict(LayerFSError):
    """CONFLICT: a merge stopped on conflicts (``.result`` lists them when the daemon sent it)."""


class Diverged(LayerFSError):
    """DIVERGED: a remote's history or id key does not match this Store's."""


class ProtocolError(LayerFSError):
    """PROTOCOL: a version mismatch, or a message that is not a valid request or response."""


class TooLarge(LayerFSError):
    """TOO_LARGE: a message over the protocol's size limit."""


_BY_CODE: dict[str, type[LayerFSError]] = {
    "ENOENT": NotFound,
    "EEXIST": Exists,
    "EBUSY": Busy,
    "EINVAL": InvalidArgument,
    "ENOTDIR": NotADirectory,
    "EISDIR": IsADirectory,
    "EROFS": ReadOnly,
    "ENOSPC": NoSpace,
    "EIO": IOFailure,
    "EACCES": PermissionDenied,
    "EPERM": PermissionDenied,
    "ENOTCONN": NotConnected,
    "ECONNRESET": ConnectionLost,
    "ESTALE": Stale,
    "ETIMEDOUT": Unreachable,
    "ECONNREFUSED": Unreachable,
    "EHOSTUNREACH": Unreachable,
    "NOT_FAST_FORWARD": NotFastForward,
    "CONFLICT": Conflict,
    "DIVERGED": Diverged,
    "PROTOCOL": ProtocolError,
    "TOO_LARGE": TooLarge,
}


def error_class(code: str) -> type[LayerFSError]:
    """The class raised for ``code`` (``LayerFSError`` for a code without its own class)."""
    return _BY_CODE.get(code, LayerFSError)


def make_error(code: str, message: str, errno: int | None = None, result: Any = None) -> LayerFSError:
    """An error of the class for ``code``; ``errno`` defaults to the POSIX number of the name."""
    if errno is None:
        errno = getattr(_errno, code, 0) if code.startswith("E") else 0
    return error_class(code)(code, int(errno), message, result)


def from_wire(error: Any) -> LayerFSError:
    """The error for a response's ``error`` object; a malformed one is a ProtocolError."""
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        return ProtocolError("PROTOCOL", 0, f"malformed error from layerfsd: {error!r}")
    num = error.get("errno")
    return make_error(
        error["code"],
        str(error.get("message", error["code"])),
        num if isinstance(num, int) else None,
        error.get("result"),
    )
