"""The typed results of LayerFS verbs: one dataclass per object of docs/protocol.md.

Every class is built from the protocol's JSON with ``from_json``, which takes the fields it knows
and ignores any others, so a newer daemon that adds fields does not break an older SDK.
Ids are 32 lowercase hex digits; times are seconds since the epoch plus nanoseconds.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, TypeVar

T = TypeVar("T")


def _build(cls: type[T], data: Any) -> T:
    if not isinstance(data, dict):
        from .errors import ProtocolError

        raise ProtocolError("PROTOCOL", 0, f"expected a JSON object for {cls.__name__}, got {data!r}")
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return cls(**{k: v for k, v in data.items() if k in names})


_FIELDS: dict[type, frozenset[str]] = {}


ChangeKind = Literal["A", "D", "M", "T", "P", "R"]
"""A added, D deleted, M modified, T type changed, P permissions (mode) changed, R renamed (only
when renames were asked for)."""


@dataclass(frozen=True)
class TreeEntry:
    """One side of a change: what a path was or became. ``type`` is file, dir, symlink, char,
    block, fifo or socket; ``mode`` the permission bits as four octal digits ("0644"); ``id`` the
    content of a file or directory; ``target`` a symlink's."""

    type: str
    mode: str
    size: int
    id: str | None = None
    target: str | None = None

    @classmethod
    def from_json(cls, data: Any) -> TreeEntry:
        return _build(cls, data)


@dataclass(frozen=True)
class Change:
    """A path that differs between two trees; ``change`` is one of A, D, M, T, P, and R (a
    rename, when asked for with ``renames=True``: ``path`` is the new path)."""

    path: str
    change: str
    before: TreeEntry | None = None
    after: TreeEntry | None = None
    patch: str | None = None
    """Git's unified diff of the change, when asked for (``diff(..., patch=True)``)."""
    from_path: str | None = None
    """R: the path the file was moved from."""
    similarity: int | None = None
    """R: percent of the content the two have in common (100: the same)."""

    @classmethod
    def from_json(cls, data: Any) -> Change:
        c = _build(cls, data)
        before = TreeEntry.from_json(c.before) if isinstance(c.before, dict) else None
        after = TreeEntry.from_json(c.after) if isinstance(c.after, dict) else None
        return dataclasses.replace(c, before=before, after=after)


@dataclass(frozen=True)
class Commit:
    """A Commit: its id, parents (first parent first), root tree, message and time."""

    id: str
    parents: list[str] = field(default_factory=list)
    message: str = ""
    time: int = 0
    time_nsec: int = 0
    root: str | None = None
    logical_bytes: int | None = None
    files: int | None = None
    """Entries in the Commit's tree, of every type (directories count); ``logical_bytes`` sums
    the file sizes."""
    changes: list[Change] | None = None
    """From ``show``, and ``log`` with ``changes`` or ``patch``: what this Commit changed against
    its first parent."""

    @property
    def datetime(self) -> _dt.datetime:
        """The Commit's time as an aware UTC datetime."""
        return _dt.datetime.fromtimestamp(self.time + self.time_nsec / 1e9, _dt.timezone.utc)

    @classmethod
    def from_json(cls, data: Any) -> Commit:
        c = _build(cls, data)
        if c.changes is not None:
            c = dataclasses.replace(c, changes=[Change.from_json(x) for x in c.changes])
        return c


@dataclass(frozen=True)
class Branch:
    """A Branch: its name, head Commit, and where it is mounted (None when it is not)."""

    name: str
    commit: str
    mountpoint: str | None = None

    @classmethod
    def from_json(cls, data: Any) -> Branch:
        if isinstance(data, dict) and "name" not in data and "branch" in data:
            data = {**data, "name": data["branch"]}  # fork's {"branch", "commit"}
        return _build(cls, data)


