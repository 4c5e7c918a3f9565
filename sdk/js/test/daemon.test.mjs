// The TypeScript SDK against the real layerfsd and real FUSE mounts ($LAYERFS names the built
// CLI; layerfsd is found beside it). Each test has its own Store; its daemon and mounts end with it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, unlinkSync,
  writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes, createHash } from "node:crypto";
import { fileURLToPath } from "node:url";

import * as layerfs from "../dist/index.js";
import { Store } from "../dist/index.js";
import { ARGS, REQUIRED } from "./fake-server.mjs";

const ID = /^[0-9a-f]{32}$/;
const LAYERFS = process.env.LAYERFS;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function need() {
  assert.ok(LAYERFS && existsSync(LAYERFS), "daemon.test.mjs needs $LAYERFS: the built layerfs program (ctest sets it)");
}

function daemonPid(store) {
  try {
    const pid = Number(readFileSync(join(store, "layerfsd.pid"), "utf8").trim());
    process.kill(pid, 0);
    return pid;
  } catch {
    return null;
  }
}

function isMounted(dir) {
  return readFileSync("/proc/self/mounts", "utf8").split("\n").some((l) => l.split(" ")[1] === dir);
}

// Each test: a temporary root with the Store in it; at the end every FUSE mount under the root
// goes, and the Store's daemon is ended by its pid file.
async function withRoot(fn) {
  need();
  const root = mkdtempSync(join(tmpdir(), "layerfs-js-"));
  const store = join(root, "store");
  try {
    await fn(root, store);
  } finally {
    for (const line of readFileSync("/proc/self/mounts", "utf8").split("\n")) {
      const [, mp, type] = line.split(" ");
      if (type && type.startsWith("fuse") && mp.startsWith(root + "/")) spawnSync("fusermount3", ["-u", "-z", mp]);
    }
    const pid = daemonPid(store);
    if (pid) {
      process.kill(pid, "SIGTERM");
      for (let i = 0; i < 500 && daemonPid(store) === pid; i++) await sleep(20);
      if (daemonPid(store) === pid) process.kill(pid, "SIGKILL");
    }
    rmSync(root, { recursive: true, force: true });
  }
}

