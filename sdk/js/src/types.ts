// The typed results of LayerFS verbs: the JSON objects of docs/protocol.md, field for field
// (ids are 32 lowercase hex digits; times are seconds since the epoch plus nanoseconds).

/** A: added, D: deleted, M: modified, T: type changed, P: permissions (mode) changed. */
export type ChangeKind = "A" | "D" | "M" | "T" | "P";

/** One side of a change: what a path was or became. */
export interface TreeEntry {
  type: string;
  mode: string | number;
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
}

/** A Commit. `changes` is present only from `show`. */
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

/** A path a merge could not reconcile (fields follow the merge section of docs/design.md). */
export type MergeConflict = Record<string, unknown> | string;

/** Uncommitted changes of a Workspace, and merge conflicts if a merge is under way. */
export interface WorkspaceStatus {
  branch: string | null;
  changes: Change[];
  conflicts: MergeConflict[];
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

/** One entry of `listDir`. */
export interface DirEntry {
  name: string;
  type: string;
  mode: string | number;
  size: number;
}

/**
 * A progress event of long work: phases `import`, `export`, `verify`, `gc-mark`, `gc-sweep` (and
 * push, fetch, clone, pull once they exist); at most ten a second, and one with `done` when a
 * phase ends. Every field but `phase` may be absent.
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

/** What `exec` ran. `returncode` is the exit status, or minus the signal number that killed it. */
export interface ExecResult {
  returncode: number;
  signal: string | null;
  branch: string;
  mountpoint: string;
  /** The Commit made with `commit: MESSAGE`. */
  commit: string | null;
  /** Output when `capture` was set. */
  stdout: Buffer | null;
  stderr: Buffer | null;
  /** True when REF was a commit and exec forked it into `branch` first. */
  forked: boolean;
}
