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
      let err = fromWire(msg.error);
      if (err.result === undefined && "result" in msg) {
        // A CONFLICT's outcome may travel beside its error.
        err = makeError(err.code, err.detail, err.errno, msg.result);
      }
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

/** The `layerfs` program: $LAYERFS, else the first on PATH. */
export function findLayerfs(): string {
  const env = process.env.LAYERFS;
  if (env) return env;
  const found = which("layerfs");
  if (!found) throw makeError("ENOENT", "cannot find the layerfs program: set $LAYERFS or put it on PATH");
  return found;
}

/** The `layerfsd` program: $LAYERFSD, beside `layerfs`, or on PATH (as the CLI looks). */
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
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
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

/** Runs a program to completion with stderr in a file (a daemon's child may keep a pipe open). */
function run(argv: string[]): Promise<{ status: number; stderr: string }> {
  const errPath = join(tmpdir(), `layerfs-sdk-${process.pid}-${Math.random().toString(36).slice(2)}.err`);
  const fd = openSync(errPath, "w+");
  return new Promise((resolve, reject) => {
    const done = (status: number) => {
      closeSync(fd);
      let stderr = "";
      try {
        stderr = readFileSync(errPath, "utf8");
        unlinkSync(errPath);
      } catch {
        // nothing written
      }
      resolve({ status, stderr });
    };
    const child = spawn(argv[0], argv.slice(1), { stdio: ["ignore", "ignore", fd] });
    child.once("error", (e: NodeJS.ErrnoException) => {
      closeSync(fd);
      try {
        unlinkSync(errPath);
      } catch {
        // already gone
      }
      reject(makeError("ENOENT", `cannot run ${argv[0]}: ${e.message}`));
    });
    child.once("exit", (code, signal) => done(code ?? (signal ? 128 : 1)));
  });
}

function lastLine(text: string, prefix: string, fallback: string): string {
  const lines = text.trim().split("\n").filter((l) => l.length > 0);
  let line = lines.length ? lines[lines.length - 1] : fallback;
  if (line.startsWith(prefix)) line = line.slice(prefix.length);
  return line;
}

/**
 * Starts `layerfsd --store STORE --idle IDLE` (it returns once it listens). `connected()` is
 * tried when the start fails: another client may have started it at the same moment.
 */
export async function startDaemon(store: string, idle: number, connected: () => Promise<boolean>): Promise<void> {
  await waitForExitingDaemon(store);
  const argv = [findLayerfsd(), "--store", store, "--idle", String(idle)];
  const r = await run(argv);
  if (r.status === 0 || (await connected())) return;
  const reason = lastLine(r.stderr, "layerfsd: ", `exit status ${r.status}`);
  const low = reason.toLowerCase();
  const code = low.includes("lock") || low.includes("in use") ? "EBUSY" : "EIO";
  throw makeError(code, `cannot start layerfsd for ${store}: ${reason}`);
}

/** Runs `layerfs init` (there is no daemon for a Store that does not exist yet). */
export async function runInit(path: string, opts: { policy?: string; fromDir?: string; message?: string }):
    Promise<void> {
  const argv = [findLayerfs(), "init", path];
  if (opts.policy !== undefined) argv.push("--policy", opts.policy);
  if (opts.fromDir !== undefined) argv.push("--from", opts.fromDir);
  if (opts.message !== undefined) argv.push("-m", opts.message);
  const r = await run(argv);
  if (r.status === 0) return;
  const msg = lastLine(r.stderr, "layerfs: ", `layerfs init exited with status ${r.status}`);
  const low = msg.toLowerCase();
  // `layerfs init` reports failures as text only; name the cases a program acts on.
  const code = low.includes("exist") || low.includes("not empty") ? "EEXIST"
    : low.includes("polic") || low.includes("invalid") ? "EINVAL"
    : !existsSync(dirname(path)) ? "ENOENT" : "EIO";
  throw makeError(code, msg);
}

export { LayerFSError };