test("init, open and the verbs on a real mount", () => withRoot(async (root, storePath) => {
  const s = await Store.init(storePath);
  const [main] = await s.branches();
  assert.equal(main.name, "main");
  assert.match(main.commit, ID);
  assert.deepEqual(await s.fork("try", "main"), { name: "try", commit: main.commit });
  const mp = join(root, "mp");
  mkdirSync(mp);
  const m = await s.mount("try", mp);
  assert.equal(m.mountpoint, mp);
  assert.equal(m.branch, "try");
  assert.equal(m.read_only, false);
  assert.ok(isMounted(mp));
  assert.deepEqual((await s.mounts()).map((x) => x.mountpoint), [mp]);

  const payload = randomBytes(300_000);
  mkdirSync(join(mp, "src"));
  writeFileSync(join(mp, "src", "a.bin"), payload);
  writeFileSync(join(mp, "notes.txt"), "first\n");
  const st = await s.status(mp);
  assert.equal(st.branch, "try");
  const seen = new Set(st.changes.map((c) => `${c.change} ${c.path}`));
  assert.ok(seen.has("A src/a.bin") && seen.has("A notes.txt"), [...seen].join(","));
  const livePatch = Object.fromEntries((await s.status(mp, { patch: true })).changes.map((c) => [c.path, c.patch]));
  assert.equal(livePatch["notes.txt"], "diff --git a/notes.txt b/notes.txt\nnew file mode 100644\n" +
    "index 0000000..9c59e24\n--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+first\n"); // git hash-object's id

  // diff(a) without b: from a to HEAD's working tree (the branch mounted at the working
  // directory, else main's), uncommitted changes included, as `git diff A`.
  assert.deepEqual(await s.diff(main.commit), []); // outside any mount: main's Workspace, unchanged
  const cwd = process.cwd();
  process.chdir(join(mp, "src"));
  try {
    assert.deepEqual(new Set((await s.diff(main.commit)).map((c) => `${c.change} ${c.path}`)),
      new Set(st.changes.map((c) => `${c.change} ${c.path}`)));
    assert.deepEqual(Object.fromEntries((await s.diff("HEAD", undefined, { patch: true })).map((c) => [c.path, c.patch])),
      livePatch);
  } finally {
    process.chdir(cwd);
  }

  const c1 = await s.commit(mp, "two files");
  assert.equal(await s.revParse("try"), c1);
  assert.equal(await s.revParse(c1.slice(0, 8)), c1);
  await assert.rejects(s.revParse("nosuch"), layerfs.NotFound);
  assert.match(c1, ID);
  assert.deepEqual((await s.status("try")).changes, []);
  const log = await s.log("try");
  assert.deepEqual(log.map((c) => c.id), [c1, main.commit]);
  assert.deepEqual(log[0].parents, [main.commit]);
  assert.equal(log[0].message, "two files");
  assert.ok(Math.abs(log[0].time - Date.now() / 1000) < 3600);
  // every branch, oldest first, each with what it changed (git log --all --reverse --name-status)
  const every = await s.log("try", { all: true, changes: true, reverse: true });
  assert.deepEqual(every.map((c) => c.id), [main.commit, c1]);
  assert.ok(every[1].changes.length > 0);
  assert.deepEqual(every[1].changes.map((c) => [c.change, c.path]),
    (await s.show(c1)).changes.map((c) => [c.change, c.path]));
  assert.equal(log[0].changes, undefined);
  assert.deepEqual((await s.log("try", { grep: "^TWO", ignoreCase: true })).map((c) => c.id), [c1]);
  assert.deepEqual(await s.log("try", { until: "2000-01-01" }), []);
  await assert.rejects(s.log("try", { since: "sometime" }), layerfs.InvalidArgument);

  writeFileSync(join(mp, "notes.txt"), "second\n");
  const c2Part = await s.commit(mp, "edit, in part");
  unlinkSync(join(mp, "src", "a.bin"));
  // amend: the rest of the edit takes the head's place (Git's commit --amend)
  const c2 = await s.commit(mp, "edit", { amend: true });
  assert.notEqual(c2, c2Part);
  assert.deepEqual((await s.show(c2)).parents, [c1]);
  assert.equal(await s.revParse("try"), c2);
  // restore: paths back as the head (or a source Commit) has them, in place.
  writeFileSync(join(mp, "notes.txt"), "scribble\n");
  assert.deepEqual((await s.restore(mp, ["notes.txt"])).map((c) => `${c.change} ${c.path}`), ["M notes.txt"]);
  assert.equal(readFileSync(join(mp, "notes.txt"), "utf8"), "second\n");
  assert.deepEqual((await s.status(mp)).changes, []);
  await s.restore(mp, ["src/a.bin"], { source: c1 });
  assert.deepEqual(readFileSync(join(mp, "src", "a.bin")), payload);
  assert.deepEqual((await s.status(mp)).changes.map((c) => `${c.change} ${c.path}`), ["A src/a.bin"]);
  await assert.rejects(s.restore(mp, ["nosuch"]), layerfs.NotFound);
  await s.reset(mp);
  const changes = Object.fromEntries((await s.diff(c1, c2)).map((c) => [c.path, c]));
  // A...B: from the merge base of A and B to B.
  assert.deepEqual((await s.diff(`${main.commit}...${c2}`)).map((c) => c.path),
    (await s.diff(main.commit, c2)).map((c) => c.path));
  assert.deepEqual(await s.diff(`${c2}...${c1}`), []);
  await assert.rejects(s.diff(`${c1}...${c2}`, c2), layerfs.InvalidArgument);
  assert.equal(changes["notes.txt"].change, "M");
  assert.equal(changes["src/a.bin"].change, "D");
  assert.equal(changes["src/a.bin"].before.size, payload.length);
  assert.deepEqual((await s.show(c2)).changes.map((c) => c.path).sort(), Object.keys(changes).sort());
  // With patch: Git's unified diff of each change.
  const patched = Object.fromEntries((await s.diff(c1, c2, { patch: true })).map((c) => [c.path, c.patch]));
  assert.ok(patched["notes.txt"].startsWith("diff --git a/notes.txt b/notes.txt\n") &&
    patched["notes.txt"].includes("\n+second\n"), JSON.stringify(patched));
  assert.ok(patched["src/a.bin"].includes("deleted file mode 100644\n"), JSON.stringify(patched));
  assert.deepEqual(Object.fromEntries((await s.show(c2, { patch: true })).changes.map((c) => [c.path, c.patch])), patched);
  // paths: only the changes at or below them; log, only the Commits that changed them.
  assert.deepEqual((await s.diff(c1, c2, { paths: ["src"] })).map((c) => c.path), ["src/a.bin"]);
  assert.deepEqual((await s.log("try", { paths: ["src/a.bin"] })).map((c) => c.id), [c2, c1]);
  assert.ok((await s.cat(c1, "src/a.bin")).equals(payload));

  const out = join(root, "export");
  const ex = await s.export(c1, out);
  assert.equal(ex.commit, c1);
  assert.ok(readFileSync(join(out, "src", "a.bin")).equals(payload));

  assert.equal(await s.writeFile("try", "api.txt", "from the sdk\n"), 13);
  assert.equal(readFileSync(join(mp, "api.txt"), "utf8"), "from the sdk\n");
  writeFileSync(join(mp, "shell.txt"), "written by the shell");
  assert.equal((await s.readFile("try", "shell.txt")).toString(), "written by the shell");
  assert.equal((await s.readFile(mp, "shell.txt", { offset: 8, length: 5 })).toString(), "by th");
  const names = Object.fromEntries((await s.listDir("try")).map((e) => [e.name, e]));
  assert.equal(names["shell.txt"].size, 20);
  assert.equal(names["shell.txt"].mode, "0644");
  assert.deepEqual([names.src.type, names.src.mode], ["dir", "0755"]);
  // Permission bits: a number or octal digits, as the protocol's string.
  await s.writeFile("try", "bin/run.sh", "#!/bin/sh\n", { mode: 0o755 });
  assert.equal(statSync(join(mp, "bin", "run.sh")).mode & 0o7777, 0o755);
  await s.writeFile("try", "bin/secret", "s", { mode: "0600" });
  assert.equal(statSync(join(mp, "bin", "secret")).mode & 0o7777, 0o600);
  assert.deepEqual((await s.listDir("try", "bin")).map((e) => [e.name, e.mode]), [["run.sh", "0755"], ["secret", "0600"]]);
  await assert.rejects(s.writeFile("try", "bin/x", "", { mode: "rwx" }), layerfs.InvalidArgument);
  symlinkSync("notes.txt", join(mp, "link"));
  assert.equal((await s.listDir("try")).find((e) => e.name === "link").target, "notes.txt");
  unlinkSync(join(mp, "link"));
  await s.removePath("try", "bin", { recursive: true });
  await s.removePath("try", "shell.txt");
  assert.equal(existsSync(join(mp, "shell.txt")), false);
  await s.removePath("try", "src", { recursive: true });
  assert.equal(existsSync(join(mp, "src")), false);

  assert.equal((await s.reset(mp)).commit, c2);
  assert.equal(existsSync(join(mp, "api.txt")), false);
  assert.equal((await s.reset("try", { hard: c1 })).commit, c1);
  assert.equal(readFileSync(join(mp, "notes.txt"), "utf8"), "first\n");
  await s.umount(mp);
  assert.equal(isMounted(mp), false);
  assert.deepEqual(await s.mounts(), []);

  const tree = join(root, "tree");
  mkdirSync(join(tree, "d"), { recursive: true });
  writeFileSync(join(tree, "d", "x"), "x".repeat(1000));
  const imp = await s.importDir(tree, { message: "imported", jobs: 2 });
  assert.match(imp.commit, ID);
  assert.equal(imp.files, 1);
  assert.equal((await s.log("main", { maxCount: 1 }))[0].message, "imported");
  const stats = await s.stats();
  assert.ok(stats.commits >= 4);
  const v = await s.verify();
  assert.equal(v.ok, true);
  assert.deepEqual(v.problems, []);
  await s.branchDelete("try");
  assert.deepEqual((await s.branches()).map((b) => b.name), ["main"]);
  const g = await s.gc();
  assert.ok(g.objects_deleted > 0);
  s.close();
}));

