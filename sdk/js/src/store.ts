// Store: a LayerFS Store driven through its daemon, with the CLI's verbs as methods returning
// promises. Concurrent calls each use their own connection from a small pool (the daemon serves
// each connection on its own thread), so Promise.all over verbs runs them at once. Idle
// connections do not keep Node's event loop alive; close() ends them.

import { spawn } from "node:child_process";
import { accessSync, constants as fsConstants, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync,
  readlinkSync, realpathSync, rmdirSync } from "node:fs";
import { constants as osConstants, tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { Conn, runClone, runInit, startDaemon, storeRoot } from "./connection.js";
import { LayerFSError, makeError } from "./errors.js";
import type {
  Branch, Change, Commit, CommitResult, DirEntry, ExecResult, ExportResult, GcResult, ImportResult, MergeResult,
  Mount, ProgressCallback, ResetResult, Stats, VerifyResult, WorkspaceStatus,
} from "./types.js";

/** File content moves in pieces of this many bytes (base64 makes a piece ~22 MiB on the wire). */
export const CHUNK = 16 * 1024 * 1024;
const DEFAULT_IDLE = 60;

export interface OpenOptions {
  /** Seconds a daemon started by the SDK stays up with no mount and no connection (default 60). */
  idle?: number;
  /** Receives the progress events of every verb that does not pass its own callback. */
  progress?: ProgressCallback;
  /** Start layerfsd when none listens (default true); false: reject with NotConnected. */
  autostart?: boolean;
}

export interface InitOptions extends OpenOptions {
  /** Delta-chain caps W/C/M, such as "16/8/8". */
  policy?: string;
  /** A directory whose tree becomes the first Commit. */
  fromDir?: string;
  /** The first Commit's message. */
  message?: string;
}

export interface MountOptions {
  readOnly?: boolean;
  allowOther?: boolean;
  singleThreaded?: boolean;
  threads?: boolean;
  noFollowCpu?: boolean;
}

export interface CallOptions {
  progress?: ProgressCallback;
}

export interface MergeOptions {
  /** Branch or mountpoint to merge into (default: the mount holding the working directory). */
  into?: string;
  /** Message of the merge Commit (merge only; default "merge SOURCE"). */
  message?: string;
  /** Refuse anything but a fast-forward (NotFastForward). */
  ffOnly?: boolean;
  /** Make a merge Commit even when a fast-forward is possible. */
  noFf?: boolean;
  /** "ours" or "theirs": that side's whole tree is the merge's. */
  strategy?: string;
  /** "ours" or "theirs": each conflict takes that side. */
  strategyOption?: string;
}

export interface PickOptions {
  /** Branch or mountpoint (default: the mount holding the working directory). */
  into?: string;
  /** "ours" or "theirs": each conflict takes that side. */
  strategyOption?: string;
}

export interface MergeStepOptions {
  /** Branch or mountpoint where the merge stopped (default: the mount holding the working directory). */
  into?: string;
  /** Message of the merge Commit (continue of a merge only). */
  message?: string;
  /** The operation that stopped: "merge" (default), "cherry-pick" or "revert". */
  op?: "merge" | "cherry-pick" | "revert";
}

const MERGE_VERBS: Record<string, string> = { merge: "merge", "cherry-pick": "cherry_pick", revert: "revert" };

/** `writeFile`'s mode as the protocol takes it: octal digits in a string ("0755"). */
function modeString(mode: number | string | undefined): string | undefined {
  if (mode === undefined || typeof mode === "string") return mode;
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777) {
    throw makeError("EINVAL", `writeFile: mode ${mode} is not permission bits (0 to 0o7777)`);
  }
  return mode.toString(8).padStart(4, "0");
}

