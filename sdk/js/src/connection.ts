// The transport of docs/protocol.md (version 1): a connection to STORE/control.sock carrying one
// request at a time as JSON lines, and starting layerfsd when none listens. Store (store.ts) keeps
// a pool of these; nothing here knows a verb.

import { spawn } from "node:child_process";
import { accessSync, closeSync, constants as fsConstants, existsSync, openSync, readFileSync, realpathSync,
  statSync, unlinkSync } from "node:fs";
import { Socket, createConnection } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";

import { LayerFSError, makeError, fromWire } from "./errors.js";
import type { Progress, ProgressCallback } from "./types.js";

export const PROTOCOL_VERSION = 1;
/** The protocol's largest message, newline included. */
export const MAX_MESSAGE = 64 * 1024 * 1024;

type Pending = {
  id: number;
  verb: string;
  progress?: ProgressCallback;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
};

/** One connection: a socket, the bytes read past the last message, the request in flight. */
export class Conn {
  private readonly socket: Socket;
  private chunks: Buffer[] = [];
  private buffered = 0;
  private pending: Pending | null = null;
  private nextId = 1;
  /** True once a request got its answer: a later failure to send means the daemon left. */
  used = false;
  dead = false;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on("data", (d: Buffer) => this.onData(d));
    socket.on("error", (e: NodeJS.ErrnoException) => this.fail(e));
    socket.on("close", () => this.fail(null));
    socket.unref();
  }

  /** Connects to the socket at `path`; rejects with the system error (ENOENT, ECONNREFUSED...). */
  static connect(path: string): Promise<Conn> {
    return new Promise((resolve, reject) => {
      const s = createConnection({ path });
      const onError = (e: Error) => {
        s.destroy();
        reject(e);
      };
      s.once("error", onError);
      s.once("connect", () => {
        s.off("error", onError);
        resolve(new Conn(s));
      });
    });
  }

  close(): void {
    this.dead = true;
    this.socket.destroy();
  }

  /** Sends one request and resolves with its result (rejects with its error). */
  request(verb: string, args: Record<string, unknown>, cwd: string | undefined,
          progress?: ProgressCallback): Promise<unknown> {
    if (this.pending) throw new Error("layerfs: one request at a time on a connection");
    const id = this.nextId++;
    const msg: Record<string, unknown> = { protocol: PROTOCOL_VERSION, id, verb, args };
    if (cwd) msg.cwd = cwd;
    const line = JSON.stringify(msg) + "\n";
    if (Buffer.byteLength(line) > MAX_MESSAGE) {
      return Promise.reject(makeError("TOO_LARGE", `request '${verb}' is over the protocol's ${MAX_MESSAGE} bytes`));
    }
    return new Promise((resolve, reject) => {
      this.pending = { id, verb, progress, resolve, reject };
      this.socket.ref();
      this.socket.write(line);
    });
  }

  private finish(): Pending | null {
    const p = this.pending;
    this.pending = null;
    this.socket.unref();
    return p;
  }

  private fail(e: NodeJS.ErrnoException | null): void {
    this.dead = true;
    const p = this.finish();
    if (!p) return;
    if (e && e.code === "EPIPE" && this.chunks.length === 0) {
      // The daemon had closed its end before we wrote: it never saw the request.
      const err = makeError("ECONNRESET", "layerfsd closed the connection");
      (err as { neverSent?: boolean }).neverSent = true;
      p.reject(err);
    } else {
      p.reject(makeError("ECONNRESET", "layerfsd closed the connection before it answered"));
    }
    this.socket.destroy();
  }

  private onData(d: Buffer): void {
    let start = 0;
    for (;;) {
      const nl = d.indexOf(10, start);
      if (nl < 0) break;
      const piece = d.subarray(start, nl);
      const line = this.chunks.length ? Buffer.concat([...this.chunks, piece]) : piece;
      this.chunks = [];
      this.buffered = 0;
      start = nl + 1;
      this.onMessage(line);
      if (this.dead) return;
    }
    if (start < d.length) {
      this.chunks.push(d.subarray(start));
      this.buffered += d.length - start;
      if (this.buffered > MAX_MESSAGE) {
        const p = this.finish();
        this.close();
        p?.reject(makeError("TOO_LARGE", "layerfsd sent a message over the protocol's size limit"));
      }
    }
  }

  private onMessage(line: Buffer): void {
    const p = this.pending;
    const broken = (detail: string) => {
      this.finish();
      this.close();
      p?.reject(makeError("PROTOCOL", detail));
    };
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(line.toString("utf8"));
    } catch (e) {
      return broken(`layerfsd sent a message that is not JSON: ${(e as Error).message}`);
    }
    if (typeof msg !== "object" || msg === null || Array.isArray(msg)) {
      return broken("layerfsd sent a message that is not a JSON object");
    }
    if (!p) return broken("layerfsd sent a message with no request waiting");
    if (msg.id !== p.id) {
      if (msg.id === null && msg.ok === false) {
        this.finish();
        this.close();
        return p.reject(fromWire(msg.error));
      }
      return broken(`layerfsd answered request ${JSON.stringify(msg.id)} while ${p.id} was waiting`);
    }
    if ("event" in msg) {
      if (msg.event === "progress" && p.progress) {
        try {
          p.progress(msg.progress as Progress);
        } catch (e) {
          // A callback that throws ends the request; the rest of its messages spoil the stream.
          this.finish();
          this.close();
          p.reject(e);
        }
      }
      return; // events of kinds this SDK does not know are skipped
    }
    if (msg.ok === true) {
      this.used = true;
      this.finish();
      p.resolve(msg.result);
    } else if (msg.ok === false) {
      this.used = true;
      this.finish();
      const err = fromWire(msg.error); // with error.result when the failure has one
      if (err.code === "PROTOCOL" || err.code === "TOO_LARGE") this.close();
      p.reject(err);
    } else {
      broken(`layerfsd sent a message with neither 'ok' nor 'event' for '${p.verb}'`);
    }
  }
}