test("errors carry codes", () => withRoot(async (root, storePath) => {
  const s = await Store.init(storePath);
  await assert.rejects(s.log("no-such-branch"), (e) => e instanceof layerfs.NotFound && e.code === "ENOENT" &&
    e.errno === 2 && e.detail.includes("no-such-branch"));
  await assert.rejects(s.cat("main", "absent.txt"), layerfs.NotFound);
  await s.fork("b");
  await assert.rejects(s.fork("b"), (e) => e instanceof layerfs.Exists && e.code === "EEXIST" && e.errno === 17);
  const mp = join(root, "mp");
  mkdirSync(mp);
  await s.mount("b", mp);
  await assert.rejects(s.branchDelete("b"), (e) => e instanceof layerfs.Busy && e.code === "EBUSY" && e.errno === 16);
  const mp2 = join(root, "mp2");
  mkdirSync(mp2);
  await assert.rejects(s.mount("b", mp2), layerfs.Busy);
  await assert.rejects(s.request("log", { no_such_argument: 1 }), layerfs.InvalidArgument);
  await assert.rejects(s.request("log", { max_count: "ten" }), layerfs.InvalidArgument);
  await s.umount(mp);
  assert.deepEqual((await s.branches()).map((b) => b.name), ["b", "main"]);
  s.close();
  // init's failures come by code from `layerfs init --json`.
  await assert.rejects(Store.init(storePath), (e) => e instanceof layerfs.Exists && e.errno === 17 &&
    e.detail.includes(storePath));
  await assert.rejects(Store.init(join(root, "other"), { policy: "1/2" }), layerfs.InvalidArgument);
  await assert.rejects(Store.init(join(root, "no", "such", "parent")), layerfs.NotFound);
  await assert.rejects(Store.init(join(root, "other"), { fromDir: join(root, "no-such-tree") }), layerfs.NotFound);
  assert.equal(existsSync(join(root, "other")), false);
}));

