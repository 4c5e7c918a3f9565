// `npm install ./sdk/js` into another project gives a package that imports, runs with no
// runtime dependency, and ships its types (a TypeScript consumer type-checks against them).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const SDK = fileURLToPath(new URL("..", import.meta.url));

test("npm install of the package directory, then import and type-check", () => {
  const pkg = JSON.parse(readFileSync(join(SDK, "package.json"), "utf8"));
  assert.equal(pkg.dependencies, undefined, "no runtime dependencies");
  assert.ok(existsSync(join(SDK, "dist", "index.d.ts")), "types are built into dist/");
  const app = mkdtempSync(join(tmpdir(), "layerfs-js-app-"));
  try {
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    const npm = spawnSync("npm", ["install", "--offline", "--no-audit", "--no-fund", SDK], { cwd: app, encoding: "utf8" });
    assert.equal(npm.status, 0, npm.stdout + npm.stderr);
    const run = spawnSync(process.execPath, ["--input-type=module", "-e",
      "import { Store, NotFound, LayerFSError, PROTOCOL_VERSION } from 'layerfs';" +
      "if (typeof Store.open !== 'function' || !(new NotFound('ENOENT', 2, 'x') instanceof LayerFSError)) process.exit(3);" +
      "console.log(PROTOCOL_VERSION);"], { cwd: app, encoding: "utf8" });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(run.stdout.trim(), "1");
    writeFileSync(join(app, "use.ts"), [
      "import { Store, type Commit, type Change, NotFound } from 'layerfs';",
      "export async function f(s: Store): Promise<[string, Commit[], Change[]]> {",
      "  const id: string = await s.commit('/mnt', 'msg');",
      "  const log: Commit[] = await s.log('main', { maxCount: 3 });",
      "  try { await s.fork('x', log[0].id); } catch (e) { if (e instanceof NotFound) console.log(e.code, e.errno); }",
      "  return [id, log, await s.diff(log[1].id, log[0].id)];",
      "}",
      "// @ts-expect-error: commit needs a message",
      "export const bad = (s: Store) => s.commit('/mnt');",
    ].join("\n"));
    const tsc = spawnSync(process.execPath, [join(SDK, "node_modules", "typescript", "bin", "tsc"), "--noEmit",
      "--strict", "--module", "NodeNext", "--moduleResolution", "NodeNext", "--target", "ES2022",
      "--types", "node", "--typeRoots", join(SDK, "node_modules", "@types"), "use.ts"], { cwd: app, encoding: "utf8" });
    assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
  } finally {
    rmSync(app, { recursive: true, force: true });
  }
});

test("npm install of a fresh checkout's package directory builds it (prepare installs tsc first)", () => {
  const root = mkdtempSync(join(tmpdir(), "layerfs-js-fresh-"));
  try {
    const fresh = join(root, "js");
    cpSync(SDK, fresh, { recursive: true, filter: (p) => !/\/(node_modules|dist)(\/|$)/.test(p.slice(SDK.length - 1)) });
    assert.ok(!existsSync(join(fresh, "node_modules")) && !existsSync(join(fresh, "dist")));
    const app = join(root, "app");
    mkdirSync(app);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    const npm = spawnSync("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", fresh],
      { cwd: app, encoding: "utf8" });
    assert.equal(npm.status, 0, npm.stdout + npm.stderr);
    assert.ok(existsSync(join(fresh, "dist", "index.d.ts")), "prepare built dist/");
    const run = spawnSync(process.execPath, ["--input-type=module", "-e",
      "import { Store, PROTOCOL_VERSION } from 'layerfs'; console.log(typeof Store.open, PROTOCOL_VERSION);"],
      { cwd: app, encoding: "utf8" });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(run.stdout.trim(), "function 1");
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
