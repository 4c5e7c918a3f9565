#!/usr/bin/env python3
"""A compact fsstress with a model (docs/reliability.md, "Concurrency").

Each worker is a process that owns one directory (ROOT/wN) of one mount and does a random mix
of what programs do to files -- create, pwrite (small, and whole 64 KiB blocks that go to the
data log), append, truncate, read, rename (over files too), hard links, symlinks, unlink,
mkdir, rmdir, chmod, user xattrs, fsync, mmap writes -- while it keeps a model of its directory.
Every read is checked against the model as it happens; at the end the worker checks its whole
directory against the model and writes the model (paths, kinds, modes, content hashes, link
targets, xattrs, hard-link groups) to LOG/wN.json, for the driver to compare with what was
committed.

  fsstress.py --dirs M1/w0,M2/w1,... --seconds S --seed N --log DIR
  fsstress.py --check DIR MODEL   DIR (an exported Commit's copy of a worker's directory)
                                  holds what MODEL (its wN.json) says

Exit status 0 when every worker's checks passed; a mismatch or an unexpected error is printed
with the worker's last operations and fails the run.
"""
import argparse
import errno
import hashlib
import json
import mmap
import os
import random
import sys
import time

BLOCK = 64 << 10


class Node:
    """A file's content and mode, shared by its hard links."""
    _next = 1

    def __init__(self, mode=0o644):
        self.data = bytearray()
        self.mode = mode
        self.xattrs = {}
        self.id = Node._next
        Node._next += 1


