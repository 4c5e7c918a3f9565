// A small fake layerfsd that speaks docs/protocol.md (version 1) from an in-memory model.
//
// It checks what the SDK sends (protocol version, id, verb, argument names and types: an unknown
// argument or a wrong type is EINVAL, as the real daemon does) and answers with the documented
// result shapes, error codes and progress events. It mounts nothing: `mount` only records the
// mountpoint. fake.test.mjs pins the SDK's side of the protocol down with it; daemon.test.mjs
// runs the verbs against the real daemon.
//
// Run as a program (`node fake-server.mjs --store S --idle N`) it behaves like layerfsd: it
// starts a detached copy of itself serving S/control.sock and exits 0 once that listens.

import { createHash } from "node:crypto";
import { appendFileSync, chmodSync, existsSync, unlinkSync, writeFileSync } from "node:fs";
import { createServer, createConnection } from "node:net";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const S = "string", N = "number", B = "boolean", L = "array";
export const ARGS = {
  branches: {}, mounts: {}, stats: {}, gc: {},
  fork: { name: S, from: S }, branch_delete: { name: S }, log: { ref: S, max_count: N, graph: B, all: B, reverse: B, changes: B, paths: L, patch: B, renames: B,
    grep: S, ignore_case: B, since: S, until: S },
  rev_parse: { ref: S }, show: { commit: S, patch: B, paths: L, renames: B }, diff: { a: S, b: S, patch: B, paths: L, renames: B }, cat: { commit: S, path: S, offset: N, length: N },
  export: { commit: S, dir: S },
  import: { dir: S, branch: S, message: S, jobs: N },
  mount: { ref: S, mountpoint: S, read_only: B, allow_other: B, single_threaded: B, threads: B, no_follow_cpu: B },
  umount: { mountpoint: S },
  commit: { target: S, message: S, amend: B }, status: { target: S, patch: B, paths: L, renames: B }, reset: { target: S, hard: S },
  restore: { target: S, paths: L, source: S },
  verify: { commits: L, fetch: B },
  remote_list: {}, remote_add: { name: S, url: S, lazy: B }, remote_remove: { name: S },
  push: { remote: S, branches: L, force: B }, fetch: { remote: S }, pull: { remote: S, branch: S },
  clone: { url: S, store: S, lazy: B },
  read_file: { target: S, path: S, offset: N, length: N },
  write_file: { target: S, path: S, content_base64: S, content: S, mode: S, append: B },
  list_dir: { target: S, path: S }, remove_path: { target: S, path: S, recursive: B },
  merge: { source: S, into: S, message: S, ff_only: B, no_ff: B, strategy: S, strategy_option: S, continue: B,
    abort: B },
  cherry_pick: { commit: S, into: S, strategy_option: S, continue: B, abort: B },
  revert: { commit: S, into: S, strategy_option: S, continue: B, abort: B },
};
export const REQUIRED = {
  fork: ["name"], branch_delete: ["name"], rev_parse: ["ref"], cat: ["commit", "path"],
  export: ["commit", "dir"], import: ["dir"], mount: ["ref", "mountpoint"], umount: ["mountpoint"],
  commit: ["message"], read_file: ["target", "path"], write_file: ["target", "path"], list_dir: ["target"],
  remove_path: ["target", "path"], remote_add: ["name", "url"], remote_remove: ["name"], restore: ["paths"],
  clone: ["store", "url"],
};
const ERRNO = { ENOENT: 2, EEXIST: 17, EBUSY: 16, EINVAL: 22, EIO: 5 };

class Fail extends Error {
  constructor(code, message, result) {
    super(message);
    this.code = code;
    this.result = result;
  }
}

const md5 = (s) => createHash("md5").update(s).digest("hex");

class Model {
  constructor() {
    this.commits = new Map();
    this.trees = new Map();
    this.branches = new Map();
    this.work = new Map();
    this.mounts = new Map(); // mountpoint -> branch
    this.merging = new Map(); // branch -> the Commit a stopped merge brings in
    this.seq = 0;
    const root = this.makeCommit([], "init", new Map());
    this.branches.set("main", root);
    this.work.set("main", new Map());
  }