test("a Store held by another process is Busy", () => withRoot(async (root, storePath) => {
  // The daemon cannot start while another process holds the Store's database lock (as RocksDB
  // takes it: an fcntl lock on db/LOCK); layerfsd --json says EBUSY, and so does the SDK.
  execFileSync(LAYERFS, ["init", storePath]);
  const holder = spawn("python3", ["-c", "import fcntl, sys; f = open(sys.argv[1], 'r+'); " +
    "fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB); print('held', flush=True); sys.stdin.read()",
  join(storePath, "db", "LOCK")], { stdio: ["pipe", "pipe", "inherit"] });
  try {
    await new Promise((resolve, reject) => {
      let said = "";
      holder.stdout.on("data", (d) => {
        said += d.toString();
        if (said === "held\n") resolve();
        else if (!"held\n".startsWith(said)) reject(new Error(`lock holder said ${JSON.stringify(said)}`));
      });
      holder.once("exit", (code) => reject(new Error(`lock holder exited ${code}`)));
    });
    await assert.rejects(Store.open(storePath), (e) => e instanceof layerfs.Busy && e.code === "EBUSY" &&
      e.errno === 16 && e.detail.startsWith(`cannot start layerfsd for ${storePath}: `));
  } finally {
    holder.stdin.end();
    await new Promise((r) => (holder.exitCode !== null ? r() : holder.once("exit", r)));
  }
  const s = await Store.open(storePath);
  assert.equal((await s.branches())[0].name, "main");
  s.close();
}));

// Every verb the daemon serves has its method (the protocol's name on the left).
const METHODS = {
  branches: "branches", fork: "fork", branch_delete: "branchDelete", log: "log", rev_parse: "revParse", show: "show",
  diff: "diff", cat: "cat",
  export: "export", import: "importDir", mount: "mount", umount: "umount", mounts: "mounts", commit: "commit",
  status: "status", reset: "reset", restore: "restore", stats: "stats", verify: "verify", gc: "gc", read_file: "readFile",
  write_file: "writeFile", list_dir: "listDir", remove_path: "removePath", merge: "merge", cherry_pick: "cherryPick",
  revert: "revert", remote_list: "remoteList", remote_add: "remoteAdd", remote_remove: "remoteRemove", push: "push",
  fetch: "fetch", pull: "pull", clone: "clone",
};