export interface ExecOptions {
  /**
   * Commit what the command left, whatever its exit status: true with the message
   * "exec: COMMAND", or a string as the message.
   */
  commit?: boolean | string;
  /**
   * Run the command in the same bubblewrap sandbox as `layerfs exec --isolate`: the Workspace
   * writable at /workspace, the host's system read-only (docs/design.md, "Agent interface").
   */
  isolate?: boolean;
  /** With `isolate`: no network but a private loopback. */
  noNetwork?: boolean;
  /** Where to mount the branch when it is not mounted (default: a fresh temporary directory). */
  mountpoint?: string;
  /** Capture stdout and stderr into the result instead of passing them through. */
  capture?: boolean;
  /** Bytes fed to the command's stdin (otherwise stdin passes through). */
  input?: string | Uint8Array;
  env?: NodeJS.ProcessEnv;
  /** Milliseconds before the command is killed (SIGKILL); the result then shows the signal. */
  timeout?: number;
}

type Args = Record<string, unknown>;

function args(o: Record<string, unknown>): Args {
  const out: Args = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== null && v !== false) out[k] = v;
  return out;
}

function nonEmpty(xs?: string[]): string[] | undefined {
  return xs && xs.length ? xs : undefined;
}

/** A piece of content and the whole file's size (-1 when the daemon did not say). */
function content(r: unknown): [Buffer, number] {
  const o = r as { content_base64?: unknown; size?: unknown } | null;
  if (typeof o?.content_base64 !== "string") throw makeError("PROTOCOL", "layerfsd sent no content_base64");
  return [Buffer.from(o.content_base64, "base64"), typeof o.size === "number" ? o.size : -1];
}

/**
 * Reads in pieces of at most CHUNK bytes until a short piece, the length asked for, or the end of
 * the file (the whole file's size comes with every piece).
 */
async function pieces(read: (offset: number, length: number) => Promise<unknown>, offset: number,
                      length: number | undefined): Promise<Buffer> {
  const parts: Buffer[] = [];
  let got = 0;
  for (;;) {
    const want = length === undefined ? CHUNK : Math.min(CHUNK, length - got);
    const [piece, size] = content(await read(offset + got, want));
    parts.push(piece);
    got += piece.length;
    if (piece.length < want || (length !== undefined && got >= length) || (size >= 0 && offset + got >= size)) {
      return Buffer.concat(parts);
    }
  }
}

/** A LayerFS Store. `await Store.open(path)` connects, starting layerfsd when none runs. */
export class Store {
  /** The Store's absolute path. */
  readonly path: string;
  readonly idle: number;
  progress?: ProgressCallback;
  readonly autostart: boolean;
  private readonly sockPath: string;
  private pool: Conn[] = [];
  private closed = false;

  private constructor(path: string, opts: OpenOptions) {
    this.path = path;
    this.idle = opts.idle ?? DEFAULT_IDLE;
    this.progress = opts.progress;
    this.autostart = opts.autostart ?? true;
    this.sockPath = join(path, "control.sock");
  }

  /**
   * Opens the Store at `path`: connects to its daemon, starting `layerfsd --idle IDLE` when none
   * listens. Rejects with NotFound when there is no Store there.
   */
  static async open(path: string, opts: OpenOptions = {}): Promise<Store> {
    const s = new Store(storeRoot(path), opts);
    s.pool.push(await s.connect());
    return s;
  }

  /**
   * Creates a Store at `path` (`layerfs init --json`: branch main, optionally a first Commit of
   * `fromDir`), then opens it. `layerfs` is $LAYERFS, else the first on PATH. Rejects by code:
   * Exists (a non-empty directory is there), InvalidArgument (a bad policy), NotFound (no parent
   * directory, no `fromDir`).
   */
  static async init(path: string, opts: InitOptions = {}): Promise<Store> {
    await runInit(resolve(path), { policy: opts.policy,
      fromDir: opts.fromDir !== undefined ? resolve(opts.fromDir) : undefined, message: opts.message });
    return Store.open(path, opts);
  }

  /** Makes a Store at `path` from the remote at `url` (`layerfs clone`; `lazy`: refs and indexes
   * only, objects fetched on first read), then opens it. */
  static async clone(url: string, path: string, opts: OpenOptions & { lazy?: boolean } = {}): Promise<Store> {
    await runClone(url, resolve(path), opts.lazy === true);
    return Store.open(path, opts);
  }

  /** Closes the connections; the Store cannot be used afterwards. */
  close(): void {
    this.closed = true;
    for (const c of this.pool) c.close();
    this.pool = [];
  }