  makeCommit(parents, message, tree) {
    this.seq++;
    const id = md5(`${this.seq}:${message}`);
    this.commits.set(id, { id, parents, root: md5(`tree${this.seq}`), message, time: 1700000000 + this.seq,
      time_nsec: 5, logical_bytes: [...tree.values()].reduce((a, b) => a + b.length, 0), files: tree.size,
      from_a_newer_daemon: { clients: "ignore it" } });
    this.trees.set(id, new Map(tree));
    return id;
  }

  resolve(ref) {
    const [base, back] = ref.split("~");
    let id = this.branches.get(base);
    if (!id) {
      const hits = base.length >= 4 ? [...this.commits.keys()].filter((c) => c.startsWith(base)) : [];
      if (hits.length !== 1) throw new Fail("ENOENT", `no branch or commit '${ref}'`);
      id = hits[0];
    }
    for (let i = 0; i < Number(back ?? 0); i++) {
      id = this.commits.get(id).parents[0];
      if (!id) throw new Fail("ENOENT", `no branch or commit '${ref}'`);
    }
    return id;
  }

  branchOf(target) {
    if (target === undefined) throw new Fail("EINVAL", "no target given");
    if (this.mounts.has(target)) return this.mounts.get(target);
    if (this.branches.has(target)) return target;
    throw new Fail("ENOENT", `no branch or mount '${target}'`);
  }

  static entry(d) {
    return { type: "file", mode: "0644", size: d.length, id: md5(d) };
  }

  changes(a, b) {
    const out = [];
    for (const p of [...new Set([...a.keys(), ...b.keys()])].sort()) {
      if (!a.has(p)) out.push({ path: p, change: "A", after: Model.entry(b.get(p)) });
      else if (!b.has(p)) out.push({ path: p, change: "D", before: Model.entry(a.get(p)) });
      else if (!a.get(p).equals(b.get(p))) {
        out.push({ path: p, change: "M", before: Model.entry(a.get(p)), after: Model.entry(b.get(p)) });
      }
    }
    return out;
  }
}

export class FakeDaemon {
  constructor(store, { protocol = 1 } = {}) {
    this.store = store;
    this.protocol = protocol;
    this.model = new Model();
    this.requests = [];
    this.connections = 0;
    this.sockets = new Set();
    this.path = join(store, "control.sock");
  }

  listen() {
    if (existsSync(this.path)) unlinkSync(this.path);
    this.server = createServer((sock) => this.serve(sock));
    return new Promise((resolve) => this.server.listen(this.path, () => {
      chmodSync(this.path, 0o600);
      resolve(this);
    }));
  }