@dataclass(frozen=True)
class Mount:
    """A live mount of the daemon: a branch (writable) or a commit (read-only)."""

    mountpoint: str
    commit: str
    """The Commit it shows (for a branch: its Workspace's base)."""
    branch: str | None = None
    """Only for a writable mount of a branch."""
    read_only: bool = False
    transport: str | None = None
    ref: str | None = None
    """REF as the mount asked for it."""

    @classmethod
    def from_json(cls, data: Any) -> Mount:
        return _build(cls, data)


@dataclass(frozen=True)
class MergeConflict:
    """A path a merge could not reconcile. ``kind`` names the conflict (content, add/add,
    modify/delete, ...: docs/design.md, "Merge"); ``base``, ``ours`` and ``theirs`` are each side's
    content id (a symlink's target), None where that side has no such path; ``sides`` are the
    files written beside it for the sides that could not stay at ``path``."""

    path: str
    kind: str
    base: str | None = None
    ours: str | None = None
    theirs: str | None = None
    sides: list[str] = field(default_factory=list)
    resolved: bool | None = None
    """Only from ``status`` while a merge is under way: whether the path has been resolved."""

    @classmethod
    def from_json(cls, data: Any) -> MergeConflict:
        return _build(cls, data)


@dataclass(frozen=True)
class MergeState:
    """A merge stopped on conflicts and under way in a Workspace (``status``)."""

    source: str
    """What was merged, as it was named."""
    theirs: str
    """Its Commit."""
    unresolved: int
    """How many conflicts are still open."""

    @classmethod
    def from_json(cls, data: Any) -> MergeState:
        return _build(cls, data)


@dataclass(frozen=True)
class WorkspaceStatus:
    """Uncommitted changes of a branch's Workspace; while a merge stopped on conflicts is under
    way, ``merging`` describes it and ``conflicts`` lists them (each with ``resolved``)."""

    branch: str
    changes: list[Change] = field(default_factory=list)
    conflicts: list[MergeConflict] = field(default_factory=list)
    merging: MergeState | None = None

    @classmethod
    def from_json(cls, data: Any) -> WorkspaceStatus:
        s = _build(cls, data)
        return dataclasses.replace(
            s,
            changes=[Change.from_json(x) for x in (s.changes or [])],
            conflicts=[MergeConflict.from_json(x) for x in (s.conflicts or [])],
            merging=MergeState.from_json(s.merging) if s.merging is not None else None,
        )


@dataclass(frozen=True)
class MergeResult:
    """What a merge, cherry-pick or revert did (or, with ``--abort``, undid).

    ``commit`` is the new head (None when the merge stopped or had conflicts); ``fast_forward``
    and ``up_to_date`` say how it got there; ``base`` is the merge base (``bases`` all of them),
    ``ours`` and ``theirs`` the two sides; ``stopped`` is True when it stopped in a mounted
    Workspace for the conflicts to be resolved there (then ``merge_continue`` or ``merge_abort``).
    A merge with conflicts raises ``Conflict`` carrying this as ``.result``.
    """

    op: str
    """"merge", "cherry-pick" or "revert"."""
    branch: str
    commit: str | None = None
    fast_forward: bool = False
    up_to_date: bool = False
    base: str | None = None
    bases: list[str] = field(default_factory=list)
    ours: str | None = None
    theirs: str | None = None
    stopped: bool = False
    conflicts: list[MergeConflict] = field(default_factory=list)
    mountpoint: str | None = None
    """Where the branch is mounted, when the merge went through its mount."""
    aborted: bool = False
    """True for the result of an abort (which has only ``op`` and ``branch`` besides)."""

    @classmethod
    def from_json(cls, data: Any) -> MergeResult:
        r = _build(cls, data)
        return dataclasses.replace(r, conflicts=[MergeConflict.from_json(x) for x in (r.conflicts or [])])


@dataclass(frozen=True)
class CommitResult:
    """What ``commit`` made: the new Commit's id, its branch and parents."""

    commit: str
    branch: str | None = None
    parents: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: Any) -> CommitResult:
        return _build(cls, data)