function which(name: string): string | null {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, name);
    try {
      accessSync(p, fsConstants.X_OK);
      if (statSync(p).isFile()) return p;
    } catch {
      // not here
    }
  }
  return null;
}

/** The `layerfs` program: $LAYERFS, else the first on PATH (docs/protocol.md, "Starting the daemon"). */
export function findLayerfs(): string {
  const env = process.env.LAYERFS;
  if (env) return env;
  const found = which("layerfs");
  if (!found) throw makeError("ENOENT", "cannot find the layerfs program: set $LAYERFS or put it on PATH");
  return found;
}

/**
 * The `layerfsd` program: $LAYERFSD; else the one beside `layerfs` ($LAYERFS, else the first on
 * PATH, symbolic links resolved) when executable; else the first on PATH.
 */
export function findLayerfsd(): string {
  const env = process.env.LAYERFSD;
  if (env) return env;
  const cli = process.env.LAYERFS || which("layerfs");
  if (cli) {
    try {
      const beside = join(dirname(realpathSync(cli)), "layerfsd");
      accessSync(beside, fsConstants.X_OK);
      return beside;
    } catch {
      // not beside it
    }
  }
  const found = which("layerfsd");
  if (!found) throw makeError("ENOENT", "cannot find the layerfsd program: set $LAYERFSD or put it on PATH");
  return found;
}

/** The Store's absolute, symlink-free path; NotFound when there is no Store there. */
export function storeRoot(path: string): string {
  let p: string;
  try {
    p = realpathSync(path);
  } catch {
    throw makeError("ENOENT", `no Store at ${path}`);
  }
  if (!existsSync(join(p, "LAYERFS"))) throw makeError("ENOENT", `${path} is not a LayerFS Store`);
  return p;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A daemon that exited may stay a zombie until its parent (often init) reaps it.
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 1).trim().split(" ")[0] !== "Z";
  } catch {
    return false;
  }
}

/** A daemon that stopped listening may still hold the Store while it exits: wait for it. */
async function waitForExitingDaemon(store: string): Promise<void> {
  let pid = 0;
  try {
    pid = parseInt(readFileSync(join(store, "layerfsd.pid"), "utf8"), 10);
  } catch {
    return;
  }
  const deadline = Date.now() + 6000;
  while (pid > 0 && Date.now() < deadline && alive(pid) && pid !== process.pid) await sleep(20);
}

/**
 * Runs a program to completion with stdout and stderr in files (a daemon's child may keep a pipe
 * open for its whole life).
 */