  private async connect(): Promise<Conn> {
    try {
      return await Conn.connect(this.sockPath);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== "ENOENT" && code !== "ECONNREFUSED") throw makeError(code ?? "EIO", String((e as Error).message));
      if (!this.autostart) throw makeError("ENOTCONN", `no layerfsd serves ${this.path}`);
    }
    await startDaemon(this.path, this.idle, async () => {
      try {
        (await Conn.connect(this.sockPath)).close();
        return true;
      } catch {
        return false;
      }
    });
    try {
      return await Conn.connect(this.sockPath);
    } catch (e) {
      throw makeError("ENOTCONN", `layerfsd for ${this.path} does not answer: ${(e as Error).message}`);
    }
  }

  private async take(): Promise<Conn> {
    if (this.closed) throw makeError("ENOTCONN", `Store ${this.path} is closed`);
    while (this.pool.length) {
      const c = this.pool.pop()!;
      if (!c.dead) return c;
    }
    return this.connect();
  }

  private put(c: Conn): void {
    if (this.closed || c.dead) c.close();
    else this.pool.push(c);
  }

  /**
   * Sends any verb of the protocol with `args` by the protocol's names and resolves with its raw
   * JSON result (for verbs or arguments newer than this SDK's methods).
   */
  async request(verb: string, a: Args = {}, opts: CallOptions = {}): Promise<unknown> {
    let cwd: string | undefined;
    try {
      cwd = process.cwd();
    } catch {
      cwd = undefined;
    }
    for (let attempt = 0; ; attempt++) {
      const c = await this.take();
      const wasUsed = c.used;
      try {
        const r = await c.request(verb, a, cwd, opts.progress ?? this.progress);
        this.put(c);
        return r;
      } catch (e) {
        this.put(c);
        // The daemon left while the connection was idle and never saw the request: retry once.
        if (attempt === 0 && wasUsed && (e as { neverSent?: boolean }).neverSent) continue;
        throw e;
      }
    }
  }

  private call<T>(verb: string, a: Args, opts: CallOptions = {}): Promise<T> {
    return this.request(verb, a, opts) as Promise<T>;
  }

  // -- branches and history ----------------------------------------------------------------------

  /** Every branch with its head Commit and its mountpoint when mounted (`layerfs branch`). */
  branches(): Promise<Branch[]> {
    return this.call("branches", {});
  }

  /**
   * Creates branch `name` at `at` (a branch, commit id, unique prefix or REF~N), O(1).
   * Rejects with Exists when the name is taken, NotFound when `at` names nothing.
   */
  async fork(name: string, at = "main"): Promise<Branch> {
    const r = await this.call<{ branch: string; commit: string }>("fork", { name, from: at });
    return { name: r.branch, commit: r.commit };
  }

  /** Deletes branch `name` (`layerfs branch -d`); Busy while it is mounted. */
  async branchDelete(name: string): Promise<void> {
    await this.call("branch_delete", { name });
  }

  /** Commits newest first along first parents from `ref` (default main); with `graph`, every
   * Commit reachable through all parents, children before their parents (`layerfs log --graph`);
   * with `all`, from every branch and remote-tracking ref as well, through all parents (`git log
   * --all`); with `paths` (tree paths), only the Commits that changed one of them; with
   * `changes`, each Commit's `changes` against its first parent (a root Commit's: its tree,
   * added); with `patch`, those with their Git unified diffs, as `show`; `renames` as in
   * `diff`; `grep` keeps the Commits whose message matches an extended regular expression
   * (`ignoreCase`), `since` and `until` those made in that span ("2026-12-01", "2026-12-01
   * 12:00", "@SECONDS", "3 hours ago"), and `maxCount` counts what they keep; with `reverse`,
   * oldest first (after `maxCount` chose the newest). */
  log(ref = "main", opts: { maxCount?: number; graph?: boolean; all?: boolean; paths?: string[]; changes?: boolean;
                            patch?: boolean; reverse?: boolean; renames?: boolean; grep?: string; ignoreCase?: boolean;
                            since?: string; until?: string } = {}): Promise<Commit[]> {
    return this.call("log", args({ ref, max_count: opts.maxCount, graph: opts.graph, all: opts.all,
      paths: nonEmpty(opts.paths), changes: opts.changes, patch: opts.patch, reverse: opts.reverse,
      renames: opts.renames, grep: opts.grep, ignore_case: opts.ignoreCase, since: opts.since, until: opts.until }));
  }

  /** The Commit id `ref` names (a branch, REMOTE/BRANCH, an id prefix, REF~N, REF^N), as
   * `git rev-parse`; rejects with NotFound when it names nothing. */
  async revParse(ref: string): Promise<string> {
    return (await this.call<{ commit: string }>("rev_parse", { ref })).commit;
  }

  /** A Commit with `changes`: the paths it changed against its first parent (a root Commit:
   * its whole tree, added); `renames` as in `diff`. */
  show(commit: string, opts: { patch?: boolean; paths?: string[]; renames?: boolean } = {}): Promise<Commit> {
    return this.call("show", args({ commit, patch: opts.patch, paths: nonEmpty(opts.paths), renames: opts.renames }));
  }

  /** Paths added, deleted, modified, type- or mode-changed from `a` to `b` (or `a` as "A...B";
   * without `b`, to HEAD's working tree, uncommitted changes included, as `git diff A`);
   * with `patch`, each with its Git unified diff; with `paths`, only the changes at or below them.
   * With `renames` (Git's `-M`), a file moved, the same or at least half similar, is one change
   * `R` at its new path with `from_path` and `similarity`, instead of a `D` and an `A`. */
  diff(a: string, b?: string, opts: { patch?: boolean; paths?: string[]; renames?: boolean } = {}): Promise<Change[]> {
    return this.call("diff", args({ a, b, patch: opts.patch, paths: nonEmpty(opts.paths), renames: opts.renames }));
  }

  /**
   * The content of `path` in `commit` (a symlink's target for a symlink): `length` bytes from
   * `offset` (default: to the end; a large file comes in pieces).
   */
  cat(commit: string, path: string, opts: { offset?: number; length?: number } = {}): Promise<Buffer> {
    return pieces((offset, length) => this.call("cat", args({ commit, path, offset: offset || undefined, length })),
      opts.offset ?? 0, opts.length);
  }

  /** Writes `commit`'s tree into `dir` (absent or empty). */
  export(commit: string, dir: string, opts: CallOptions = {}): Promise<ExportResult> {
    return this.call("export", { commit, dir: resolve(dir) }, opts);
  }

  /**
   * Commits the tree of `dir` as the next Commit of `branch` (default main) (`layerfs import`);
   * `jobs` files are read and encoded at once (default one per core).
   */
  importDir(dir: string, opts: { branch?: string; message?: string; jobs?: number } & CallOptions = {}): Promise<ImportResult> {
    return this.call("import", args({ dir: resolve(dir), branch: opts.branch, message: opts.message, jobs: opts.jobs }), opts);
  }

  // -- mounts and Workspaces ---------------------------------------------------------------------

  /**
   * Mounts branch `ref` writable (a commit read-only) at `mountpoint`; resolves once mounted.
   * Busy when the branch is mounted already. `allowOther` lets other users see it;
   * `singleThreaded` / `threads` / `noFollowCpu` choose how the daemon serves it, as the CLI's
   * flags of those names do.
   */
  mount(ref: string, mountpoint: string, opts: MountOptions = {}): Promise<Mount> {
    return this.call("mount", args({ ref, mountpoint: resolve(mountpoint), read_only: opts.readOnly,
      allow_other: opts.allowOther, single_threaded: opts.singleThreaded, threads: opts.threads,
      no_follow_cpu: opts.noFollowCpu }));
  }

  /** Flushes and unmounts `mountpoint` (what was written stays in the Workspace, uncommitted). */
  async umount(mountpoint: string): Promise<void> {
    await this.call("umount", { mountpoint: resolve(mountpoint) });
  }

  /** The daemon's live mounts. */
  mounts(): Promise<Mount[]> {
    return this.call("mounts", {});
  }

  /**
   * Commits what was written to `target` (a mountpoint or a branch, mounted or not) and resolves
   * with the new Commit's id. Data still in the page cache and in mmaps is included. With
   * `amend`, the new Commit replaces the head (Git's `commit --amend`): the head's parents, its
   * tree with what was written since.
   */
  async commit(target: string | null, message: string, opts: { amend?: boolean } = {}): Promise<string> {
    return (await this.call<CommitResult>("commit", args({ target, message, amend: opts.amend }))).commit;
  }

  /** Uncommitted changes of `target`'s Workspace (a mountpoint or a branch); `renames` as in `diff`. */
  status(target?: string, opts: { patch?: boolean; paths?: string[]; renames?: boolean } = {}): Promise<WorkspaceStatus> {
    return this.call("status", args({ target, patch: opts.patch, paths: nonEmpty(opts.paths), renames: opts.renames }));
  }

  /** Discards `target`'s uncommitted changes; with `hard: REF` also moves the branch to REF. */
  reset(target?: string, opts: { hard?: string } = {}): Promise<ResetResult> {
    return this.call("reset", args({ target, hard: opts.hard }));
  }

  /**
   * Brings `paths` (files or directories) of `target`'s Workspace back as `source` (default: its
   * head Commit) has them, as `git restore`: changed and removed files come back; files `source`
   * does not have stay. Resolves with what was restored.
   */
  async restore(target: string | null, paths: string[], opts: { source?: string } = {}): Promise<Change[]> {
    const r = await this.call<{ restored: Change[] }>("restore", args({ target, paths, source: opts.source }));
    return r.restored;
  }

  // -- whole Store -------------------------------------------------------------------------------

  /** Allocated bytes (payload / metadata / other), objects, chain depths (`stats --json`). */
  stats(): Promise<Stats> {
    return this.call("stats", {});
  }

  /** Reads back everything reachable from `commits` (default all); damage is in the result. */
  verify(commits?: string[], opts: CallOptions & { fetch?: boolean } = {}): Promise<VerifyResult> {
    return this.call("verify", args({ commits: commits && commits.length ? commits : undefined, fetch: opts.fetch }),
      opts);
  }

  /** Frees what no branch reaches any more. */
  gc(opts: CallOptions = {}): Promise<GcResult> {
    return this.call("gc", {}, opts);
  }

  // -- remotes (results are the protocol's objects, docs/protocol.md) -----------------------------

  /** The remotes: `name`, `url`, `lazy`, `branches` (remote-tracking refs). */
  remoteList(): Promise<Record<string, unknown>[]> {
    return this.call("remote_list", {});
  }

  /** Adds remote `name` at `url` (`layerfs remote add`). */
  remoteAdd(name: string, url: string, opts: { lazy?: boolean } = {}): Promise<Record<string, unknown>> {
    return this.call("remote_add", args({ name, url, lazy: opts.lazy }));
  }

  /** Removes remote `name` and its remote-tracking refs. */
  remoteRemove(name: string): Promise<Record<string, unknown>> {
    return this.call("remote_remove", { name });
  }

  /** Pushes `branches` (default main) to `remote` (default: origin, else the only remote); a
   * refused branch rejects with NotFastForward (or Stale when another pusher won the race). */
  push(remote?: string, branches?: string[], opts: CallOptions & { force?: boolean } = {}):
      Promise<Record<string, unknown>> {
    return this.call("push", args({ remote, branches: branches && branches.length ? branches : undefined,
      force: opts.force }), opts);
  }

  /** Fetches `remote`'s branches (default as push's) into its remote-tracking refs. */
  fetch(remote?: string, opts: CallOptions = {}): Promise<Record<string, unknown>> {
    return this.call("fetch", args({ remote }), opts);
  }

  /** Fetches `remote` (default as push's) and brings REMOTE/BRANCH into `branch` with the merge
   * machinery. */
  pull(remote?: string, branch?: string, opts: CallOptions = {}): Promise<Record<string, unknown>> {
    return this.call("pull", args({ remote, branch }), opts);
  }

  // -- files of a live Workspace (for agents without a shell) ------------------------------------

  /** Reads `path` from the live Workspace of `target` (a branch or mountpoint, mounted or not). */
  readFile(target: string, path: string, opts: { offset?: number; length?: number } = {}): Promise<Buffer> {
    return pieces((offset, length) => this.call("read_file", args({ target, path, offset: offset || undefined,
      length })), opts.offset ?? 0, opts.length);
  }

  /**
   * Writes `data` (a string is UTF-8) to `path` in `target`'s live Workspace, replacing the file
   * (or appending); missing parent directories are made. `mode` sets the permission bits (0o755
   * or "0755"; a new file is 0644 without it). A mounted branch's users see the change at once.
   * Resolves with the file's size after the write.
   */
  async writeFile(target: string, path: string, data: string | Uint8Array,
                  opts: { mode?: number | string; append?: boolean } = {}): Promise<number> {
    const raw = typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data);
    const mode = modeString(opts.mode);
    let size = 0;
    for (let i = 0; i === 0 || i < raw.length; i += CHUNK) {
      const r = await this.call<{ size: number }>("write_file", args({ target, path,
        content_base64: raw.subarray(i, i + CHUNK).toString("base64"), mode,
        append: opts.append || i > 0 }));
      size = r.size;
    }
    return size;
  }

  /** The entries of directory `path` (default: the root) of `target`'s live Workspace. */
  listDir(target: string, path?: string): Promise<DirEntry[]> {
    return this.call("list_dir", args({ target, path }));
  }

  /** Removes `path` (a directory only with `recursive`) from `target`'s live Workspace. */
  async removePath(target: string, path: string, opts: { recursive?: boolean } = {}): Promise<void> {
    await this.call("remove_path", args({ target, path, recursive: opts.recursive }));
  }

  // -- merges -------------------------------------------------------------------------------------

  /**
   * Merges `source` (a branch, commit, prefix, REF~N or REF^N) into `into` (a branch or a
   * mountpoint; default: the mount holding the working directory), as `layerfs merge`: a
   * fast-forward moves the branch, otherwise a merge Commit is made. A mounted branch (or one with
   * uncommitted changes) merges through its Workspace, live in the mount. Conflicts reject with
   * Conflict whose `.result` is the MergeResult: for a mounted branch the merge has stopped there
   * (`stopped`), to be resolved in the mount and then `mergeContinue` (or `mergeAbort`);
   * otherwise nothing changed.
   */
  merge(source: string, opts: MergeOptions = {}): Promise<MergeResult> {
    return this.call("merge", args({ source, into: opts.into, message: opts.message, ff_only: opts.ffOnly,
      no_ff: opts.noFf, strategy: opts.strategy, strategy_option: opts.strategyOption }));
  }

  /** Applies the change `commit` made onto a branch as a new Commit (`layerfs cherry-pick`). */
  cherryPick(commit: string, opts: PickOptions = {}): Promise<MergeResult> {
    return this.call("cherry_pick", args({ commit, into: opts.into, strategy_option: opts.strategyOption }));
  }

  /** Undoes the change `commit` made, as a new Commit on a branch (`layerfs revert`). */
  revert(commit: string, opts: PickOptions = {}): Promise<MergeResult> {
    return this.call("revert", args({ commit, into: opts.into, strategy_option: opts.strategyOption }));
  }

  /**
   * Commits a stopped merge (or cherry-pick, revert: `op`) once its conflicts are resolved in the
   * mount (`--continue`); Conflict again while some are open.
   */
  async mergeContinue(opts: MergeStepOptions = {}): Promise<MergeResult> {
    return this.call(this.mergeVerb(opts.op), args({ into: opts.into, message: opts.message, continue: true }));
  }

  /** Puts the Workspace back as it was before a stopped merge (`--abort`); the result has `aborted`. */
  async mergeAbort(opts: Omit<MergeStepOptions, "message"> = {}): Promise<MergeResult> {
    return this.call(this.mergeVerb(opts.op), args({ into: opts.into, abort: true }));
  }

  private mergeVerb(op = "merge"): string {
    const verb = MERGE_VERBS[op];
    if (!verb) throw makeError("EINVAL", `unknown merge operation '${op}' (merge, cherry-pick, revert)`);
    return verb;
  }

  // -- exec (client side: mount, run, commit, umount) ---------------------------------------------

  /**
   * Runs `command` with its working directory in `ref`'s Workspace, as `layerfs exec` does
   * (docs/protocol.md): a branch that is not mounted is mounted for the run (at `mountpoint`,
   * made if missing, or a fresh temporary directory) and unmounted after, even when the command or
   * the commit fails; a mounted one runs in its mount (Busy when `mountpoint` names another place).
   * When `ref` is a commit, not a branch, it is forked first into `exec-ID12` (`-2`, `-3`... when
   * taken): `result.branch`, `result.forked`. A string command runs under `/bin/sh -c`. With
   * `commit` what the command left is committed, whatever its exit status. `isolate` runs it in
   * the bubblewrap sandbox of `layerfs exec --isolate`. Standard streams pass through unless
   * `capture`. A command that cannot be started rejects with NotFound (or PermissionDenied) after
   * the cleanup.
   */
  async exec(ref: string, command: string | string[], opts: ExecOptions = {}): Promise<ExecResult> {
    const isolate = opts.isolate ?? false;
    checkExec(command, isolate, opts.noNetwork ?? false);
    const [branch, forked, mountedAt] = await this.execBranch(ref);
    let want = opts.mountpoint !== undefined ? resolve(opts.mountpoint) : undefined;
    if (want !== undefined) {
      try {
        want = realpathSync(want);
      } catch {
        // not there yet: made below
      }
    }
    if (mountedAt !== undefined && want !== undefined && want !== mountedAt) {
      throw makeError("EBUSY", `branch '${branch}' is mounted at ${mountedAt}, not ${want}`);
    }
    let mp = mountedAt;
    let mounted = false;
    let madeDir = false;
    if (mp === undefined) {
      if (want === undefined) {
        want = mkdtempSync(join(process.env.TMPDIR || tmpdir(), "layerfs-exec."));
        madeDir = true;
      } else if (!existsSync(want)) {
        mkdirSync(want, { recursive: true });
        madeDir = true;
      }
      try {
        mp = (await this.mount(branch, want)).mountpoint;
      } catch (e) {
        if (madeDir) rmdirSync(want);
        throw e;
      }
      mounted = true;
    }
    try {
      const argv = execArgv(command, mp, this.path, isolate, opts.noNetwork ?? false);
      const run = await runCommand(argv, mp, isolate, opts);
      let commit: string | null = null;
      if (opts.commit !== undefined && opts.commit !== false) {
        commit = await this.commit(mp, opts.commit === true ? execMessage(command) : opts.commit);
      }
      return { ...run, branch, mountpoint: mp, mounted, forked, isolated: isolate, commit };
    } finally {
      if (mounted) {
        await this.umount(mp);
        if (madeDir) rmdirSync(want!);
      }
    }
  }

  /** The branch exec runs in, whether it was forked, and its mountpoint if mounted. */
  private async execBranch(ref: string): Promise<[string, boolean, string | undefined]> {
    const branches = await this.branches();
    const found = branches.find((b) => b.name === ref);
    if (found) return [ref, false, found.mountpoint];
    const head = (await this.log(ref, { maxCount: 1 }))[0].id; // NotFound when ref names nothing
    const taken = new Set(branches.map((b) => b.name));
    for (let i = 1; ; i++) {
      const name = i === 1 ? `exec-${head.slice(0, 12)}` : `exec-${head.slice(0, 12)}-${i}`;
      if (taken.has(name)) continue;
      try {
        await this.fork(name, head);
      } catch (e) {
        if ((e as LayerFSError).code === "EEXIST") continue;
        throw e;
      }
      return [name, true, undefined];
    }
  }
}

