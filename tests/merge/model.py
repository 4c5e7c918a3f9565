#!/usr/bin/env python3
"""Model test of `layerfs merge` against `git merge`.

For each seed: a random base tree (text and binary files, some executable, in a few fixed
directories), then random histories on two branches (edits of lines, binary rewrites, adds,
deletes, renames, mode changes), committed both into a LayerFS Store (`layerfs import`) and into
a Git repository from the same working directory. Then both merge theirs into ours:
- both clean: the trees must be equal (content and executable bit of every file);
- otherwise the sets of conflicted paths must be equal.
Git runs its default strategy (ort) with rename detection and merge.directoryRenames=false:
LayerFS pairs renamed files as Git does (docs/design.md, "Merge", "Renames") but does not guess
directory renames. When the default merge conflicts, `-X theirs` is compared too wherever Git
settles it.

usage: model.py LAYERFS SEEDS [FIRST_SEED]
"""
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile

LAYERFS = os.path.abspath(sys.argv[1])
SEEDS = int(sys.argv[2])
FIRST = int(sys.argv[3]) if len(sys.argv) > 3 else 1
DIRS = ["", "src", "src/lib", "docs"]
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def run(*args, cwd=None, env=None, check=True):
    p = subprocess.run(args, cwd=cwd, env=env, capture_output=True)
    if check and p.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(args)} -> {p.returncode}\n{p.stdout.decode()}{p.stderr.decode()}")
    return p


def text(rng, n):
    return "".join(f"{rng.choice(WORDS)} {rng.randrange(1000)}\n" for _ in range(n)).encode()


def binary(rng, n):
    return bytes([0]) + bytes(rng.randrange(256) for _ in range(n))


def mutate(rng, files, serial):
    """One random change to the model {path: [bytes, executable]}."""
    op = rng.choice(["edit", "edit", "edit", "add", "delete", "rename", "mode", "binary"])
    paths = sorted(files)
    if op == "add" or not paths:
        d = rng.choice(DIRS)
        name = f"f{serial}_{rng.randrange(100)}" + (".bin" if rng.random() < 0.2 else ".txt")
        path = f"{d}/{name}" if d else name
        files[path] = [binary(rng, 64) if name.endswith(".bin") else text(rng, rng.randrange(1, 30)), False]
        return
    path = rng.choice(paths)
    data, ex = files[path]
    if op == "delete":
        del files[path]
    elif op == "rename":
        d = rng.choice(DIRS)
        new = (f"{d}/" if d else "") + f"r{serial}_{os.path.basename(path)}"
        files[new] = files.pop(path)
    elif op == "mode":
        files[path][1] = not ex
    elif op == "binary" or data[:1] == b"\0":
        b = bytearray(data if data[:1] == b"\0" else binary(rng, 64))
        for _ in range(rng.randrange(1, 4)):
            b[rng.randrange(1, len(b))] = rng.randrange(256)
        files[path][0] = bytes(b)
    else:
        lines = data.decode().splitlines(keepends=True)
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(len(lines) + 1)
            kind = rng.random()
            if kind < 0.4 and at < len(lines):
                lines[at] = f"{rng.choice(WORDS)} changed {rng.randrange(1000)}\n"
            elif kind < 0.7 or not lines:
                lines.insert(at, f"{rng.choice(WORDS)} inserted {rng.randrange(1000)}\n")
            elif at < len(lines):
                del lines[at]
        files[path][0] = "".join(lines).encode()


def write_tree(files, root):
    for name in os.listdir(root):
        if name == ".git":
            continue
        p = os.path.join(root, name)
        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
    for d in DIRS:
        if d:
            os.makedirs(os.path.join(root, d), exist_ok=True)
    for path, (data, ex) in files.items():
        p = os.path.join(root, path)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, 0o755 if ex else 0o644)


