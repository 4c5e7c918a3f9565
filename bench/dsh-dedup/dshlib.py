"""Shared pieces of the dsh-dedup benchmark: oracles, the apply rule, verification.

An oracle maps every path of a snapshot tree (relative, '/'-separated, the
root itself excluded) to a record:
  {"type": "dir",     "mode": 0o755}
  {"type": "file",    "mode": 0o644, "size": N, "sha256": HEX}
  {"type": "symlink", "target": "..."}
"""
import hashlib
import os
import stat

BUF = 1 << 20


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(BUF)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def build_oracle(root, hash_cache=None):
    """Walk ROOT (without following symlinks) and describe every path.

    hash_cache, if given, maps (st_dev, st_ino, size, mtime_ns) -> sha256 so
    hard-linked files in a corpus are hashed once."""
    out = {}
    root = os.path.abspath(root)
    stack = [""]
    while stack:
        rel = stack.pop()
        d = os.path.join(root, rel) if rel else root
        with os.scandir(d) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            p = rel + "/" + e.name if rel else e.name
            st = os.lstat(e.path)
            m = st.st_mode
            if stat.S_ISLNK(m):
                out[p] = {"type": "symlink", "target": os.readlink(e.path)}
            elif stat.S_ISDIR(m):
                out[p] = {"type": "dir", "mode": stat.S_IMODE(m)}
                stack.append(p)
            elif stat.S_ISREG(m):
                key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
                h = hash_cache.get(key) if hash_cache is not None else None
                if h is None:
                    h = sha256_file(e.path)
                    if hash_cache is not None:
                        hash_cache[key] = h
                out[p] = {"type": "file", "mode": stat.S_IMODE(m), "size": st.st_size, "sha256": h}
            else:
                out[p] = {"type": "other", "mode": m}
    return dict(sorted(out.items()))


def depth(p):
    return p.count("/")


def apply_change(prev, nxt, src, dst):
    """Turn DST (which holds the tree described by PREV) into the tree NXT.

    The rule: removed paths are deleted (also a path whose type changes), new
    paths are created, a changed file is rewritten whole in place (opened with
    O_TRUNC on the existing path, the full new content written), modes are set
    with chmod and symlinks are (re)created. File content comes from SRC, the
    snapshot's own tree. Returns counters."""
    c = {"deleted": 0, "dirs_created": 0, "files_created": 0, "files_rewritten": 0,
         "bytes_written": 0, "chmods": 0, "symlinks": 0}
    gone = [p for p, r in prev.items() if p not in nxt or nxt[p]["type"] != r["type"]]
    for p in sorted(gone, key=lambda p: (-depth(p), p)):
        q = os.path.join(dst, p)
        if prev[p]["type"] == "dir":
            os.rmdir(q)
        else:
            os.unlink(q)
        c["deleted"] += 1
    dir_modes = []
    for p in sorted(nxt, key=lambda p: (depth(p), p)):
        r = nxt[p]
        old = prev.get(p)
        if old is not None and old["type"] != r["type"]:
            old = None
        q = os.path.join(dst, p)
        t = r["type"]
        if t == "dir":
            if old is None:
                os.mkdir(q, 0o700)
                c["dirs_created"] += 1
                dir_modes.append((p, r["mode"]))
            elif old["mode"] != r["mode"]:
                dir_modes.append((p, r["mode"]))
        elif t == "file":
            if old is None or old["sha256"] != r["sha256"] or old["size"] != r["size"]:
                flags = os.O_WRONLY | os.O_TRUNC | (os.O_CREAT if old is None else 0)
                fd = os.open(q, flags, 0o600)
                try:
                    with open(os.path.join(src, p), "rb") as f:
                        while True:
                            b = f.read(BUF)
                            if not b:
                                break
                            mv = memoryview(b)
                            while mv:
                                n = os.write(fd, mv)
                                mv = mv[n:]
                            c["bytes_written"] += len(b)
                finally:
                    os.close(fd)
                c["files_created" if old is None else "files_rewritten"] += 1
                os.chmod(q, r["mode"])
                c["chmods"] += 1
            elif old["mode"] != r["mode"]:
                os.chmod(q, r["mode"])
                c["chmods"] += 1
        elif t == "symlink":
            if old is None or old["target"] != r["target"]:
                if old is not None:
                    os.unlink(q)
                os.symlink(r["target"], q)
                c["symlinks"] += 1
        else:
            raise RuntimeError(f"unsupported entry type at {p}: {r}")
    for p, m in sorted(dir_modes, key=lambda x: (-depth(x[0]), x[0])):
        os.chmod(os.path.join(dst, p), m)
        c["chmods"] += 1
    return c


def compare(oracle, actual, limit=20):
    """Problems (up to LIMIT, plus a total) between an oracle and a walk."""
    problems = []
    total = 0
    for p in sorted(set(oracle) | set(actual)):
        a, b = oracle.get(p), actual.get(p)
        if a != b:
            total += 1
            if len(problems) < limit:
                if a is None:
                    problems.append(f"{p}: unexpected {b}")
                elif b is None:
                    problems.append(f"{p}: missing (expected {a})")
                else:
                    diff = {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}
                    problems.append(f"{p}: {diff}")
    return total, problems


def verify(root, oracle):
    """Walk ROOT and compare with ORACLE. Returns (ok, n_problems, problems, n_paths)."""
    try:
        actual = build_oracle(root)
    except OSError as e:
        return False, 1, [f"walk failed: {e}"], 0
    n, probs = compare(oracle, actual)
    return n == 0, n, probs, len(actual)
