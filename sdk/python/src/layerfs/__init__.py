"""LayerFS SDK for Python: drive a LayerFS Store from code, as an agent's shell would.

    from layerfs import Store
    store = Store.open("/data/store")            # starts layerfsd when none runs
    store.fork("try", "main")
    store.mount("try", "/tmp/try")
    cid = store.commit("/tmp/try", "an attempt")

``Store`` is synchronous and thread-safe; ``AsyncStore`` (``layerfs.aio``) has the same verbs as
coroutines. Results are dataclasses (``layerfs.types``); failures raise a ``LayerFSError``
subclass per error code (``layerfs.errors``). The wire protocol is docs/protocol.md, version 1.
"""

from ._core import PROTOCOL_VERSION
from .aio import AsyncStore
from .client import Store
from .errors import (
    Busy,
    Conflict,
    ConnectionLost,
    Diverged,
    Exists,
    InvalidArgument,
    IOFailure,
    IsADirectory,
    LayerFSError,
    NoSpace,
    NotADirectory,
    NotConnected,
    NotFastForward,
    NotFound,
    PermissionDenied,
    ProtocolError,
    ReadOnly,
    Stale,
    TooLarge,
    Unreachable,
)
from .types import (
    Branch,
    Change,
    Commit,
    CommitResult,
    DirEntry,
    ExecResult,
    ExportResult,
    GcResult,
    ImportResult,
    MergeConflict,
    MergeResult,
    MergeState,
    Mount,
    Progress,
    ResetResult,
    Stats,
    TreeEntry,
    VerifyResult,
    WorkspaceStatus,
)

__version__ = "0.1.0"

__all__ = [
    "PROTOCOL_VERSION", "Store", "AsyncStore",
    "LayerFSError", "NotFound", "Exists", "Busy", "InvalidArgument", "NotADirectory", "IsADirectory",
    "ReadOnly", "NoSpace", "IOFailure", "PermissionDenied", "NotConnected", "ConnectionLost", "Stale",
    "Unreachable", "NotFastForward", "Conflict", "Diverged", "ProtocolError", "TooLarge",
    "Branch", "Change", "Commit", "CommitResult", "DirEntry", "ExecResult", "ExportResult", "GcResult",
    "ImportResult", "MergeConflict", "MergeResult", "MergeState", "Mount", "Progress", "ResetResult", "Stats", "TreeEntry", "VerifyResult",
    "WorkspaceStatus",
]
