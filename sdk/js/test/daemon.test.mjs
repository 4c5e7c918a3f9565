// The TypeScript SDK against the real layerfsd and real FUSE mounts ($LAYERFS names the built
// CLI; layerfsd is found beside it). Each test has its own Store; its daemon and mounts end with it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes, createHash } from "node:crypto";

import * as layerfs from "../dist/index.js";
import { Store } from "../dist/index.js";

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

  const c1 = await s.commit(mp, "two files");
  assert.match(c1, ID);
  assert.deepEqual((await s.status("try")).changes, []);
  const log = await s.log("try");
  assert.deepEqual(log.map((c) => c.id), [c1, main.commit]);
  assert.deepEqual(log[0].parents, [main.commit]);
  assert.equal(log[0].message, "two files");
  assert.ok(Math.abs(log[0].time - Date.now() / 1000) < 3600);

  writeFileSync(join(mp, "notes.txt"), "second\n");
  unlinkSync(join(mp, "src", "a.bin"));
  const c2 = await s.commit(mp, "edit");
  const changes = Object.fromEntries((await s.diff(c1, c2)).map((c) => [c.path, c]));
  assert.equal(changes["notes.txt"].change, "M");
  assert.equal(changes["src/a.bin"].change, "D");
  assert.equal(changes["src/a.bin"].before.size, payload.length);
  assert.deepEqual((await s.show(c2)).changes.map((c) => c.path).sort(), Object.keys(changes).sort());
  assert.ok((await s.cat(c1, "src/a.bin")).equals(payload));

  const out = join(root, "export");
  const ex = await s.export(c1, out);
  assert.equal(ex.commit, c1);
  assert.ok(readFileSync(join(out, "src", "a.bin")).equals(payload));

  assert.equal(await s.writeFile("try", "api.txt", "from the sdk\n"), 13);
  assert.equal(readFileSync(join(mp, "api.txt"), "utf8"), "from the sdk\n");
  writeFileSync(join(mp, "shell.txt"), "written by the shell");
  assert.equal((await s.readFile("try", "shell.txt")).toString(), "written by the shell");
  assert.equal((await s.readFile(mp, "shell.txt", { offset: 11, length: 5 })).toString(), "by th");
  const names = Object.fromEntries((await s.listDir("try")).map((e) => [e.name, e]));
  assert.equal(names["shell.txt"].size, 20);
  assert.ok(names.src);
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
  const imp = await s.importDir(tree, { message: "imported" });
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
  await assert.rejects(Store.init(storePath), layerfs.Exists);
  await assert.rejects(Store.init(join(root, "other"), { policy: "1/2" }), layerfs.InvalidArgument);
  await assert.rejects(Store.init(join(root, "no", "such", "parent")), layerfs.NotFound);
  assert.equal(existsSync(join(root, "other")), false);
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

test("exec: exit status, output, stdin, commit, fork of a commit", () => withRoot(async (root, storePath) => {
  const s = await Store.init(storePath);
  await s.fork("work");
  const r = await s.exec("work", "echo built > out.txt; echo to-stdout; exit 3", { commit: "exec run", capture: true });
  assert.equal(r.returncode, 3);
  assert.equal(r.stdout.toString(), "to-stdout\n");
  assert.equal(r.forked, false);
  assert.match(r.commit, ID);
  assert.equal((await s.cat(r.commit, "out.txt")).toString(), "built\n");
  assert.deepEqual(await s.mounts(), []);
  assert.equal(existsSync(r.mountpoint), false);
  const r2 = await s.exec("work", ["sh", "-c", "cat > in.txt; pwd"], { input: "fed", capture: true });
  assert.equal(r2.commit, null);
  assert.equal(r2.stdout.toString().trim(), r2.mountpoint);
  assert.equal((await s.readFile("work", "in.txt")).toString(), "fed");
  const r3 = await s.exec("work", "kill -TERM $$", { capture: true });
  assert.equal(r3.signal, "SIGTERM");
  assert.equal(r3.returncode, -15);
  const r4 = await s.exec(r.commit, "test -f out.txt && echo x > y", { commit: "on a fork" });
  assert.equal(r4.forked, true);
  assert.equal(r4.returncode, 0);
  assert.deepEqual((await s.log(r4.branch, { maxCount: 1 }))[0].parents, [r.commit]);
  await assert.rejects(s.exec("nosuch", "true"), layerfs.NotFound);
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