  async stop() {
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => this.server.close(r));
  }

  dropConnections() {
    for (const s of this.sockets) s.destroy();
  }

  serve(sock) {
    this.connections++;
    this.sockets.add(sock);
    sock.on("close", () => this.sockets.delete(sock));
    sock.on("error", () => undefined);
    let parts = [];
    sock.on("data", (d) => {
      let start = 0;
      let nl;
      while ((nl = d.indexOf(10, start)) >= 0) {
        const line = Buffer.concat([...parts, d.subarray(start, nl)]).toString("utf8");
        parts = [];
        start = nl + 1;
        if (!this.one(sock, line)) {
          sock.end();
          return;
        }
      }
      if (start < d.length) parts.push(d.subarray(start));
    });
  }

  send(sock, msg) {
    sock.write(JSON.stringify(msg) + "\n");
  }

  one(sock, line) {
    let req;
    try {
      req = JSON.parse(line);
    } catch {
      this.send(sock, { id: null, ok: false, error: { code: "PROTOCOL", errno: 0, message: "bad JSON" } });
      return true;
    }
    this.requests.push(req);
    const id = req.id;
    if (req.protocol !== this.protocol) {
      this.send(sock, { id, ok: false, error: { code: "PROTOCOL", errno: 0,
        message: `client speaks protocol ${req.protocol}, this layerfsd speaks ${this.protocol}` } });
      return false;
    }
    const args = req.args ?? {};
    try {
      const spec = ARGS[req.verb];
      if (!spec && req.verb !== "boom") throw new Fail("EINVAL", `unknown verb '${req.verb}'`);
      for (const [k, v] of Object.entries(args)) {
        const want = spec?.[k];
        if (!want) throw new Fail("EINVAL", `${req.verb}: unknown argument '${k}'`);
        const got = Array.isArray(v) ? L : typeof v;
        if (got !== want || (want === N && !Number.isInteger(v))) {
          throw new Fail("EINVAL", `${req.verb}: argument '${k}' has the wrong type`);
        }
      }
      for (const k of REQUIRED[req.verb] ?? []) {
        if (!(k in args)) throw new Fail("EINVAL", `${req.verb}: missing argument '${k}'`);
      }
      this.send(sock, { id, ok: true, result: this.verb(sock, id, req.verb, args) });
    } catch (e) {
      if (!(e instanceof Fail)) throw e;
      const error = { code: e.code, errno: ERRNO[e.code] ?? 0, message: e.message };
      if (e.result !== undefined) error.result = e.result;
      this.send(sock, { id, ok: false, error });
    }
    return true;
  }

  progress(sock, id, phase) {
    for (let i = 1; i <= 3; i++) {
      this.send(sock, { id, event: "progress", progress: { phase, objects: i, objects_total: 3, bytes: i * 10 } });
    }
    this.send(sock, { id, event: "progress", progress: { phase, objects: 3, done: true } });
    this.send(sock, { id, event: "something-newer", detail: 1 });
  }

  verb(sock, id, verb, a) {
    const m = this.model;
    const mountedBranches = new Map([...m.mounts].map(([mp, b]) => [b, mp]));
    const b64 = (d) => d.toString("base64");
    switch (verb) {
      case "branches":
        return [...m.branches].sort().map(([name, commit]) =>
          mountedBranches.has(name) ? { name, commit, mountpoint: mountedBranches.get(name) } : { name, commit });
      case "fork": {
        if (m.branches.has(a.name)) throw new Fail("EEXIST", `branch '${a.name}' already exists`);
        const c = m.resolve(a.from ?? "main");
        m.branches.set(a.name, c);
        m.work.set(a.name, new Map(m.trees.get(c)));
        return { branch: a.name, commit: c };
      }
      case "branch_delete":
        if (!m.branches.has(a.name)) throw new Fail("ENOENT", `no branch '${a.name}'`);
        if (mountedBranches.has(a.name)) throw new Fail("EBUSY", `branch '${a.name}' is mounted`);
        m.branches.delete(a.name);
        return { branch: a.name };
      case "log": {
        const out = [];
        let c = m.resolve(a.ref ?? "main");
        while (c && out.length < (a.max_count ?? Infinity)) {
          const commit = m.commits.get(c);
          const before = commit.parents.length ? m.trees.get(commit.parents[0]) : new Map();
          out.push(a.changes ? { ...commit, changes: m.changes(before, m.trees.get(c)) } : commit);
          c = commit.parents[0];
        }
        return a.reverse ? out.reverse() : out;
      }
      case "rev_parse":
        return { ref: a.ref, commit: m.resolve(a.ref) };
      case "show": {
        const c = m.commits.get(m.resolve(a.commit));
        const before = c.parents.length ? m.trees.get(c.parents[0]) : new Map();
        return { ...c, changes: m.changes(before, m.trees.get(c.id)) };
      }
      case "diff": {
        const [x, y] = a.b === undefined ? a.a.split("...") : [a.a, a.b];
        return m.changes(m.trees.get(m.resolve(x)), m.trees.get(m.resolve(y)));
      }
      case "cat": {
        const t = m.trees.get(m.resolve(a.commit));
        if (!t.has(a.path)) throw new Fail("ENOENT", `no path '${a.path}' in ${a.commit}`);
        const d = t.get(a.path);
        const off = a.offset ?? 0;
        const piece = d.subarray(off, a.length === undefined ? undefined : off + a.length);
        return { path: a.path, type: "file", size: d.length, content_base64: b64(piece) };
      }
      case "gc":
        this.progress(sock, id, verb);
        return { objects_deleted: 2, bytes_before: 100, bytes_after: 50 };
      case "verify":
        this.progress(sock, id, verb);
        return { ok: true, commits: m.commits.size, objects: 9, bytes: 99, problems: [] };
      case "export":
        this.progress(sock, id, verb);
        return { commit: m.resolve(a.commit), dir: a.dir, files: 1, bytes: 3 };
      case "import": {
        this.progress(sock, id, verb);
        const br = a.branch ?? "main";
        const c = m.makeCommit([m.branches.get(br)], a.message ?? "import", new Map([["imported", Buffer.from("x")]]));
        m.branches.set(br, c);
        return { commit: c, files: 1, dirs: 1, hashed: 1, stat_hits: 0, objects_added: 2, bytes_added: 1 };
      }
      case "mount": {
        if (m.mounts.has(a.mountpoint)) throw new Fail("EBUSY", `${a.mountpoint} is mounted already`);
        if (m.branches.has(a.ref)) {
          if (mountedBranches.has(a.ref)) throw new Fail("EBUSY", `branch '${a.ref}' is mounted`);
          m.mounts.set(a.mountpoint, a.ref);
          return { mountpoint: a.mountpoint, ref: a.ref, branch: a.ref, commit: m.branches.get(a.ref),
            read_only: Boolean(a.read_only), transport: "fake" };
        }
        return { mountpoint: a.mountpoint, commit: m.resolve(a.ref), read_only: true, transport: "fake" };
      }
      case "umount":
        if (!m.mounts.has(a.mountpoint)) throw new Fail("ENOENT", `${a.mountpoint} is not mounted`);
        m.mounts.delete(a.mountpoint);
        return { mountpoint: a.mountpoint };
      case "mounts":
        return [...m.mounts].sort().map(([mountpoint, branch]) =>
          ({ mountpoint, branch, commit: m.branches.get(branch), read_only: false, transport: "fake" }));
      case "commit": {
        const br = m.branchOf(a.target);
        const parents = a.amend ? m.commits.get(m.branches.get(br)).parents : [m.branches.get(br)];
        const c = m.makeCommit(parents, a.message, m.work.get(br));
        m.branches.set(br, c);
        return { commit: c, branch: br, parents };
      }
      case "status": {
        const br = m.branchOf(a.target);
        const st = { branch: br, changes: m.changes(m.trees.get(m.branches.get(br)), m.work.get(br)), conflicts: [] };
        if (m.merging.has(br)) {
          st.conflicts = [{ path: "f", kind: "content", base: null, ours: "1".repeat(32), theirs: "2".repeat(32),
            sides: [], resolved: false }];
          st.merging = { source: "y", theirs: m.merging.get(br), unresolved: 1 };
        }
        return st;
      }
      case "reset": {
        const br = m.branchOf(a.target);
        if (a.hard !== undefined) m.branches.set(br, m.resolve(a.hard));
        m.work.set(br, new Map(m.trees.get(m.branches.get(br))));
        return { branch: br, commit: m.branches.get(br) };
      }
      case "stats":
        return { policy: "16/8/8", commits: m.commits.size, branches: m.branches.size };
      case "read_file": {
        const w = m.work.get(m.branchOf(a.target));
        if (!w.has(a.path)) throw new Fail("ENOENT", `no such file '${a.path}'`);
        const d = w.get(a.path);
        const off = a.offset ?? 0;
        const piece = d.subarray(off, a.length === undefined ? undefined : off + a.length);
        return { path: a.path, size: d.length, content_base64: b64(piece) };
      }
      case "write_file": {
        const w = m.work.get(m.branchOf(a.target));
        if (("content" in a) === ("content_base64" in a)) {
          throw new Fail("EINVAL", "write_file: give exactly one of content and content_base64");
        }
        if (a.mode !== undefined && !(/^[0-7]+$/.test(a.mode) && parseInt(a.mode, 8) <= 0o7777)) {
          throw new Fail("EINVAL", `write_file: mode '${a.mode}' is not octal permission bits`);
        }
        const d = "content" in a ? Buffer.from(a.content, "utf8") : Buffer.from(a.content_base64, "base64");
        w.set(a.path, a.append ? Buffer.concat([w.get(a.path) ?? Buffer.alloc(0), d]) : d);
        return { path: a.path, size: w.get(a.path).length };
      }
      case "list_dir":
        return [...m.work.get(m.branchOf(a.target))].sort().map(([name, d]) =>
          ({ name, type: "file", mode: "0644", size: d.length }));
      case "remove_path": {
        const w = m.work.get(m.branchOf(a.target));
        if (!w.delete(a.path)) throw new Fail("ENOENT", `no such file '${a.path}'`);
        return { path: a.path };
      }
      case "merge": case "cherry_pick": case "revert":
        return this.merge(verb, a);
      default:
        throw new Fail("EIO", "boom");
    }
  }

  // Merges as far as the SDK's side needs: a fast-forward, a clean merge Commit, or a conflict on
  // every path both sides changed (stopped when the branch is mounted).
  merge(verb, a) {
    const m = this.model;
    const op = verb.replace("_", "-");
    const into = m.branchOf(a.into);
    const mp = [...m.mounts].find(([, b]) => b === into)?.[0];
    const mpField = mp ? { mountpoint: mp } : {};
    const union = (x, y) => new Map([...m.trees.get(x), ...m.trees.get(y)]);
    if (a.abort || a.continue) {
      if (!m.merging.has(into)) throw new Fail("ENOENT", `no merge in progress in ${into}`);
      const theirs = m.merging.get(into);
      m.merging.delete(into);
      if (a.abort) return { op, branch: into, aborted: true };
      const ours = m.branches.get(into);
      const c = m.makeCommit([ours, theirs], a.message ?? "merge", union(ours, theirs));
      m.branches.set(into, c);
      return { op, branch: into, ...mpField, commit: c, fast_forward: false, up_to_date: false, base: null, bases: [],
        ours, theirs, stopped: false, conflicts: [] };
    }
    const theirs = m.resolve(verb === "merge" ? a.source : a.commit);
    const ours = m.branches.get(into);
    const out = { op, branch: into, ...mpField, commit: null, fast_forward: false, up_to_date: false, base: ours,
      bases: [ours], ours, theirs, stopped: false, conflicts: [], from_a_newer_daemon: 1 };
    if (m.commits.get(theirs).parents[0] === ours && !a.no_ff) {
      m.branches.set(into, theirs);
      return { ...out, commit: theirs, fast_forward: true };
    }
    if (a.ff_only) throw new Fail("NOT_FAST_FORWARD", `${into} cannot fast-forward to ${a.source}`);
    const t = m.trees.get(theirs), o = m.trees.get(ours);
    const both = [...t.keys()].filter((p) => o.has(p) && !o.get(p).equals(t.get(p))).sort();
    if (both.length && !["ours", "theirs"].includes(a.strategy_option)) {
      const conflicts = both.map((p) => ({ path: p, kind: "content", base: null, ours: md5(o.get(p)),
        theirs: md5(t.get(p)), sides: [] }));
      if (mp) m.merging.set(into, theirs);
      throw new Fail("CONFLICT", `${op} into ${into} has ${both.length} conflict(s)`,
        { ...out, stopped: Boolean(mp), conflicts });
    }
    const c = m.makeCommit([ours, theirs], a.message ?? "merge", union(ours, theirs));
    m.branches.set(into, c);
    return { ...out, commit: c };
  }
}

// As a program: behave like `layerfsd --store S --idle N`.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const arg = (name) => process.argv[process.argv.indexOf(name) + 1];
  const store = arg("--store");
  const idle = Number(arg("--idle"));
  if (process.argv.includes("--serve")) {
    const d = await new FakeDaemon(store).listen();
    writeFileSync(join(store, "layerfsd.pid"), `${process.pid}\n`);
    setTimeout(() => d.stop().then(() => process.exit(0)), idle * 1000);
  } else {
    appendFileSync(join(store, "fake-starts"), process.argv.slice(2).filter((a) => a !== store).join(" ") + "\n");
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), "--serve", ...process.argv.slice(2)],
      { detached: true, stdio: "ignore" });
    child.unref();
    for (let i = 0; i < 500; i++) {
      const ok = await new Promise((r) => {
        const s = createConnection({ path: join(store, "control.sock") });
        s.once("connect", () => { s.destroy(); r(true); });
        s.once("error", () => r(false));
      });
      if (ok) process.exit(0);
      await new Promise((r) => setTimeout(r, 20));
    }
    process.stderr.write("layerfsd: fake did not start\n");
    process.exit(1);
  }
}
