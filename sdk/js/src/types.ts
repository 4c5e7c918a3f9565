// The typed results of LayerFS verbs: the JSON objects of docs/protocol.md, field for field
// (ids are 32 lowercase hex digits; times are seconds since the epoch plus nanoseconds).

/** A added, D deleted, M modified, T type changed, P mode changed, R renamed (when asked for). */
export type ChangeKind = "A" | "D" | "M" | "T" | "P" | "R";

/**
 * One side of a change: what a path was or became. `type` is file, dir, symlink, char, block,
 * fifo or socket; `mode` the permission bits as four octal digits ("0644").
 */
export interface TreeEntry {
  type: string;
  mode: string;
  size: number;
  id?: string;
  target?: string;
}

/** A path that differs between two trees. */
export interface Change {
  path: string;
  change: ChangeKind;
  before?: TreeEntry;
  after?: TreeEntry;
  /** Git's unified diff of the change, when asked for (`diff(a, b, { patch: true })`). */
  patch?: string;
  /** R: the path the file was moved from (`path` is the new one). */
  from_path?: string;
  /** R: percent of the content the two have in common (100: the same). */
  similarity?: number;
}

/** A Commit. `changes` is present from `show`, and from `log` with `changes` or `patch`. */
export interface Commit {
  id: string;
  parents: string[];
  root?: string;
  message: string;
  time: number;
  time_nsec?: number;
  /** The sum of its files' sizes. */
  logical_bytes?: number;
  /** Entries in its tree, directories included. */
  files?: number;
  changes?: Change[];
}

/** A Branch: its head Commit and its mountpoint when mounted. */
export interface Branch {
  name: string;
  commit: string;
  mountpoint?: string;
}

/** A live mount: a branch (writable) or a commit (read-only). */
export interface Mount {
  mountpoint: string;
  /** REF as the mount asked for it. */
  ref?: string;
  /** Only for a writable mount of a branch. */
  branch?: string;
  /** The Commit it shows (for a branch: its Workspace's base). */
  commit: string;
  read_only: boolean;
  transport?: string;
}

/**
 * A path a merge could not reconcile. `kind` names the conflict (content, add/add,
 * modify/delete, ...: docs/design.md, "Merge"); `base`, `ours` and `theirs` are each side's
 * content id (a symlink's target), null where that side has no such path; `sides` the files
 * written beside it for the sides that could not stay at `path`.
 */
export interface MergeConflict {
  path: string;
  kind: string;
  base: string | null;
  ours: string | null;
  theirs: string | null;
  sides: string[];
  /** Only from `status` while a merge is under way: whether the path has been resolved. */
  resolved?: boolean;
}

/** A merge stopped on conflicts and under way in a Workspace (`status`). */
export interface MergeState {
  /** What was merged, as it was named. */
  source: string;
  /** Its Commit. */
  theirs: string;
  /** How many conflicts are still open. */
  unresolved: number;
}

/**
 * Uncommitted changes of a Workspace; while a merge stopped on conflicts is under way, `merging`
 * describes it and `conflicts` lists them (each with `resolved`).
 */
export interface WorkspaceStatus {
  branch: string;
  changes: Change[];
  conflicts: MergeConflict[];
  merging?: MergeState;
}

/**
 * What a merge, cherry-pick or revert did (or, with abort, undid). `commit` is the new head (null
 * when it stopped or had conflicts); `stopped` is true when it stopped in a mounted Workspace for
 * the conflicts to be resolved there. A merge with conflicts rejects with Conflict carrying this
 * as `.result`. The result of an abort has only `op`, `branch` and `aborted`.
 */
export interface MergeResult {
  /** "merge", "cherry-pick" or "revert". */
  op: string;
  branch: string;
  /** Where the branch is mounted, when the merge went through its mount. */
  mountpoint?: string;
  commit?: string | null;
  fast_forward?: boolean;
  up_to_date?: boolean;
  /** The merge base (null when there is none); `bases` all of them. */
  base?: string | null;
  bases?: string[];
  ours?: string;
  theirs?: string;
  stopped?: boolean;
  conflicts?: MergeConflict[];
  aborted?: boolean;
}

/** What `commit` made. */
export interface CommitResult {
  commit: string;
  branch?: string;
  parents: string[];
}

/** The branch `reset` worked on and the Commit it now points at. */
export interface ResetResult {
  branch: string;
  commit: string;
}

/** What `export` wrote. */
export interface ExportResult {
  commit: string;
  dir: string;
  files: number;
  bytes: number;
}

/** What `importDir` committed and what it cost. */
export interface ImportResult {
  commit: string;
  files: number;
  dirs: number;
  hashed: number;
  stat_hits: number;
  objects_added: number;
  bytes_added: number;
}

/** What `verify` read back; `ok` is false when `problems` lists damaged objects. */
export interface VerifyResult {
  ok: boolean;
  commits: number;
  objects: number;
  bytes: number;
  problems: string[];
}

/** What `gc` freed. */
export interface GcResult {
  objects_deleted: number;
  bytes_before: number;
  bytes_after: number;
}

/** One entry of `listDir`: `mode` as four octal digits; `target` a symlink's. */
export interface DirEntry {
  name: string;
  type: string;
  mode: string;
  size: number;
  target?: string;
}

/**
 * A progress event of long work (import, export, verify, gc, push, fetch, pull, clone): at most
 * ten a second, and one with `done` when a phase ends. Every field but `phase` may be absent.
 */
export interface Progress {
  phase: string;
  objects?: number;
  objects_total?: number;
  bytes?: number;
  bytes_total?: number;
  /** Bytes a second since the phase began. */
  rate?: number;
  done?: boolean;
}

/** `stats`: the Store's allocated bytes and objects, as `layerfs stats --json` prints them. */
export interface Stats {
  allocated_bytes: number;
  payload_bytes: number;
  metadata_bytes: number;
  other_bytes: number;
  logical_bytes: number;
  commits: number;
  branches: number;
  policy: string;
  objects: Record<string, number>;
  max_chain_depth: Record<string, number>;
  depth_histogram: Record<string, Record<string, number>>;
  cf_bytes: Record<string, number>;
}

export type ProgressCallback = (p: Progress) => void;

/** What `exec` ran, with the fields `layerfs exec --json` prints, and the output when captured. */
export interface ExecResult {
  /** The command's exit status; 128 + N when signal N killed it (as a shell reports it). */
  exit_code: number;
  /** The name of the signal that killed the command ("KILL"), or null. */
  signal: string | null;
  branch: string;
  mountpoint: string;
  /** True when exec mounted the branch for the run (and unmounted it after). */
  mounted: boolean;
  /** True when REF was a commit and exec forked it into `branch` first. */
  forked: boolean;
  /** True when the command ran in the bubblewrap sandbox. */
  isolated: boolean;
  /** The Commit made of what the command left (with `commit`). */
  commit: string | null;
  /** Output when `capture` was set. */
  stdout: Buffer | null;
  stderr: Buffer | null;
}