class Worker:
    def __init__(self, root, rng, log_path):
        self.root = root
        self.rng = rng
        self.log_path = log_path
        self.files = {}     # relative path -> Node
        self.dirs = {""}    # relative paths of directories ("" is the worker's root)
        self.links = {}     # relative path -> symlink target
        self.history = []   # the last operations, for a failure report
        self.ops = 0

    # ---- helpers ----
    def p(self, rel):
        return os.path.join(self.root, rel) if rel else self.root

    def note(self, *what):
        self.history.append(" ".join(str(w) for w in what))
        if len(self.history) > 40:
            del self.history[0]

    def fail(self, msg):
        print(f"fsstress: {self.root}: {msg}", file=sys.stderr)
        print("  last operations:\n    " + "\n    ".join(self.history), file=sys.stderr)
        sys.exit(1)

    def names(self):
        return list(self.files) + list(self.links) + [d for d in self.dirs if d]

    def new_name(self):
        d = self.rng.choice(sorted(self.dirs))
        for _ in range(20):
            n = os.path.join(d, f"{self.rng.choice('abcdefgh')}{self.rng.randrange(40)}") if d else \
                f"{self.rng.choice('abcdefgh')}{self.rng.randrange(40)}"
            if n not in self.files and n not in self.links and n not in self.dirs:
                return n
        return None

    def bytes_(self, n):
        return self.rng.randbytes(n) if self.rng.random() < 0.5 else bytes([self.rng.randrange(256)]) * n

    def check_file(self, rel):
        node = self.files[rel]
        with open(self.p(rel), "rb") as f:
            got = f.read()
        if got != bytes(node.data):
            diff = next((i for i in range(min(len(got), len(node.data))) if got[i] != node.data[i]), None)
            self.fail(f"{rel}: content differs from the model: {len(got)} bytes read, {len(node.data)} expected, "
                      f"first difference at {diff}")

    # ---- operations ----
    def op_create(self):
        n = self.new_name()
        if not n:
            return
        mode = self.rng.choice([0o644, 0o600, 0o755])
        fd = os.open(self.p(n), os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
        os.close(fd)
        node = Node(mode)
        self.files[n] = node
        self.note("create", n)

    def op_write(self):
        if not self.files:
            return self.op_create()
        rel = self.rng.choice(sorted(self.files))
        node = self.files[rel]
        if self.rng.random() < 0.25:  # whole blocks, block aligned: the data log
            off = self.rng.randrange(8) * BLOCK
            data = self.bytes_(BLOCK * self.rng.randrange(1, 5))
        else:
            off = self.rng.randrange(max(1, min(len(node.data) + 4096, 600 << 10)))
            data = self.bytes_(self.rng.randrange(1, 20000))
        fd = os.open(self.p(rel), os.O_WRONLY)
        try:
            if os.pwrite(fd, data, off) != len(data):
                self.fail(f"{rel}: short write")
            if self.rng.random() < 0.1:
                os.fsync(fd)
        finally:
            os.close(fd)
        if len(node.data) < off:
            node.data.extend(b"\0" * (off - len(node.data)))
        node.data[off:off + len(data)] = data
        self.note("pwrite", rel, off, len(data))

    def op_append(self):
        if not self.files:
            return
        rel = self.rng.choice(sorted(self.files))
        data = self.bytes_(self.rng.randrange(1, 5000))
        with open(self.p(rel), "ab") as f:
            f.write(data)
        self.files[rel].data.extend(data)
        self.note("append", rel, len(data))

    def op_truncate(self):
        if not self.files:
            return
        rel = self.rng.choice(sorted(self.files))
        node = self.files[rel]
        size = self.rng.randrange(max(1, len(node.data) * 2 + 1))
        os.truncate(self.p(rel), size)
        if size < len(node.data):
            del node.data[size:]
        else:
            node.data.extend(b"\0" * (size - len(node.data)))
        self.note("truncate", rel, size)

    def op_mmap(self):
        files = [r for r, n in self.files.items() if len(n.data) >= 4096]
        if not files:
            return
        rel = self.rng.choice(sorted(files))
        node = self.files[rel]
        off = self.rng.randrange(len(node.data) - 100)
        data = self.bytes_(self.rng.randrange(1, min(4000, len(node.data) - off)))
        with open(self.p(rel), "r+b") as f:
            with mmap.mmap(f.fileno(), len(node.data)) as m:
                m[off:off + len(data)] = data
                m.flush()
        node.data[off:off + len(data)] = data
        self.note("mmap", rel, off, len(data))

    def op_read(self):
        if self.files:
            self.check_file(self.rng.choice(sorted(self.files)))
        if self.links:
            rel = self.rng.choice(sorted(self.links))
            if os.readlink(self.p(rel)) != self.links[rel]:
                self.fail(f"{rel}: link target differs")

    def op_rename(self):
        names = self.names()
        if not names:
            return
        src = self.rng.choice(sorted(names))
        if src in self.dirs:
            dst = self.new_name()
            if not dst or dst == src or dst.startswith(src + "/"):
                return
            os.rename(self.p(src), self.p(dst))
            moved = sorted(d for d in self.dirs if d == src or d.startswith(src + "/"))
            for d in moved:
                self.dirs.discard(d)
                self.dirs.add(dst + d[len(src):])
            for table in (self.files, self.links):
                for k in sorted(table):
                    if k.startswith(src + "/"):
                        table[dst + k[len(src):]] = table.pop(k)
        else:
            # Over an existing file sometimes (rename replaces it), else to a new name.
            if self.files and self.rng.random() < 0.3:
                dst = self.rng.choice(sorted(self.files))
            else:
                dst = self.new_name()
            if not dst or dst == src:
                return
            if self.files.get(src) is not None and self.files.get(dst) is self.files.get(src):
                return  # hard links of one inode: POSIX rename does nothing
            os.rename(self.p(src), self.p(dst))
            if src in self.files:
                self.files[dst] = self.files.pop(src)
                self.links.pop(dst, None)
            else:
                self.links[dst] = self.links.pop(src)
                self.files.pop(dst, None)
        self.note("rename", src, dst)

    def op_link(self):
        if not self.files:
            return
        src = self.rng.choice(sorted(self.files))
        dst = self.new_name()
        if not dst:
            return
        os.link(self.p(src), self.p(dst))
        self.files[dst] = self.files[src]
        self.note("link", src, dst)

    def op_symlink(self):
        dst = self.new_name()
        if not dst:
            return
        target = self.rng.choice(["../x", "a0", "/nonexistent/path", "." * self.rng.randrange(1, 4), "t" * 200])
        os.symlink(target, self.p(dst))
        self.links[dst] = target
        self.note("symlink", dst, target)

    def op_unlink(self):
        names = list(self.files) + list(self.links)
        if not names:
            return
        rel = self.rng.choice(sorted(names))
        os.unlink(self.p(rel))
        self.files.pop(rel, None)
        self.links.pop(rel, None)
        self.note("unlink", rel)

    def op_mkdir(self):
        n = self.new_name()
        if not n or n.count("/") > 5:
            return
        os.mkdir(self.p(n), 0o755)
        self.dirs.add(n)
        self.note("mkdir", n)

    def op_rmdir(self):
        empty = [d for d in self.dirs if d and not any(
            k.startswith(d + "/") for k in list(self.files) + list(self.links) + list(self.dirs))]
        if not empty:
            return
        d = self.rng.choice(sorted(empty))
        os.rmdir(self.p(d))
        self.dirs.discard(d)
        self.note("rmdir", d)

    def op_chmod(self):
        if not self.files:
            return
        rel = self.rng.choice(sorted(self.files))
        mode = self.rng.choice([0o600, 0o640, 0o644, 0o700, 0o755])
        os.chmod(self.p(rel), mode)
        self.files[rel].mode = mode
        self.note("chmod", rel, oct(mode))

    def op_xattr(self):
        if not self.files:
            return
        rel = self.rng.choice(sorted(self.files))
        node = self.files[rel]
        name = f"user.k{self.rng.randrange(4)}"
        if name in node.xattrs and self.rng.random() < 0.4:
            os.removexattr(self.p(rel), name)
            del node.xattrs[name]
        else:
            v = self.bytes_(self.rng.randrange(0, 200))
            os.setxattr(self.p(rel), name, v)
            node.xattrs[name] = v
        self.note("xattr", rel, name)

    def op_copy(self):
        """copy_file_range: a whole file into a new one (a clone when the source is committed
        content), or a range of one file over another (or over itself, apart)."""
        if not self.files:
            return
        src = self.rng.choice(sorted(self.files))
        node = self.files[src]
        if self.rng.random() < 0.5:
            dst = self.new_name()
            if not dst:
                return
            fi = os.open(self.p(src), os.O_RDONLY)
            try:
                fo = os.open(self.p(dst), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                try:
                    done = 0
                    while True:
                        n = os.copy_file_range(fi, fo, 1 << 30)
                        if n == 0:
                            break
                        done += n
                finally:
                    os.close(fo)
            finally:
                os.close(fi)
            if done != len(node.data):
                self.fail(f"copy {src} -> {dst}: {done} bytes copied, {len(node.data)} in the model")
            copy = Node(0o644)
            copy.data = bytearray(node.data)
            self.files[dst] = copy
            self.note("copy", src, dst, done)
            return
        dst = self.rng.choice(sorted(self.files))
        dnode = self.files[dst]
        off_in = self.rng.randrange(len(node.data) + 100)
        off_out = self.rng.randrange(len(dnode.data) + 4096)
        count = self.rng.randrange(1, 200000)
        if dnode is node and off_in < off_out + count and off_out < off_in + count:
            return  # one file, overlapping ranges: EINVAL by the kernel's rule
        fi = os.open(self.p(src), os.O_RDONLY)
        try:
            fo = os.open(self.p(dst), os.O_WRONLY)
            try:
                n = os.copy_file_range(fi, fo, count, off_in, off_out)
            finally:
                os.close(fo)
        finally:
            os.close(fi)
        want = max(0, min(count, len(node.data) - off_in))
        if n != want:
            self.fail(f"copy_file_range {src}@{off_in} -> {dst}@{off_out} of {count}: {n} bytes, {want} expected")
        if want:
            piece = bytes(node.data[off_in:off_in + want])
            if len(dnode.data) < off_out:
                dnode.data.extend(b"\0" * (off_out - len(dnode.data)))
            dnode.data[off_out:off_out + want] = piece
        self.note("copy_file_range", src, dst, off_in, off_out, count, n)

    def step(self):
        ops = [(self.op_create, 8), (self.op_write, 25), (self.op_append, 6), (self.op_truncate, 5),
               (self.op_read, 15), (self.op_rename, 8), (self.op_link, 3), (self.op_symlink, 3),
               (self.op_unlink, 6), (self.op_mkdir, 4), (self.op_rmdir, 2), (self.op_chmod, 3),
               (self.op_xattr, 4), (self.op_mmap, 2), (self.op_copy, 4)]
        if len(self.files) > 60:
            ops = [(self.op_unlink, 10), (self.op_read, 5), (self.op_write, 5)]
        fn = self.rng.choices([o for o, _ in ops], weights=[w for _, w in ops])[0]
        try:
            fn()
        except OSError as e:
            self.fail(f"{fn.__name__}: unexpected {errno.errorcode.get(e.errno, e.errno)}: {e}")
        self.ops += 1

    # ---- the end ----
    def check_all(self):
        """The directory holds exactly what the model says."""
        seen = set()
        for dirpath, dirnames, filenames in os.walk(self.root):
            for n in dirnames + filenames:
                full = os.path.join(dirpath, n)
                seen.add(os.path.relpath(full, self.root))
        want = set(self.files) | set(self.links) | {d for d in self.dirs if d}
        if seen != want:
            self.fail(f"names differ: extra {sorted(seen - want)[:5]}, missing {sorted(want - seen)[:5]}")
        inos = {}
        for rel, node in self.files.items():
            self.check_file(rel)
            st = os.lstat(self.p(rel))
            if st.st_mode & 0o7777 != node.mode:
                self.fail(f"{rel}: mode {oct(st.st_mode & 0o7777)}, model {oct(node.mode)}")
            got = {k: os.getxattr(self.p(rel), k) for k in os.listxattr(self.p(rel)) if k.startswith("user.")}
            if got != node.xattrs:
                self.fail(f"{rel}: xattrs {sorted(got)} differ from the model {sorted(node.xattrs)}")
            if inos.setdefault(node.id, st.st_ino) != st.st_ino:
                self.fail(f"{rel}: not the same inode as its hard links")
        for rel, target in self.links.items():
            if os.readlink(self.p(rel)) != target:
                self.fail(f"{rel}: link target differs")

    def model(self):
        return {
            "files": {r: {"sha256": hashlib.sha256(bytes(n.data)).hexdigest(), "size": len(n.data),
                          "mode": n.mode, "node": n.id,
                          "xattrs": {k: v.hex() for k, v in sorted(n.xattrs.items())}}
                      for r, n in sorted(self.files.items())},
            "links": dict(sorted(self.links.items())),
            "dirs": sorted(d for d in self.dirs if d),
            "ops": self.ops,
        }


def run_worker(root, seed, seconds, log_path):
    rng = random.Random(seed)
    w = Worker(root, rng, log_path)
    os.makedirs(root, exist_ok=False)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        w.step()
    w.check_all()
    with open(log_path, "w") as f:
        json.dump(w.model(), f)
    return 0


def check_tree(root, model_path):
    """An exported directory against a worker's model: names, kinds, content, modes, link
    targets, xattrs, and hard links (one inode per model node)."""
    with open(model_path) as f:
        m = json.load(f)
    bad = []
    seen = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            seen.add(os.path.relpath(os.path.join(dirpath, n), root))
    want = set(m["files"]) | set(m["links"]) | set(m["dirs"])
    if seen != want:
        bad.append(f"names differ: extra {sorted(seen - want)[:5]}, missing {sorted(want - seen)[:5]}")
    inos = {}
    for rel, f in m["files"].items():
        p = os.path.join(root, rel)
        try:
            with open(p, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            st = os.lstat(p)
        except OSError as e:
            bad.append(f"{rel}: {e}")
            continue
        if digest != f["sha256"]:
            bad.append(f"{rel}: content differs ({st.st_size} bytes, model {f['size']})")
        if st.st_mode & 0o7777 != f["mode"]:
            bad.append(f"{rel}: mode {oct(st.st_mode & 0o7777)}, model {oct(f['mode'])}")
        got = {k: os.getxattr(p, k).hex() for k in os.listxattr(p) if k.startswith("user.")}
        if got != f["xattrs"]:
            bad.append(f"{rel}: xattrs differ")
        if inos.setdefault(f["node"], st.st_ino) != st.st_ino:
            bad.append(f"{rel}: not one inode with its hard links")
    for rel, target in m["links"].items():
        try:
            if os.readlink(os.path.join(root, rel)) != target:
                bad.append(f"{rel}: link target differs")
        except OSError as e:
            bad.append(f"{rel}: {e}")
    for b in bad[:10]:
        print(f"fsstress: {root}: {b}", file=sys.stderr)
    return 1 if bad else 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--check":
        return check_tree(sys.argv[2], sys.argv[3])
    ap = argparse.ArgumentParser()
    ap.add_argument("--dirs", required=True, help="comma-separated worker directories (created)")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log", required=True)
    a = ap.parse_args()
    os.makedirs(a.log, exist_ok=True)
    pids = {}
    for i, d in enumerate(a.dirs.split(",")):
        pid = os.fork()
        if pid == 0:
            try:
                code = run_worker(d, a.seed * 1000 + i, a.seconds, os.path.join(a.log, f"w{i}.json"))
            except BaseException as e:  # noqa: BLE001 - report anything, never hang the parent
                print(f"fsstress: worker {i}: {e!r}", file=sys.stderr)
                code = 1
            os._exit(code)
        pids[pid] = i
    failed = 0
    while pids:
        pid, status = os.wait()
        i = pids.pop(pid)
        if status != 0:
            print(f"fsstress: worker {i} ({a.dirs.split(',')[i]}) failed", file=sys.stderr)
            failed += 1
    ops = 0
    for i in range(len(a.dirs.split(","))):
        try:
            with open(os.path.join(a.log, f"w{i}.json")) as f:
                ops += json.load(f)["ops"]
        except OSError:
            pass
    print(f"fsstress: {len(a.dirs.split(','))} workers, {ops} operations, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