/**
 * The command's argv (a string under `/bin/sh -c`), after the checks made before anything is
 * mounted: a command, `noNetwork` only with `isolate`, bubblewrap there for `isolate`.
 */
function checkExec(command: string | string[], isolate: boolean, noNetwork: boolean): string[] {
  const argv = typeof command === "string" ? ["/bin/sh", "-c", command] : [...command];
  if (argv.length === 0) throw makeError("EINVAL", "exec: no command");
  if (noNetwork && !isolate) throw makeError("EINVAL", "exec: noNetwork needs isolate");
  if (isolate) {
    const found = ["/usr/bin/bwrap", "/bin/bwrap"].some((p) => {
      try {
        accessSync(p, fsConstants.X_OK);
        return true;
      } catch {
        return false;
      }
    });
    if (!found) throw makeError("ENOENT", "isolate needs bubblewrap (bwrap): apt-get install bubblewrap");
  }
  return argv;
}

/**
 * The command line to run; with `isolate` inside bubblewrap exactly as `layerfs exec --isolate`
 * builds it (src/client/exec.cc): the Workspace writable at /workspace, the host's top-level
 * directories read-only, a private /tmp, /dev and /proc, the Store hidden, new PID/IPC/UTS
 * namespaces, no capabilities; `noNetwork`: only a private loopback.
 */
