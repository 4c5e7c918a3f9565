#!/usr/bin/env python3
"""The fsync'ed writer of the crash test and its checker; run, not imported.

  fsync_writer.py write lines|blocks FILE SYNCED   write record i, fsync, append i to SYNCED;
                                                    repeat until a write fails (the daemon died)
  fsync_writer.py check lines|blocks FILE N        records 0..N-1 of FILE read back intact

lines:  record i is the appended line "line i xxx…" (i % 300 x's): small fsync'ed appends.
blocks: record i is 1 MiB at offset i MiB (sha256(i) repeated): whole-block writes that go to
        the daemon's data log.
"""
import hashlib
import os
import sys


def record(kind, i):
    if kind == "lines":
        return b"line %d %s\n" % (i, b"x" * (i % 300))
    return hashlib.sha256(b"%d" % i).digest() * 32768


def write(kind, path, synced):
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if kind == "lines" else 0)
    fd = os.open(path, flags, 0o644)
    done = open(synced, "w")
    i = 0
    try:
        while True:
            if kind == "lines":
                os.write(fd, record(kind, i))
            else:
                os.pwrite(fd, record(kind, i), i << 20)
            os.fsync(fd)
            done.write("%d\n" % i)
            done.flush()
            i += 1
    except OSError:
        pass


def check(kind, path, n):
    data = open(path, "rb").read()
    pos = 0
    for i in range(n):
        want = record(kind, i)
        got = data[pos:pos + len(want)]
        if got != want:
            sys.exit("%s: record %d differs: %r…" % (path, i, got[:40]))
        pos += len(want)


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] not in ("write", "check") or \
            sys.argv[2] not in ("lines", "blocks"):
        sys.exit(__doc__)
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        check(sys.argv[2], sys.argv[3], int(sys.argv[4]))
