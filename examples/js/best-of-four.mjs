#!/usr/bin/env node
// Best of four: fork four attempts from one Commit, run a command in each attempt's mount in
// parallel, commit each, keep the attempt with the best score and delete the rest.
//
//   node best-of-four.mjs STORE [--from REF] [-- COMMAND...]
//
// COMMAND runs with its working directory in the attempt's Workspace and $ATTEMPT set to 0..3;
// the last line it prints is its score (higher is better). The default command is a toy solver.
// Prints one JSON line: the kept branch, its Commit and every attempt's score.
import { Store } from "layerfs";

const DEFAULT = "seq 1 $(( (ATTEMPT * 3 + 1) % 4 * 100 + 50 )) > solution.txt; " +
  "echo attempt $ATTEMPT > who.txt; wc -l < solution.txt";

const argv = process.argv.slice(2);
const dash = argv.indexOf("--");
const command = dash >= 0 ? argv.slice(dash + 1) : [];
const own = dash >= 0 ? argv.slice(0, dash) : argv;
const fromAt = own.indexOf("--from");
const baseRef = fromAt >= 0 ? own[fromAt + 1] : "main";
const storePath = own.find((a, i) => !a.startsWith("--") && own[i - 1] !== "--from");
if (!storePath) {
  console.error("usage: best-of-four.mjs STORE [--from REF] [-- COMMAND...]");
  process.exit(2);
}

const store = await Store.open(storePath);
try {
  const base = (await store.log(baseRef, { maxCount: 1 }))[0].id;
  const names = [0, 1, 2, 3].map((i) => `attempt-${base.slice(0, 8)}-${i}`);
  for (const name of names) await store.fork(name, base);

  // exec mounts each branch, runs the command in it, commits what it left and unmounts: all four
  // at once.
  const results = await Promise.all(names.map(async (name, i) => {
    const r = await store.exec(name, command.length ? command : DEFAULT, {
      commit: `attempt ${i}`, capture: true, env: { ...process.env, ATTEMPT: String(i) },
    });
    const lines = r.stdout.toString().trim().split("\n");
    const score = r.exit_code === 0 && lines[0] !== "" ? Number(lines[lines.length - 1]) : -Infinity;
    return { name, score, commit: r.commit };
  }));

  const best = results.reduce((a, b) => (b.score > a.score ? b : a));
  for (const r of results) if (r.name !== best.name) await store.branchDelete(r.name);
  console.log(JSON.stringify({ kept: best.name, commit: best.commit, score: best.score,
    scores: Object.fromEntries(results.map((r) => [r.name, r.score])) }));
} finally {
  store.close();
}