// The daemon's verbs with their argument types, from the verb table itself: `layerfs mcp`
// publishes every protocol verb as a tool whose input schema is made from its argument specs.
function protocolVerbs(store) {
  const msgs = [
    { jsonrpc: "2.0", id: 1, method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } },
    { jsonrpc: "2.0", method: "notifications/initialized" },
    { jsonrpc: "2.0", id: 2, method: "tools/list" },
  ];
  const out = execFileSync(LAYERFS, ["--store", store, "mcp"], { input: msgs.map((m) => JSON.stringify(m) + "\n").join("") });
  const lines = out.toString().trim().split("\n");
  const tools = JSON.parse(lines[lines.length - 1]).result.tools;
  return Object.fromEntries(tools.map((t) => [t.name, {
    args: Object.fromEntries(Object.entries(t.inputSchema.properties).map(([k, v]) => [k, v.type])),
    required: [...(t.inputSchema.required ?? [])].sort(),
  }]));
}

test("every verb of the daemon is covered, documented, and the fake speaks its arguments", () =>
  withRoot(async (root, storePath) => {
    execFileSync(LAYERFS, ["init", storePath]);
    const verbs = protocolVerbs(storePath);
    assert.deepEqual(Object.keys(verbs).sort(), Object.keys(METHODS).sort(),
      "the daemon serves verbs the SDK does not cover (or the reverse)");
    // Each method is a function with a doc comment in the shipped declarations.
    const dts = readFileSync(fileURLToPath(new URL("../dist/store.d.ts", import.meta.url)), "utf8");
    for (const m of [...Object.values(METHODS), "exec", "mergeContinue", "mergeAbort", "request", "close"]) {
      assert.equal(typeof (Store.prototype[m] ?? Store[m]), "function", m);
      assert.match(dts, new RegExp(`\\*/\\s*(static\\s+)?${m}\\(`), `Store.${m} has no doc comment in store.d.ts`);
    }
    const types = { string: "string", integer: "number", boolean: "boolean", array: "array" };
    for (const [verb, spec] of Object.entries(verbs)) {
      assert.deepEqual(ARGS[verb], Object.fromEntries(Object.entries(spec.args).map(([k, t]) => [k, types[t]])), verb);
      assert.deepEqual([...(REQUIRED[verb] ?? [])].sort(), spec.required, verb);
    }
  }));

test("auto-start, and the daemon's idle exit", () => withRoot(async (root, storePath) => {
  execFileSync(LAYERFS, ["init", storePath]);
  assert.equal(daemonPid(storePath), null);
  const s = await Store.open(storePath, { idle: 1 });
  const pid = daemonPid(storePath);
  assert.ok(pid);
  assert.equal((await s.branches())[0].name, "main");
  execFileSync(LAYERFS, ["--store", storePath, "fork", "cli-made"]);
  assert.ok((await s.branches()).some((b) => b.name === "cli-made"));
  s.close();
  for (let i = 0; i < 600 && daemonPid(storePath) !== null; i++) await sleep(50);
  assert.equal(daemonPid(storePath), null);
  const s2 = await Store.open(storePath);
  assert.ok((await s2.branches()).some((b) => b.name === "cli-made"));
  assert.notEqual(daemonPid(storePath), pid);
  s2.close();
}));