def read_tree(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for n in filenames:
            p = os.path.join(dirpath, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = (f.read(), bool(os.stat(p).st_mode & stat.S_IXUSR))
    return out


def one_seed(seed, work):
    rng = random.Random(seed)
    store, wdir, gdir, mdir = (os.path.join(work, x) for x in ("store", "w", "g.git", "m"))
    os.makedirs(wdir)
    env = dict(os.environ, LAYERFS_STORE=store, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    env.pop("GIT_DIR", None)
    git = lambda *a, check=True: run("git", f"--git-dir={gdir}", f"--work-tree={wdir}", *a, env=env, check=check)
    lfs = lambda *a, check=True: run(LAYERFS, *a, env=env, check=check)
    base = {}
    for i in range(rng.randrange(4, 12)):
        mutate(rng, base, 1000 + i)
    write_tree(base, wdir)
    run("git", "init", "-q", "-b", "main", "--bare", gdir, env=env)
    git("config", "core.bare", "false")
    git("add", "-A")
    git("commit", "-q", "--allow-empty", "-m", "base")
    lfs("init", store)
    lfs("import", "-m", "base", wdir)
    lfs("fork", "theirs", "main")
    git("branch", "theirs")
    serial = 0
    for branch in ("theirs", "main"):
        files = {k: list(v) for k, v in base.items()}
        git("symbolic-ref", "HEAD", f"refs/heads/{branch}")
        git("reset", "-q", "--mixed", branch)
        for c in range(rng.randrange(1, 4)):
            for _ in range(rng.randrange(1, 4)):
                serial += 1
                mutate(rng, files, serial)
            write_tree(files, wdir)
            git("add", "-A")
            git("commit", "-q", "--allow-empty", "-m", f"{branch} {c}")
            lfs("import", "-b", branch, "-m", f"{branch} {c}", wdir)

    def git_merge(*opts):
        if os.path.exists(mdir):
            shutil.rmtree(mdir)
        os.makedirs(mdir)
        gm = lambda *a, check=True: run("git", f"--git-dir={gdir}", f"--work-tree={mdir}", *a, env=env, check=check)
        main = gm("rev-parse", "main").stdout.decode().strip()
        gm("update-ref", "--no-deref", "HEAD", main)
        gm("reset", "-q", "--hard", main)
        r = gm("-c", "merge.directoryRenames=false", "merge", "-q", "--no-edit", *opts, "theirs", check=False)
        conflicted = set(gm("diff", "--name-only", "--diff-filter=U").stdout.decode().split())
        tree = read_tree(mdir) if r.returncode == 0 else None
        gm("merge", "--abort", check=False)
        return r.returncode, conflicted, tree

    def lfs_merge(*opts):
        r = lfs("merge", "theirs", "--into", "main", "--json", *opts, check=False)
        try:
            out = json.loads(r.stdout)
        except ValueError:
            raise SystemExit(f"FAIL seed {seed}: merge printed no JSON: {r.stderr.decode()}")
        if r.returncode not in (0, 1) or (r.returncode == 0) != (not out["conflicts"]):
            raise SystemExit(f"FAIL seed {seed}: exit {r.returncode} with {len(out['conflicts'])} conflicts")
        return r.returncode, {c["path"] for c in out["conflicts"]}, out

    def compare(label, g, l):
        grc, gconf, gtree = g
        lrc, lconf, lout = l
        if grc not in (0, 1):
            raise SystemExit(f"FAIL seed {seed} {label}: git merge exited {grc}")
        if grc != lrc or gconf != lconf:
            raise SystemExit(f"FAIL seed {seed} {label}: git exit {grc} conflicts {sorted(gconf)}, "
                             f"layerfs exit {lrc} conflicts {sorted(lconf)}")
        if grc == 0:
            edir = os.path.join(work, "e" + label)
            lfs("export", lout["commit"], edir)
            ltree = read_tree(edir)
            if ltree != gtree:
                diff = sorted(set(ltree) ^ set(gtree)) + sorted(p for p in set(ltree) & set(gtree) if ltree[p] != gtree[p])
                raise SystemExit(f"FAIL seed {seed} {label}: merged trees differ at {diff[:10]}")
            commit = json.loads(lfs("show", "--json", lout["commit"]).stdout)
            if commit["parents"] != [lout["ours"], lout["theirs"]]:
                raise SystemExit(f"FAIL seed {seed} {label}: merge commit parents {commit['parents']}")
        return grc

    rc = compare("default", git_merge(), lfs_merge())
    if rc == 1:
        g = git_merge("-X", "theirs")
        if g[0] == 0:
            compare("xtheirs", g, lfs_merge("-X", "theirs"))
    return rc


def main():
    conflicted = 0
    for seed in range(FIRST, FIRST + SEEDS):
        work = tempfile.mkdtemp(prefix="layerfs-merge-model-")
        try:
            conflicted += one_seed(seed, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{SEEDS} seeds: {SEEDS - conflicted} clean merges equal to git's, {conflicted} with git's conflicted paths")
    if conflicted == 0 or conflicted == SEEDS:
        raise SystemExit("FAIL: the seeds should give both clean and conflicted merges")


main()