function execArgv(command: string | string[], mountpoint: string, store: string, isolate: boolean,
                  noNetwork: boolean): string[] {
  const argv = checkExec(command, isolate, noNetwork);
  if (!isolate) return argv;
  const a = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
    "--unshare-cgroup-try", "--cap-drop", "ALL"];
  if (noNetwork) a.push("--unshare-net");
  for (const n of readdirSync("/").sort()) {
    if (["proc", "dev", "tmp", "workspace"].includes(n)) continue;
    const p = "/" + n;
    if (lstatSync(p).isSymbolicLink()) a.push("--symlink", readlinkSync(p), p);
    else a.push("--ro-bind", p, p);
  }
  a.push("--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp");
  if (store && store !== "/" && !store.startsWith("/tmp/")) a.push("--tmpfs", store, "--remount-ro", store);
  a.push("--bind", mountpoint, "/workspace", "--remount-ro", "/", "--chdir", "/workspace", "--setenv", "PWD",
    "/workspace", "--");
  return [...a, ...argv];
}

/** The default message of an exec's Commit: "exec: CMD ARGS", at most 200 characters. */
function execMessage(command: string | string[]): string {
  const msg = "exec: " + (typeof command === "string" ? command : command.join(" "));
  return msg.length <= 200 ? msg : msg.slice(0, 197) + "...";
}