test("exec: exit status, signals, output, stdin, commit, fork of a commit", () => withRoot(async (root, storePath) => {
  const s = await Store.init(storePath);
  await s.fork("work");
  const r = await s.exec("work", "echo built > out.txt; echo to-stdout; echo to-stderr >&2; exit 3",
    { commit: "exec run", capture: true });
  assert.deepEqual([r.exit_code, r.signal, r.stdout.toString(), r.stderr.toString()],
    [3, null, "to-stdout\n", "to-stderr\n"]);
  assert.deepEqual([r.branch, r.mounted, r.forked, r.isolated], ["work", true, false, false]);
  assert.match(r.commit, ID);
  assert.equal((await s.cat(r.commit, "out.txt")).toString(), "built\n");
  assert.equal((await s.show(r.commit)).message, "exec run");
  assert.deepEqual(await s.mounts(), []);
  assert.equal(existsSync(r.mountpoint), false);
  const r2 = await s.exec("work", ["sh", "-c", "cat > in.txt; pwd; echo $PWD"], { input: "fed", capture: true });
  assert.equal(r2.commit, null);
  assert.deepEqual(r2.stdout.toString().split("\n").slice(0, 2), [r2.mountpoint, r2.mountpoint]);
  assert.equal((await s.readFile("work", "in.txt")).toString(), "fed");
  const r2b = await s.exec("work", ["touch", "t"], { commit: true });
  assert.equal((await s.show(r2b.commit)).message, "exec: touch t");
  // A signal: 128 + N and its name; what the command left is still committed.
  const r3 = await s.exec("work", "echo partial > p.txt; kill -TERM $$", { commit: true });
  assert.deepEqual([r3.exit_code, r3.signal], [143, "TERM"]);
  assert.equal((await s.cat(r3.commit, "p.txt")).toString(), "partial\n");
  const r3b = await s.exec("work", ["sleep", "30"], { timeout: 500 });
  assert.deepEqual([r3b.exit_code, r3b.signal], [137, "KILL"]);
  // A commit id forks first, into exec-ID12, then exec-ID12-2.
  const r4 = await s.exec(r.commit, "test -f out.txt && echo x > y", { commit: "on a fork" });
  assert.deepEqual([r4.forked, r4.branch, r4.exit_code], [true, `exec-${r.commit.slice(0, 12)}`, 0]);
  assert.deepEqual((await s.log(r4.branch, { maxCount: 1 }))[0].parents, [r.commit]);
  const r4b = await s.exec(r.commit.slice(0, 10), "true");
  assert.equal(r4b.branch, `exec-${r.commit.slice(0, 12)}-2`);
  // A mounted branch runs in its mount and stays mounted; another mountpoint is Busy.
  const mp = join(root, "mp");
  mkdirSync(mp);
  await s.mount("work", mp);
  const r5 = await s.exec("work", "touch here");
  assert.deepEqual([r5.mountpoint, r5.mounted], [mp, false]);
  assert.ok(existsSync(join(mp, "here")) && isMounted(mp));
  await assert.rejects(s.exec("work", "true", { mountpoint: join(root, "elsewhere") }), layerfs.Busy);
  await s.umount(mp);
  const there = join(root, "given", "mp");
  const r6 = await s.exec("work", "pwd", { mountpoint: there, capture: true });
  assert.deepEqual([r6.mountpoint, r6.stdout.toString(), existsSync(there)], [there, `${there}\n`, false]);
  await assert.rejects(s.exec("nosuch", "true"), layerfs.NotFound);
  await assert.rejects(s.exec("work", ["/no/such/program"]), layerfs.NotFound);
  await assert.rejects(s.exec("work", "true", { noNetwork: true }), layerfs.InvalidArgument);
  assert.deepEqual(await s.mounts(), []);
  s.close();
}));

test("exec isolated: the Workspace at /workspace is the only writable place (tried)", () =>
  withRoot(async (root, storePath) => {
    const outside = join(root, "outside");
    mkdirSync(outside);
    const s = await Store.init(storePath);
    await s.fork("iso");
    const r = await s.exec("iso", "pwd; echo inside > made.txt", { isolate: true, commit: true, capture: true });
    assert.deepEqual([r.isolated, r.exit_code, r.stdout.toString()], [true, 0, "/workspace\n"]);
    assert.equal((await s.cat(r.commit, "made.txt")).toString(), "inside\n");
    for (const target of ["/etc/layerfs-escape", "/root/layerfs-escape", "/var/tmp/layerfs-escape",
      join(outside, "escape"), join(storePath, "escape")]) {
      const p = await s.exec("iso", `echo x > '${target}'`, { isolate: true, capture: true });
      assert.notEqual(p.exit_code, 0, `wrote ${target} from the sandbox`);
      assert.equal(existsSync(target), false);
    }
    const hidden = await s.exec("iso", `ls -A '${storePath}' | wc -l`, { isolate: true, capture: true });
    assert.equal(hidden.stdout.toString(), "0\n");
    // /proc/net is the command's own network namespace (/sys/class/net is the host's, bound read-only).
    const net = await s.exec("iso", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '",
      { isolate: true, noNetwork: true, capture: true });
    assert.equal(net.stdout.toString(), "lo\n");
    s.close();
  }));

