#!/usr/bin/env python3
"""One user's part of the multi-user test (tests/hostile/multi_user_test.sh): runs PHASE's
operations under ROOT and prints one line per operation -- "OK uid gid mode" for what it made or
changed, or "ERR <errno name>" -- so the lines from a mount and from ext4 can be compared."""
import errno
import os
import stat
import sys

root, phase = sys.argv[1], sys.argv[2]


def p(rel):
    return os.path.join(root, rel)


def st(rel):
    s = os.lstat(p(rel))
    return f"{s.st_uid} {s.st_gid} {stat.S_IFMT(s.st_mode):o} {stat.S_IMODE(s.st_mode):04o}"


def run(name, fn, show=None):
    try:
        fn()
        print(f"{name}: OK {st(show) if show else ''}".rstrip())
    except OSError as e:
        print(f"{name}: ERR {errno.errorcode.get(e.errno, e.errno)}")


def create(rel, data=b"x", mode=0o666):
    fd = os.open(p(rel), os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
    os.write(fd, data)
    os.close(fd)


def write(rel, data=b"more"):
    fd = os.open(p(rel), os.O_WRONLY | os.O_APPEND)
    os.write(fd, data)
    os.close(fd)


def read(rel):
    with open(p(rel), "rb") as f:
        f.read()


if phase == "root":
    os.umask(0)
    os.mkdir(p("shared"), 0o1777)
    os.chmod(p("shared"), 0o1777)
    os.mkdir(p("sgid"), 0o775)
    os.chown(p("sgid"), 0, 3000)
    os.chmod(p("sgid"), 0o2775)
    os.mkdir(p("private"), 0o700)
    os.chown(p("private"), 2001, 2001)
    os.mkdir(p("ro"), 0o755)
    create("ro/rootfile", b"root's", 0o644)
    for d in ("shared", "sgid", "private", "ro", "ro/rootfile"):
        print(f"{d}: {st(d)}")
elif phase == "u1":
    os.umask(0o022)
    run("create in sticky dir", lambda: create("shared/a1"), "shared/a1")
    run("mkdir in sticky dir", lambda: os.mkdir(p("shared/d1"), 0o777), "shared/d1")
    run("create in setgid dir", lambda: create("sgid/f1"), "sgid/f1")
    run("mkdir in setgid dir", lambda: os.mkdir(p("sgid/sub"), 0o777), "sgid/sub")
    run("create in setgid subdir", lambda: create("sgid/sub/f2"), "sgid/sub/f2")
    run("create in own private dir", lambda: create("private/p1", b"secret", 0o600), "private/p1")
    run("create in root's dir", lambda: create("ro/x"))
    run("write root's file", lambda: write("ro/rootfile"))
    run("read root's file", lambda: read("ro/rootfile"))
    os.umask(0o077)
    run("create with umask 077", lambda: create("shared/a2"), "shared/a2")
    run("mkdir with umask 077", lambda: os.mkdir(p("shared/d2"), 0o777), "shared/d2")
    os.umask(0o022)
    run("chmod own file setuid", lambda: os.chmod(p("shared/a1"), 0o4755), "shared/a1")
    run("chown own file to another user", lambda: os.chown(p("shared/a1"), 2002, -1))
    run("chgrp own file to a group of mine", lambda: os.chown(p("shared/a1"), -1, 3000), "shared/a1")
    run("chgrp own file to a group not mine", lambda: os.chown(p("shared/a1"), -1, 2002))
    run("chmod setgid on a file of my group", lambda: os.chmod(p("sgid/f1"), 0o2755), "sgid/f1")
    run("symlink", lambda: os.symlink("a1", p("shared/s1")), "shared/s1")
    run("world-writable setuid file", lambda: (create("shared/w1"), os.chmod(p("shared/w1"), 0o4666)), "shared/w1")
    run("world-writable setgid file", lambda: (create("shared/w2"), os.chmod(p("shared/w2"), 0o2676)), "shared/w2")
    run("setxattr on own file", lambda: os.setxattr(p("shared/a1"), "user.k", b"v"))
elif phase == "u2":
    os.umask(0o022)
    run("read in another's private dir", lambda: read("private/p1"))
    run("list another's private dir", lambda: os.listdir(p("private")))
    run("unlink another's file in sticky dir", lambda: os.unlink(p("shared/a1")))
    run("rename another's file in sticky dir", lambda: os.rename(p("shared/a1"), p("shared/mine")))
    run("rmdir another's dir in sticky dir", lambda: os.rmdir(p("shared/d1")))
    run("write another's world-writable setuid file", lambda: write("shared/w1"), "shared/w1")
    run("write another's world-writable setgid file", lambda: write("shared/w2"), "shared/w2")
    run("truncate another's world-writable file", lambda: os.truncate(p("shared/w1"), 1), "shared/w1")
    run("create in sticky dir", lambda: create("shared/b1"), "shared/b1")
    run("hard link to another's file", lambda: os.link(p("shared/a1"), p("shared/hl")))
    run("chmod another's file", lambda: os.chmod(p("shared/a1"), 0o777))
    run("utime another's file", lambda: os.utime(p("shared/a1")))
    run("setxattr on another's file", lambda: os.setxattr(p("shared/a1"), "user.k", b"w"))
    run("getxattr on another's file", lambda: os.getxattr(p("shared/a1"), "user.k"))
    run("mkdir in a setgid dir not of my group", lambda: os.mkdir(p("sgid/u2d")))
    run("read another's 0755 file", lambda: read("shared/a1"))
    run("read another's 0600 file", lambda: read("shared/a2"))
elif phase == "u1-again":
    run("unlink another's file in sticky dir", lambda: os.unlink(p("shared/b1")))
    run("rmdir own dir in sticky dir", lambda: os.rmdir(p("shared/d1")))
    run("unlink own file in sticky dir", lambda: os.unlink(p("shared/a2")))
    run("rename own file in sticky dir", lambda: os.rename(p("shared/a1"), p("shared/a3")), "shared/a3")
else:
    sys.exit(f"unknown phase {phase}")