function runCommand(argv: string[], cwd: string, isolate: boolean, opts: ExecOptions):
    Promise<{ exit_code: number; signal: string | null; stdout: Buffer | null; stderr: Buffer | null }> {
  return new Promise((resolvePromise, reject) => {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const env = { ...(opts.env ?? process.env) };
    if (!isolate) env.PWD = cwd;
    const child = spawn(argv[0], argv.slice(1), {
      cwd,
      env,
      stdio: [opts.input !== undefined ? "pipe" : "inherit", opts.capture ? "pipe" : "inherit",
        opts.capture ? "pipe" : "inherit"],
    });
    let timer: NodeJS.Timeout | undefined;
    if (opts.timeout !== undefined) timer = setTimeout(() => child.kill("SIGKILL"), opts.timeout);
    child.stdout?.on("data", (d: Buffer) => out.push(d));
    child.stderr?.on("data", (d: Buffer) => err.push(d));
    if (opts.input !== undefined) {
      child.stdin!.on("error", () => undefined); // the command may exit without reading it all
      child.stdin!.end(opts.input);
    }
    child.once("error", (e: NodeJS.ErrnoException) => {
      if (timer) clearTimeout(timer);
      reject(makeError(e.code === "EACCES" ? "EACCES" : "ENOENT", `exec: ${argv[0]}: ${e.message}`));
    });
    child.once("close", (code, signal) => {
      if (timer) clearTimeout(timer);
      const signum = signal ? (osConstants.signals as Record<string, number>)[signal] ?? 0 : 0;
      resolvePromise({
        exit_code: code ?? 128 + signum,
        signal: signal ? signal.replace(/^SIG/, "") : null,
        stdout: opts.capture ? Buffer.concat(out) : null,
        stderr: opts.capture ? Buffer.concat(err) : null,
      });
    });
  });
}

export { LayerFSError };
