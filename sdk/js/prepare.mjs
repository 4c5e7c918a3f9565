// The package's prepare script: builds dist/ with tsc. `npm install ./sdk/js` from a fresh clone
// runs it in this directory, where the devDependencies (typescript, @types/node) have not been
// installed: it installs them first, from package-lock.json, into this directory's node_modules.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const tsc = join(here, "node_modules", "typescript", "bin", "tsc");
const types = join(here, "node_modules", "@types", "node");

function run(cmd, args, env = process.env) {
  const r = spawnSync(cmd, args, { cwd: here, stdio: "inherit", env });
  if (r.error) throw r.error;
  if (r.status !== 0) process.exit(r.status ?? 1);
}

if (!existsSync(tsc) || !existsSync(types)) {
  // The npm that runs us, without the settings of the install that called it (a global or
  // production install of the package must not make this one global or drop devDependencies).
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) =>
    !/^npm_config_(global|location|prefix|omit|include|only|production|save.*)$/i.test(k)));
  const npm = process.env.npm_execpath ? [process.execPath, process.env.npm_execpath] : ["npm"];
  run(npm[0], [...npm.slice(1), "ci", "--ignore-scripts", "--include=dev", "--no-audit", "--no-fund"], env);
}
run(process.execPath, [tsc, "-p", join(here, "tsconfig.json")]);