test("merge, cherry-pick and revert on real mounts", () => withRoot(async (root, storePath) => {
  const s = await Store.init(storePath);
  await s.fork("x");
  await s.fork("y");
  await s.writeFile("y", "f.txt", "from y\n");
  const y1 = await s.commit("y", "y1");
  const ff = await s.merge("y", { into: "x", ffOnly: true });
  assert.deepEqual([ff.op, ff.fast_forward, ff.commit, ff.branch], ["merge", true, y1, "x"]);
  await s.writeFile("x", "f.txt", "from x\n");
  const x2 = await s.commit("x", "x2");
  await s.writeFile("y", "f.txt", "from y again\n");
  await s.writeFile("y", "other.txt", "y only\n");
  const y2 = await s.commit("y", "y2");
  await assert.rejects(s.merge("y", { into: "x", ffOnly: true }), layerfs.NotFastForward);
  await assert.rejects(s.merge("y", { into: "x" }), (e) => {
    assert.ok(e instanceof layerfs.Conflict);
    assert.deepEqual([e.result.commit, e.result.stopped, e.result.ours, e.result.theirs, e.result.base],
      [null, false, x2, y2, y1]);
    assert.deepEqual(e.result.conflicts.map((c) => [c.path, c.kind]), [["f.txt", "content"]]);
    return true;
  });
  const mp = join(root, "mx");
  mkdirSync(mp);
  await s.mount("x", mp);
  await assert.rejects(s.merge("y", { into: mp }), (e) => e.result.stopped === true && e.result.mountpoint === mp);
  assert.equal(readFileSync(join(mp, "other.txt"), "utf8"), "y only\n");
  const st = await s.status(mp);
  assert.deepEqual([st.merging.source, st.merging.theirs, st.merging.unresolved], ["y", y2, 1]);
  assert.deepEqual(st.conflicts.map((c) => [c.path, c.resolved]), [["f.txt", false]]);
  const ab = await s.mergeAbort({ into: mp });
  assert.deepEqual([ab.aborted, ab.branch, ab.op], [true, "x", "merge"]);
  assert.equal(readFileSync(join(mp, "f.txt"), "utf8"), "from x\n");
  assert.equal(existsSync(join(mp, "other.txt")), false);
  await assert.rejects(s.merge("y", { into: "x" }), layerfs.Conflict);
  writeFileSync(join(mp, "f.txt"), "both\n");
  const done = await s.mergeContinue({ into: mp, message: "merged by hand" });
  const head = (await s.log("x", { maxCount: 1 }))[0];
  assert.deepEqual([head.id, head.parents, head.message], [done.commit, [x2, y2], "merged by hand"]);
  assert.equal((await s.cat(done.commit, "f.txt")).toString(), "both\n");
  await s.umount(mp);
  await s.fork("z", x2);
  const t = await s.merge("y", { into: "z", strategyOption: "theirs" });
  assert.equal((await s.cat(t.commit, "f.txt")).toString(), "from y again\n");
  await s.fork("p", x2);
  await s.writeFile("y", "new.txt", "picked\n");
  const y3 = await s.commit("y", "y3");
  const pk = await s.cherryPick(y3, { into: "p" });
  assert.equal(pk.op, "cherry-pick");
  assert.equal((await s.cat(pk.commit, "new.txt")).toString(), "picked\n");
  const rv = await s.revert(pk.commit, { into: "p" });
  assert.equal(rv.op, "revert");
  assert.ok(!(await s.diff(x2, rv.commit)).some((c) => c.path === "new.txt"));
  s.close();
}));

test("parallel forks, mounts and commits", () => withRoot(async (root, storePath) => {
  const s = await Store.init(storePath);
  const base = (await s.log())[0].id;
  const names = ["p0", "p1", "p2", "p3"];
  await Promise.all(names.map((n) => s.fork(n, base)));
  const mps = names.map((n) => join(root, n));
  mps.forEach((p) => mkdirSync(p));
  await Promise.all(names.map((n, i) => s.mount(n, mps[i])));
  mps.forEach((p, i) => writeFileSync(join(p, "f"), Buffer.alloc(1000 + i, i)));
  const ids = await Promise.all(mps.map((p, i) => s.commit(p, `c${i}`)));
  assert.equal(new Set(ids).size, 4);
  for (const [i, id] of ids.entries()) {
    assert.ok((await s.cat(id, "f")).equals(Buffer.alloc(1000 + i, i)));
  }
  await Promise.all(mps.map((p) => s.umount(p)));
  assert.deepEqual(await s.mounts(), []);
  s.close();
}));