@dataclass(frozen=True)
class ResetResult:
    """The branch ``reset`` worked on and the Commit it now points at."""

    branch: str
    commit: str

    @classmethod
    def from_json(cls, data: Any) -> ResetResult:
        return _build(cls, data)


@dataclass(frozen=True)
class ExportResult:
    """What ``export`` wrote."""

    commit: str
    dir: str
    files: int = 0
    bytes: int = 0

    @classmethod
    def from_json(cls, data: Any) -> ExportResult:
        return _build(cls, data)


@dataclass(frozen=True)
class ImportResult:
    """What ``import_dir`` committed and what it cost."""

    commit: str
    files: int = 0
    dirs: int = 0
    hashed: int = 0
    stat_hits: int = 0
    objects_added: int = 0
    bytes_added: int = 0

    @classmethod
    def from_json(cls, data: Any) -> ImportResult:
        return _build(cls, data)


@dataclass(frozen=True)
class VerifyResult:
    """What ``verify`` read back; ``ok`` is False when ``problems`` lists damaged objects."""

    ok: bool
    commits: int = 0
    objects: int = 0
    bytes: int = 0
    problems: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: Any) -> VerifyResult:
        return _build(cls, data)


@dataclass(frozen=True)
class GcResult:
    """What ``gc`` freed."""

    objects_deleted: int = 0
    bytes_before: int = 0
    bytes_after: int = 0

    @classmethod
    def from_json(cls, data: Any) -> GcResult:
        return _build(cls, data)


@dataclass(frozen=True)
class DirEntry:
    """One entry of ``list_dir``: ``type`` is file, dir, symlink, char, block, fifo or socket;
    ``mode`` the permission bits as four octal digits ("0644"); ``target`` a symlink's."""

    name: str
    type: str
    mode: str
    size: int = 0
    target: str | None = None

    @classmethod
    def from_json(cls, data: Any) -> DirEntry:
        return _build(cls, data)


@dataclass(frozen=True)
class Progress:
    """A progress event of long work (import, export, verify, gc, push, fetch, pull, clone): at
    most ten a second, and one with ``done`` when a phase ends.

    Every field but ``phase`` may be None: totals are not always known.
    """

    phase: str
    """import, export, verify, gc-mark, gc-sweep, or a transfer's (push, fetch, clone, pull)."""
    objects: int | None = None
    objects_total: int | None = None
    bytes: int | None = None
    bytes_total: int | None = None
    rate: float | None = None
    """Bytes a second since the phase began."""
    done: bool | None = None
    """True on the one event sent when the phase ends."""

    @classmethod
    def from_json(cls, data: Any) -> Progress:
        return _build(cls, data)


@dataclass(frozen=True)
class ExecResult:
    """What ``exec`` ran, with the fields ``layerfs exec --json`` prints, and the command's output
    when it was captured."""

    exit_code: int
    """The command's exit status; 128 + N when signal N killed it (as a shell reports it)."""
    signal: str | None
    """The name of the signal that killed the command ("KILL"), or None."""
    branch: str
    mountpoint: str
    mounted: bool
    """True when exec mounted the branch for the run (and unmounted it after)."""
    forked: bool
    """True when REF was a commit and exec forked it into ``branch`` first."""
    isolated: bool
    """True when the command ran in the bubblewrap sandbox."""
    commit: str | None = None
    """The Commit made of what the command left (with ``commit=``)."""
    stdout: bytes | None = None
    stderr: bytes | None = None


class Stats(TypedDict, total=False):
    """``stats``: the Store's allocated bytes and objects, as ``layerfs stats --json`` prints them."""

    allocated_bytes: int
    payload_bytes: int
    metadata_bytes: int
    other_bytes: int
    logical_bytes: int
    commits: int
    branches: int
    policy: str
    objects: dict[str, int]
    max_chain_depth: dict[str, int]
    depth_histogram: dict[str, dict[str, int]]
    cf_bytes: dict[str, int]