function run(argv: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  const base = join(tmpdir(), `layerfs-sdk-${process.pid}-${Math.random().toString(36).slice(2)}`);
  const fds = [openSync(`${base}.out`, "w+"), openSync(`${base}.err`, "w+")];
  const collect = (): [string, string] => {
    const out: string[] = [];
    for (const [i, ext] of [".out", ".err"].entries()) {
      closeSync(fds[i]);
      try {
        out.push(readFileSync(base + ext, "utf8"));
        unlinkSync(base + ext);
      } catch {
        out.push("");
      }
    }
    return [out[0], out[1]];
  };
  return new Promise((resolve, reject) => {
    const done = (status: number) => {
      const [stdout, stderr] = collect();
      resolve({ status, stdout, stderr });
    };
    const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", fds[0], fds[1]] });
    child.once("error", (e: NodeJS.ErrnoException) => {
      collect();
      reject(makeError(e.code === "EACCES" ? "EACCES" : "ENOENT", `cannot run ${argv[0]}: ${e.message}`));
    });
    child.once("exit", (code, signal) => done(code ?? (signal ? 128 : 1)));
  });
}

/**
 * The error a program run with `--json` reported: the last line of its stderr as
 * `{"error": {"code", "errno", "message"}}` (docs/protocol.md); null when it is not one.
 */
export function errorLine(stderr: string): LayerFSError | null {
  const lines = stderr.trim().split("\n");
  try {
    const msg = JSON.parse(lines[lines.length - 1]) as { error?: unknown };
    if (typeof msg === "object" && msg !== null && typeof msg.error === "object" && msg.error !== null) {
      return fromWire(msg.error);
    }
  } catch {
    // not JSON
  }
  return null;
}

function lastLine(text: string, prefix: string, fallback: string): string {
  const lines = text.trim().split("\n").filter((l) => l.length > 0);
  let line = lines.length ? lines[lines.length - 1] : fallback;
  if (line.startsWith(prefix)) line = line.slice(prefix.length);
  return line;
}

/**
 * Starts `layerfsd --store STORE --json --idle IDLE` (it returns once it listens). A failure
 * rejects with the code layerfsd reported (EBUSY: the Store is held by another process; ENOENT:
 * no Store). `connected()` is tried first: another client may have started it at the same moment.
 */
export async function startDaemon(store: string, idle: number, connected: () => Promise<boolean>): Promise<void> {
  await waitForExitingDaemon(store);
  const argv = [findLayerfsd(), "--store", store, "--json", "--idle", String(idle)];
  const r = await run(argv);
  if (r.status === 0 || (await connected())) return;
  // Without the error object (not a layerfsd that speaks --json) there is no code but EIO.
  const why = errorLine(r.stderr) ?? makeError("EIO", lastLine(r.stderr, "", `exit status ${r.status}`));
  throw makeError(why.code, `cannot start layerfsd for ${store}: ${why.detail}`, why.errno);
}

/**
 * Runs `layerfs ... --json` for a verb no daemon serves (init, clone) and resolves with its JSON
 * result; a failure rejects with the code of the error object it printed on stderr (a usage
 * error, exit status 2, has none: InvalidArgument; anything else without one: IOFailure).
 */
export async function runCliJson(argv: string[]): Promise<unknown> {
  const r = await run([...argv, "--json"]);
  if (r.status === 0) {
    try {
      return JSON.parse(r.stdout);
    } catch {
      throw makeError("PROTOCOL", `${argv.slice(0, 2).join(" ")} --json printed no JSON`);
    }
  }
  const why = errorLine(r.stderr);
  if (why) throw why;
  const line = lastLine(r.stderr, "layerfs: ", `${argv.slice(0, 2).join(" ")} exited with status ${r.status}`);
  throw makeError(r.status === 2 ? "EINVAL" : "EIO", line);
}

/**
 * Runs `layerfs init --json` (there is no daemon for a Store that does not exist yet) and
 * resolves with its result, `{store, policy, commit}`.
 */
/** Runs `layerfs clone URL PATH --json` (it makes a new Store, which no daemon holds yet). */
export function runClone(url: string, path: string, lazy: boolean): Promise<unknown> {
  return runCliJson([findLayerfs(), "clone", url, path, ...(lazy ? ["--lazy"] : [])]);
}

export function runInit(path: string, opts: { policy?: string; fromDir?: string; message?: string }):
    Promise<unknown> {
  const argv = [findLayerfs(), "init", path];
  if (opts.policy !== undefined) argv.push("--policy", opts.policy);
  if (opts.fromDir !== undefined) argv.push("--from", opts.fromDir);
  if (opts.message !== undefined) argv.push("-m", opts.message);
  return runCliJson(argv);
}

export { LayerFSError };