test("progress events of long work reach the callback", () => withRoot(async (root, storePath) => {
  const tree = join(root, "tree");
  mkdirSync(tree);
  for (let i = 0; i < 3000; i++) {
    writeFileSync(join(tree, `f${String(i).padStart(5, "0")}`), createHash("sha256").update(String(i)).digest());
  }
  const seen = [];
  const s = await Store.init(storePath);
  const imp = await s.importDir(tree, { message: "many", progress: (p) => seen.push(p) });
  assert.equal(imp.files, 3000);
  assert.equal((await s.verify(undefined, { progress: (p) => seen.push(p) })).ok, true);
  s.close();
  assert.ok(seen.length > 0, "no progress event for an import of 3000 files and a verify");
  assert.ok(seen.every((p) => typeof p.phase === "string" && p.phase.length > 0));
}));

test("remotes over file:// URLs: push, clone, fetch, pull, a refused push", () => withRoot(async (root, storePath) => {
  const url = `file://${join(root, "remote")}`;
  const other = join(root, "other");
  const a = await Store.init(storePath);
  let b;
  try {
    await a.writeFile("main", "f.txt", "one\n");
    const c1 = await a.commit("main", "one");
    assert.deepEqual(await a.remoteAdd("origin", url), { name: "origin", url, lazy: false, branches: {} });
    await assert.rejects(a.remoteAdd("origin", url), layerfs.Exists);
    await assert.rejects(a.remoteAdd("x", "ftp://h/p"), layerfs.InvalidArgument);
    await assert.rejects(a.push("nosuch"), layerfs.NotFound);
    const p = await a.push("origin", ["main"]);
    assert.deepEqual(p.refs.map((r) => [r.branch, r.status, r.new]), [["main", "created", c1]]);
    assert.deepEqual(await a.remoteList(), [{ name: "origin", url, lazy: false, branches: { main: c1 } }]);
    b = await Store.clone(url, other);
    assert.equal((await b.cat("main", "f.txt")).toString(), "one\n");
    await b.writeFile("main", "f.txt", "two\n");
    const c2 = await b.commit("main", "two");
    assert.equal((await b.push()).refs[0].status, "fast-forward"); // origin, its only remote
    await a.writeFile("main", "g.txt", "a only\n");
    await a.commit("main", "a's own");
    await assert.rejects(a.push("origin", ["main"]), layerfs.NotFastForward);
    const f = await a.fetch(); // origin
    assert.deepEqual(f.refs.map((r) => [r.branch, r.new]), [["main", c2]]);
    const pl = await a.pull("origin", "main");
    assert.equal(pl.status, "merged");
    const [head] = await a.log("main", { maxCount: 1 });
    assert.equal(head.id, pl.new);
    assert.ok(head.parents.includes(c2));
    assert.equal((await a.cat("main", "f.txt")).toString(), "two\n");
    assert.equal((await a.push("origin", ["main"])).refs[0].status, "fast-forward");
    assert.equal((await a.remoteRemove("origin")).name, "origin");
    assert.deepEqual(await a.remoteList(), []);
    await assert.rejects(Store.clone(url, storePath), layerfs.Exists);
  } finally {
    a.close();
    if (b) b.close();
    const pid = daemonPid(other);
    if (pid) {
      process.kill(pid, "SIGTERM");
      for (let i = 0; i < 500 && daemonPid(other) === pid; i++) await sleep(20);
    }
  }
}));

test("names that are not UTF-8 come back as \\udcXX and go out again", () => withRoot(async (root, storePath) => {
  const s = await Store.init(storePath);
  const mp = join(root, "mp");
  mkdirSync(mp);
  await s.mount("main", mp);
  const raw = Buffer.from([0x62, 0x61, 0x64, 0xff, 0x2e, 0x74, 0x78, 0x74]); // "bad\xff.txt"
  writeFileSync(Buffer.concat([Buffer.from(mp + "/"), raw]), "bytes\n");
  const [e] = await s.listDir("main", "");
  assert.equal(e.name, "bad\udcff.txt");
  assert.deepEqual(layerfs.nameToBytes(e.name), raw);
  assert.equal(layerfs.nameFromBytes(raw), e.name);
  assert.equal((await s.readFile("main", e.name)).toString(), "bytes\n");
  await s.writeFile("main", e.name + "2", "again\n");
  assert.equal(readFileSync(Buffer.concat([Buffer.from(mp + "/"), raw, Buffer.from("2")]), "utf8"), "again\n");
  const st = await s.status("main");
  assert.deepEqual(st.changes.map((c) => c.path).sort(), ["bad\udcff.txt", "bad\udcff.txt2"]);
}));
