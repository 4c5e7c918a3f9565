// The SDK's side of docs/protocol.md against a fake daemon: what goes on the wire for each verb,
// how results, errors, events and lost connections come back, and auto-start.
import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { randomBytes } from "node:crypto";

import * as layerfs from "../dist/index.js";
import { Store } from "../dist/index.js";
import { FakeDaemon } from "./fake-server.mjs";

const HERE = fileURLToPath(new URL(".", import.meta.url));

function script(path, body) {
  writeFileSync(path, "#!/bin/sh\n" + body);
  chmodSync(path, 0o755);
  return path;
}

function withEnv(vars, fn) {
  const saved = {};
  for (const [k, v] of Object.entries(vars)) {
    saved[k] = process.env[k];
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  const restore = () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  try {
    const r = fn();
    if (r instanceof Promise) return r.finally(restore);
    restore();
    return r;
  } catch (e) {
    restore();
    throw e;
  }
}

function storeDir() {
  const root = mkdtempSync(join(tmpdir(), "layerfs-js-fake-"));
  const store = join(root, "store");
  mkdirSync(store);
  writeFileSync(join(store, "LAYERFS"), "LayerFS store\n");
  return { root, store };
}

async function withFake(fn, opts) {
  const { root, store } = storeDir();
  const fake = await new FakeDaemon(store, opts).listen();
  try {
    await fn(fake, store, root);
  } finally {
    await fake.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

const last = (fake) => fake.requests[fake.requests.length - 1];
const ID = /^[0-9a-f]{32}$/;

test("requests carry the documented names; results come back typed", () => withFake(async (fake, store) => {
  const s = await Store.open(store);
  const [main] = await s.branches();
  assert.equal(main.name, "main");
  assert.match(main.commit, ID);
  assert.equal(main.mountpoint, undefined);
  let req = last(fake);
  assert.equal(req.protocol, 1);
  assert.equal(req.verb, "branches");
  assert.deepEqual(req.args, {});
  assert.equal(req.cwd, process.cwd());

  assert.deepEqual(await s.fork("try", "main"), { name: "try", commit: main.commit });
  assert.deepEqual(last(fake).args, { name: "try", from: "main" });
  await s.fork("other");
  assert.deepEqual(last(fake).args, { name: "other", from: "main" });

  const m = await s.mount("try", "rel/mp");
  assert.deepEqual(last(fake).args, { ref: "try", mountpoint: resolve("rel/mp") });
  assert.equal(m.branch, "try");
  assert.equal(m.ref, "try");
  assert.equal(m.read_only, false);
  await s.mount(main.commit, "/ro", { readOnly: true });
  assert.deepEqual(last(fake).args, { ref: main.commit, mountpoint: "/ro", read_only: true });
  await s.mount(main.commit, "/ro2", { singleThreaded: true, noFollowCpu: true });
  assert.deepEqual(last(fake).args, { ref: main.commit, mountpoint: "/ro2", single_threaded: true,
    no_follow_cpu: true });

  assert.equal(await s.writeFile("try", "a.txt", "hello\n"), 6);
  req = last(fake);
  assert.equal(Buffer.from(req.args.content_base64, "base64").toString(), "hello\n");
  assert.equal("append" in req.args, false);
  assert.equal(await s.writeFile("try", "a.txt", Buffer.from("more"), { append: true, mode: 0o600 }), 10);
  assert.equal(last(fake).args.append, true);
  // The protocol takes permission bits as octal digits in a string.
  assert.equal(last(fake).args.mode, "0600");
  await s.writeFile("try", "x.sh", "#!/bin/sh\n", { mode: "0755" });
  assert.equal(last(fake).args.mode, "0755");
  const sent = fake.requests.length;
  for (const bad of [0o17777, -1, 1.5]) {
    await assert.rejects(s.writeFile("try", "x.sh", "", { mode: bad }), layerfs.InvalidArgument);
  }
  assert.equal(fake.requests.length, sent); // refused before anything was sent
  await assert.rejects(s.writeFile("try", "x.sh", "", { mode: "9" }), layerfs.InvalidArgument); // the daemon's check
  await s.removePath("try", "x.sh");
  assert.equal((await s.readFile("try", "a.txt")).toString(), "hello\nmore");
  assert.equal((await s.readFile("try", "a.txt", { offset: 6, length: 2 })).toString(), "mo");
  assert.deepEqual(last(fake).args, { target: "try", path: "a.txt", offset: 6, length: 2 });
  assert.deepEqual((await s.listDir("try")).map((e) => [e.name, e.size]), [["a.txt", 10]]);

  const st = await s.status(resolve("rel/mp"));
  assert.equal(st.branch, "try");
  assert.deepEqual(st.changes.map((c) => [c.path, c.change]), [["a.txt", "A"]]);

  const cid = await s.commit(resolve("rel/mp"), "first");
  assert.match(cid, ID);
  assert.deepEqual(last(fake).args, { target: resolve("rel/mp"), message: "first" });
  const log = await s.log("try");
  assert.deepEqual(log.map((c) => c.id), [cid, main.commit]);
  assert.deepEqual(log[0].parents, [main.commit]);
  assert.equal(log[0].message, "first");
  assert.equal(typeof log[0].time, "number");
  assert.deepEqual((await s.log("try", { maxCount: 1 })).map((c) => c.id), [cid]);
  assert.deepEqual(last(fake).args, { ref: "try", max_count: 1 });

  const shown = await s.show(cid);
  assert.deepEqual(shown.changes.map((c) => c.path), ["a.txt"]);
  const d = await s.diff(main.commit, cid);
  assert.deepEqual(d.map((c) => [c.path, c.change]), [["a.txt", "A"]]);
  assert.equal(d[0].after.size, 10);
  assert.deepEqual(await s.diff(`${main.commit}...${cid}`), d);
  assert.deepEqual(last(fake).args, { a: `${main.commit}...${cid}` });
  assert.equal((await s.cat(cid, "a.txt")).toString(), "hello\nmore");
  assert.deepEqual(last(fake).args, { commit: cid, path: "a.txt", length: layerfs.CHUNK });
  assert.equal((await s.cat(cid, "a.txt", { offset: 1, length: 3 })).toString(), "ell");
  assert.deepEqual(last(fake).args, { commit: cid, path: "a.txt", offset: 1, length: 3 });

  await s.removePath("try", "a.txt");
  assert.deepEqual(last(fake).args, { target: "try", path: "a.txt" });
  assert.equal((await s.reset("try")).commit, cid);
  assert.equal((await s.reset("try", { hard: "try~1" })).commit, main.commit);
  assert.deepEqual(last(fake).args, { target: "try", hard: "try~1" });

  assert.deepEqual((await s.mounts()).map((x) => x.mountpoint), [resolve("rel/mp")]);
  await s.umount("rel/mp");
  assert.deepEqual(await s.mounts(), []);
  await s.branchDelete("other");
  assert.deepEqual(last(fake), { ...last(fake), verb: "branch_delete", args: { name: "other" } });

  assert.equal((await s.stats()).policy, "16/8/8");
  assert.equal((await s.export(main.commit, "out")).dir, resolve("out"));
  const imp = await s.importDir("tree", { branch: "main", message: "imp" });
  assert.match(imp.commit, ID);
  assert.deepEqual(last(fake).args, { dir: resolve("tree"), branch: "main", message: "imp" });
  assert.equal((await s.verify([main.commit])).ok, true);
  assert.deepEqual(last(fake).args, { commits: [main.commit] });
  await s.verify();
  assert.deepEqual(last(fake).args, {});
  assert.deepEqual(await s.gc(), { objects_deleted: 2, bytes_before: 100, bytes_after: 50 });
  assert.equal((await s.request("stats")).branches, 2);
  s.close();
  await assert.rejects(s.branches(), layerfs.NotConnected);
}));

test("errors reject with the class and code of the daemon's error", () => withFake(async (fake, store) => {
  const s = await Store.open(store);
  await assert.rejects(s.fork("x", "nosuch"), (e) => {
    assert.ok(e instanceof layerfs.NotFound && e instanceof layerfs.LayerFSError && e instanceof Error);
    assert.equal(e.code, "ENOENT");
    assert.equal(e.errno, 2);
    assert.equal(e.detail, "no branch or commit 'nosuch'");
    assert.equal(e.message, "layerfs: no branch or commit 'nosuch'");
    assert.equal(e.name, "NotFound");
    return true;
  });
  await s.fork("x");
  await assert.rejects(s.fork("x"), (e) => e instanceof layerfs.Exists && e.code === "EEXIST" && e.errno === 17);
  await s.mount("x", "/mp");
  await assert.rejects(s.branchDelete("x"), (e) => e instanceof layerfs.Busy && e.code === "EBUSY" && e.errno === 16);
  await assert.rejects(s.request("log", { nonsense: 1 }), (e) => e instanceof layerfs.InvalidArgument);
  await assert.rejects(s.request("boom"), layerfs.IOFailure);
  assert.deepEqual((await s.branches()).map((b) => b.name), ["main", "x"]);
  s.close();
}));

test("every documented code has its class", () => {
  const cases = {
    ENOENT: layerfs.NotFound, EEXIST: layerfs.Exists, EBUSY: layerfs.Busy, EINVAL: layerfs.InvalidArgument,
    ENOTDIR: layerfs.NotADirectory, EISDIR: layerfs.IsADirectory, EROFS: layerfs.ReadOnly,
    ENOSPC: layerfs.NoSpace, EIO: layerfs.IOFailure, EACCES: layerfs.PermissionDenied,
    ENOTCONN: layerfs.NotConnected, ESTALE: layerfs.Stale, ETIMEDOUT: layerfs.Unreachable,
    ECONNREFUSED: layerfs.Unreachable, EHOSTUNREACH: layerfs.Unreachable,
    NOT_FAST_FORWARD: layerfs.NotFastForward, CONFLICT: layerfs.Conflict, DIVERGED: layerfs.Diverged,
    PROTOCOL: layerfs.ProtocolError, TOO_LARGE: layerfs.TooLarge,
  };
  for (const [code, cls] of Object.entries(cases)) {
    const e = layerfs.fromWire({ code, errno: 7, message: "m" });
    assert.equal(e.constructor, cls, code);
    assert.equal(e.code, code);
    assert.equal(e.errno, 7);
  }
  const other = layerfs.fromWire({ code: "ENAMETOOLONG", errno: 36, message: "long" });
  assert.equal(other.constructor, layerfs.LayerFSError);
  assert.equal(layerfs.makeError("ENOENT", "x").errno, 2);
  assert.equal(layerfs.fromWire("junk").constructor, layerfs.ProtocolError);
});

test("a version mismatch is a ProtocolError naming both versions", () => withFake(async (fake, store) => {
  const s = await Store.open(store);
  await assert.rejects(s.branches(), (e) => e instanceof layerfs.ProtocolError &&
    e.detail === "client speaks protocol 1, this layerfsd speaks 2");
  s.close();
}, { protocol: 2 }));

test("progress events reach the callback; unknown events are skipped", () => withFake(async (fake, store) => {
  const seen = [];
  const s = await Store.open(store, { progress: (p) => seen.push(p) });
  await s.gc();
  assert.deepEqual(seen.map((p) => [p.phase, p.objects, p.objects_total, p.done]),
    [["gc", 1, 3, undefined], ["gc", 2, 3, undefined], ["gc", 3, 3, undefined], ["gc", 3, undefined, true]]);
  const mine = [];
  await s.importDir("d", { progress: (p) => mine.push(p) });
  assert.equal(mine.length, 4);
  assert.equal(seen.length, 4);
  await assert.rejects(s.verify(undefined, { progress: () => { throw new Error("stop"); } }), /stop/);
  assert.equal((await s.branches()).length, 1);
  s.close();
}));

test("concurrent calls use their own connections; a dropped idle connection is replaced", () =>
  withFake(async (fake, store) => {
    const s = await Store.open(store);
    const made = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => s.fork(`c${i}`)));
    assert.deepEqual(made.map((b) => b.name).sort(), ["c0", "c1", "c2", "c3", "c4", "c5"]);
    assert.ok(fake.connections >= 2);
    const before = fake.connections;
    fake.dropConnections();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal((await s.branches()).length, 7);
    assert.equal(fake.connections, before + 1);
    s.close();
  }));

test("large content moves in pieces", () => withFake(async (fake, store) => {
  const s = await Store.open(store);
  const data = randomBytes(layerfs.CHUNK + 1000);
  const n0 = fake.requests.length;
  assert.equal(await s.writeFile("main", "big", data), data.length);
  assert.deepEqual(fake.requests.slice(n0).map((r) => r.args.append ?? false), [false, true]);
  assert.ok((await s.readFile("main", "big")).equals(data));
  assert.ok((await s.readFile("main", "big", { offset: 5, length: 10 })).equals(data.subarray(5, 15)));
  await s.commit("main", "big");
  const n1 = fake.requests.length;
  assert.ok((await s.cat("main", "big")).equals(data));
  // The whole file's size ends the read without a last empty piece.
  assert.deepEqual(fake.requests.slice(n1).map((r) => r.args.offset ?? 0), [0, layerfs.CHUNK]);
  assert.ok((await s.cat("main", "big", { offset: layerfs.CHUNK + 10 })).equals(data.subarray(layerfs.CHUNK + 10)));
  assert.equal(await s.writeFile("main", "empty", ""), 0);
  assert.equal((await s.readFile("main", "empty")).length, 0);
  s.close();
}));

test("open needs a Store; without autostart no daemon is NotConnected", async () => {
  await assert.rejects(Store.open("/nonexistent/store"), layerfs.NotFound);
  const { root, store } = storeDir();
  try {
    await assert.rejects(Store.open(root), layerfs.NotFound);
    await assert.rejects(Store.open(store, { autostart: false }), layerfs.NotConnected);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("a client that finds no daemon starts one with --idle", async () => {
  const { root, store } = storeDir();
  const exe = join(root, "layerfsd");
  writeFileSync(exe, `#!/bin/sh\nexec "${process.execPath}" "${join(HERE, "fake-server.mjs")}" "$@"\n`);
  chmodSync(exe, 0o755);
  const saved = process.env.LAYERFSD;
  process.env.LAYERFSD = exe;
  try {
    const s = await Store.open(store, { idle: 5 });
    assert.equal((await s.branches())[0].name, "main");
    s.close();
    assert.equal(readFileSync(join(store, "fake-starts"), "utf8"), "--store --json --idle 5\n");
    const s2 = await Store.open(store);
    await s2.fork("again");
    s2.close();
    assert.equal(readFileSync(join(store, "fake-starts"), "utf8"), "--store --json --idle 5\n");

    // layerfsd --json reports why on its last stderr line; the code is taken from there alone.
    const other = storeDir();
    for (const [code, cls, num] of [["EBUSY", layerfs.Busy, 16], ["EIO", layerfs.IOFailure, 5],
      ["ENOENT", layerfs.NotFound, 2], ["EWHATEVER", layerfs.LayerFSError, 99]]) {
      script(exe, 'echo "$@" > "$0.args"\necho "some log line" >&2\n' +
        `echo '{"error": {"code": "${code}", "errno": ${num}, "message": "the store is in use: lock held"}}' >&2\n` +
        "exit 1\n");
      await assert.rejects(Store.open(other.store), (e) => e.constructor === cls && e.code === code &&
        e.errno === num && e.detail === `cannot start layerfsd for ${other.store}: the store is in use: lock held`);
      assert.deepEqual(readFileSync(exe + ".args", "utf8").trim().split(" "),
        ["--store", other.store, "--json", "--idle", "60"]);
    }
    // Words without the error object give no code but EIO, whatever they say.
    script(exe, "echo 'layerfsd: store is in use (lock)' >&2\nexit 1\n");
    await assert.rejects(Store.open(other.store), (e) => e.constructor === layerfs.IOFailure &&
      e.detail.endsWith(": layerfsd: store is in use (lock)"));
    rmSync(other.root, { recursive: true, force: true });
  } finally {
    if (saved === undefined) delete process.env.LAYERFSD;
    else process.env.LAYERFSD = saved;
    try {
      process.kill(Number(readFileSync(join(store, "layerfsd.pid"), "utf8")), "SIGKILL");
    } catch {
      // already gone
    }
    rmSync(root, { recursive: true, force: true });
  }
});

test("init runs `layerfs init --json` and rejects with its codes", async () => {
  const root = mkdtempSync(join(tmpdir(), "layerfs-js-init-"));
  try {
    for (const [code, cls] of [["EEXIST", layerfs.Exists], ["EINVAL", layerfs.InvalidArgument],
      ["ENOENT", layerfs.NotFound], ["EACCES", layerfs.PermissionDenied]]) {
      const exe = script(join(root, `layerfs-${code}`), 'printf "%s\\n" "$@" > "$0.args"\n' +
        `echo '{"error": {"code": "${code}", "errno": 1, "message": "m"}}' >&2\nexit 1\n`);
      await withEnv({ LAYERFS: exe }, () => assert.rejects(
        Store.init(join(root, "s"), { policy: "8/4/4", fromDir: "tree", message: "first" }),
        (e) => e.constructor === cls && e.code === code && e.detail === "m"));
      assert.deepEqual(readFileSync(exe + ".args", "utf8").trim().split("\n"),
        ["init", join(root, "s"), "--policy", "8/4/4", "--from", resolve("tree"), "-m", "first", "--json"]);
    }
    // A usage error (exit 2, text) is InvalidArgument; other text is EIO.
    await withEnv({ LAYERFS: script(join(root, "usage"), "echo 'layerfs: --policy: 1 required' >&2\nexit 2\n") },
      () => assert.rejects(Store.init(join(root, "u")), (e) => e.constructor === layerfs.InvalidArgument &&
        e.detail === "--policy: 1 required"));
    await withEnv({ LAYERFS: script(join(root, "crash"), "echo 'Segfault: already exists' >&2\nexit 139\n") },
      () => assert.rejects(Store.init(join(root, "u")), layerfs.IOFailure));
    await withEnv({ LAYERFS: join(root, "missing") }, () => assert.rejects(Store.init(join(root, "u")), layerfs.NotFound));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("the programs are found as docs/protocol.md says", async () => {
  const { findLayerfs, findLayerfsd } = await import("../dist/connection.js");
  const root = mkdtempSync(join(tmpdir(), "layerfs-js-find-"));
  try {
    const real = join(root, "opt", "bin");
    const onPath = join(root, "path");
    mkdirSync(real, { recursive: true });
    mkdirSync(onPath);
    script(join(real, "layerfs"), "");
    script(join(real, "layerfsd"), "");
    symlinkSync(join(real, "layerfs"), join(onPath, "layerfs"));
    script(join(onPath, "layerfsd"), "");
    withEnv({ LAYERFS: undefined, LAYERFSD: undefined, PATH: onPath }, () => {
      assert.equal(findLayerfs(), join(onPath, "layerfs"));
      assert.equal(findLayerfsd(), join(real, "layerfsd")); // beside layerfs, the link resolved
      rmSync(join(real, "layerfsd"));
      assert.equal(findLayerfsd(), join(onPath, "layerfsd"));
    });
    withEnv({ LAYERFS: join(real, "layerfs"), LAYERFSD: "/x/layerfsd", PATH: onPath }, () => {
      assert.equal(findLayerfs(), join(real, "layerfs"));
      assert.equal(findLayerfsd(), "/x/layerfsd");
    });
    withEnv({ LAYERFS: undefined, LAYERFSD: undefined, PATH: join(root, "empty") }, () => {
      assert.throws(() => findLayerfs(), layerfs.NotFound);
      assert.throws(() => findLayerfsd(), layerfs.NotFound);
    });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("merge, cherry-pick, revert, continue and abort; conflicts carry their result", () =>
  withFake(async (fake, store) => {
    const s = await Store.open(store);
    await s.fork("x");
    await s.fork("y");
    await s.writeFile("y", "f", "y\n");
    const y1 = await s.commit("y", "y1");
    const ff = await s.merge("y", { into: "x" });
    assert.deepEqual(last(fake).args, { source: "y", into: "x" });
    assert.equal(ff.op, "merge");
    assert.equal(ff.fast_forward, true);
    assert.equal(ff.commit, y1);
    await s.writeFile("x", "f", "x\n");
    await s.commit("x", "x2");
    await s.writeFile("y", "f", "y2\n");
    await s.commit("y", "y2");
    await assert.rejects(s.merge("y", { into: "x", ffOnly: true }), layerfs.NotFastForward);
    assert.deepEqual(last(fake).args, { source: "y", into: "x", ff_only: true });
    await assert.rejects(s.merge("y", { into: "x", message: "m", noFf: true, strategy: "ort" }), (e) => {
      assert.ok(e instanceof layerfs.Conflict);
      assert.equal(e.result.commit, null);
      assert.equal(e.result.stopped, false);
      assert.deepEqual(e.result.conflicts.map((c) => [c.path, c.kind, c.sides]), [["f", "content", []]]);
      return true;
    });
    assert.deepEqual(last(fake).args, { source: "y", into: "x", message: "m", no_ff: true, strategy: "ort" });
    const ok = await s.merge("y", { into: "x", strategyOption: "theirs" });
    assert.ok(ok.commit && ok.bases.length === 1);
    // Mounted: the merge stops; status shows it; abort, continue.
    await s.fork("z", "x~1");
    await s.writeFile("z", "f", "z\n");
    await s.commit("z", "z");
    await s.mount("z", "/mz");
    await assert.rejects(s.merge("y", { into: "/mz" }), (e) => e.result.stopped === true && e.result.mountpoint === "/mz");
    const st = await s.status("z");
    assert.equal(st.merging.source, "y");
    assert.equal(st.merging.unresolved, 1);
    assert.deepEqual(st.conflicts.map((c) => [c.path, c.resolved]), [["f", false]]);
    const ab = await s.mergeAbort({ into: "/mz" });
    assert.deepEqual(last(fake).args, { into: "/mz", abort: true });
    assert.deepEqual([ab.aborted, ab.branch, ab.op], [true, "z", "merge"]);
    await assert.rejects(s.cherryPick("y", { into: "z" }), layerfs.Conflict);
    assert.deepEqual([last(fake).verb, last(fake).args], ["cherry_pick", { commit: "y", into: "z" }]);
    const picked = await s.mergeContinue({ into: "z", op: "cherry-pick" });
    assert.deepEqual([last(fake).verb, last(fake).args], ["cherry_pick", { into: "z", continue: true }]);
    assert.equal(picked.op, "cherry-pick");
    await s.writeFile("z", "f", "z again\n");
    await s.commit("z", "z2");
    await assert.rejects(s.merge("y", { into: "/mz" }), layerfs.Conflict);
    const done = await s.mergeContinue({ into: "z", message: "resolved" });
    assert.deepEqual([last(fake).verb, last(fake).args], ["merge", { into: "z", message: "resolved", continue: true }]);
    assert.ok(done.commit);
    assert.equal((await s.status("z")).merging, undefined);
    await s.revert(y1, { into: "x", strategyOption: "ours" });
    assert.deepEqual([last(fake).verb, last(fake).args], ["revert", { commit: y1, into: "x", strategy_option: "ours" }]);
    await assert.rejects(s.mergeContinue({ into: "z", op: "rebase" }), layerfs.InvalidArgument);
    s.close();
  }));

test("fields and events a newer daemon adds are ignored", () => withFake(async (fake, store) => {
  const s = await Store.open(store);
  const [c] = await s.log();
  assert.equal(c.message, "init");
  const seen = [];
  await s.verify(undefined, { progress: (p) => seen.push(p) }); // the fake ends with an unknown event kind
  assert.equal(seen.length, 4);
  assert.equal((await s.branches())[0].name, "main"); // and the connection is still in step
  s.close();
}));

test("nameToBytes and nameFromBytes are Python's surrogateescape", () => {
  for (let round = 0; round < 500; round++) {
    const b = randomBytes(round % 24);
    const name = layerfs.nameFromBytes(b);
    assert.deepEqual(layerfs.nameToBytes(name), b);
  }
  assert.equal(layerfs.nameFromBytes(Buffer.from("ünï😀")), "ünï😀");
  assert.equal(layerfs.nameFromBytes(Buffer.from([0xed, 0xa0, 0x80])), "\udced\udca0\udc80");
  assert.equal(layerfs.nameFromBytes(Buffer.from([0xc0, 0xaf])), "\udcc0\udcaf");
  assert.deepEqual(layerfs.nameToBytes("a\udcffz"), Buffer.from([0x61, 0xff, 0x7a]));
});
