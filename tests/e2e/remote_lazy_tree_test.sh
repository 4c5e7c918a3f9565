#!/usr/bin/env bash
# A lazy fork of a tree of thousands of files mounts and reads one file fetching about that
# file's objects, not the tree's; `ls -l` of a directory fetches that directory only, not its
# subdirectories (their nlink is in its entries, Store format 7); and nlink and hard links deep
# in the tree are exact through the lazy mount (stat compared with the imported source on disk).
# The bounds are on the remote's fetch counters (`remote --json`), never on time.
# REMOTE_KIND=rados|s3 (remote_lib.bash) runs the same against the test cluster.
source "$(dirname "$0")/lib.bash" "$1"
source "$(dirname "$0")/remote_lib.bash"
A=$WORK/store B=$WORK/B SRC=$WORK/src
URL=$(new_remote_url lazytree)
a() { LAYERFS_STORE=$A lfs "$@"; }
b() { LAYERFS_STORE=$B lfs "$@"; }
cleanup_b() {
  local d pid
  for d in "${MOUNTED[@]}"; do is_mounted "$d" && timeout 10 "$LAYERFS" umount "$d" >/dev/null 2>&1 || true; done
  pid=$(cat "$B/layerfsd.pid" 2>/dev/null || true)
  [ -n "$pid" ] && running "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do running "$pid" || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}
trap 'rc=$?; cleanup_b; (exit $rc); cleanup' EXIT

# --- The tree: 30 directories of 6 subdirectories of 25 text files (4,500 files, ~15 MB), with
# hard links deep inside two of them (within one directory's subtree, and across two).
python3 - "$SRC" <<'EOF'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(7)
words = [f"w{i}" for i in range(3000)]
for d in range(30):
    for s in range(6):
        p = os.path.join(root, f"d{d:02d}", f"s{s}")
        os.makedirs(p)
        for f in range(25):
            with open(os.path.join(p, f"f{f:02d}.txt"), "w") as fh:
                fh.write(f"file {d}/{s}/{f}\n" + " ".join(rnd.choice(words) for _ in range(rnd.randint(200, 1000))) + "\n")
os.makedirs(os.path.join(root, "d07/s2/deep/er"))
os.makedirs(os.path.join(root, "d16/s3/deeper/x"))
with open(os.path.join(root, "d07/s2/deep/er/a"), "w") as fh:
    fh.write("linked within d07\n")
os.link(os.path.join(root, "d07/s2/deep/er/a"), os.path.join(root, "d07/s4/b"))
with open(os.path.join(root, "d15/s1/c"), "w") as fh:
    fh.write("linked across d15 and d16\n")
os.link(os.path.join(root, "d15/s1/c"), os.path.join(root, "d16/s3/deeper/x/d"))
os.link(os.path.join(root, "d15/s1/c"), os.path.join(root, "d16/s3/e"))
EOF
a init "$A" >/dev/null
a import "$SRC" -m "4,500 files" >/dev/null
a remote add origin "$URL"
a push origin main --json >"$WORK/push.json"
pushed=$(python3 -c "import json; print(json.load(open('$WORK/push.json'))['sent']['bytes'])")
[ "$pushed" -gt 1000000 ] || fail "the push sent only $pushed bytes"

# fetched: "OBJECTS BYTES" fetched on first read so far by B (its daemon's lazy source).
fetched() {
  b remote --json | python3 -c '
import json, sys
r = [x for x in json.load(sys.stdin) if x["name"] == "origin"][0]
f = r.get("fetched_on_read", {})
print(f.get("objects", 0), f.get("bytes", 0))'
}
# grew LABEL BEFORE MAX_BYTES: fails if more than MAX_BYTES were fetched since BEFORE.
grew() {
  local now
  now=$(fetched)
  echo "$1: fetched $(( ${now% *} - ${2% *} )) objects, $(( ${now#* } - ${2#* } )) bytes (of $pushed pushed)"
  [ $(( ${now#* } - ${2#* } )) -le "$3" ] || fail "$1 fetched $(( ${now#* } - ${2#* } )) bytes, more than $3"
}

# --- B: lazy clone, fork, mount, read one file. A remote frame holds up to 128 KiB, so each
# object missed costs at most about that: the commit, the root, d12, d12/s3, the file and the
# directories on the way are a handful of frames, not the tree's hundreds of KB of trees and
# the blobs packed beside them.
b clone --lazy "$URL" "$B" >/dev/null
b fork work origin/main >/dev/null
LAYERFS_STORE=$B mnt work "$WORK/mB" >/dev/null
M=$WORK/mB
f0=$(fetched)
cmp "$M/d12/s3/f17.txt" "$SRC/d12/s3/f17.txt" || fail "the lazily read file differs"
grew "mount + read one file" "$f0" $((1024 * 1024))
[ $(( $(fetched | cut -d' ' -f2) * 4 )) -lt "$pushed" ] || fail "mount + read fetched a quarter of the push"

# --- ls -l of a directory not seen yet: its tree (a frame), not its subdirectories' trees.
f1=$(fetched)
ls -l "$M/d21" >"$WORK/ls.out"
[ "$(grep -c '^d' "$WORK/ls.out")" = 6 ] || fail "ls -l d21: $(cat "$WORK/ls.out")"
for s in 0 1 2 3 4 5; do
  [ "$(stat -c %h "$M/d21/s$s")" = 2 ] || fail "d21/s$s has nlink $(stat -c %h "$M/d21/s$s")"
done
[ "$(stat -c %h "$M/d21")" = 8 ] || fail "d21 has nlink $(stat -c %h "$M/d21")"
grew "ls -l and stat of d21's subdirectories" "$f1" $((300 * 1024))

# --- Hard links deep in the tree, before anything else is walked: one inode per group, exact
# nlink, and a write through one name reaches the others.
[ "$(stat -c '%h %i' "$M/d07/s2/deep/er/a")" = "$(stat -c '%h %i' "$M/d07/s4/b")" ] || fail "a and b are not one inode"
[ "$(stat -c %h "$M/d07/s4/b")" = 2 ] || fail "b has nlink $(stat -c %h "$M/d07/s4/b")"
[ "$(stat -c %h "$M/d16/s3/deeper/x/d")" = 3 ] || fail "d has nlink $(stat -c %h "$M/d16/s3/deeper/x/d")"
[ "$(stat -c %i "$M/d16/s3/e")" = "$(stat -c %i "$M/d15/s1/c")" ] || fail "e and c are not one inode"
[ "$(stat -c %h "$M/d16/s3")" = 3 ] || fail "d16/s3 has nlink $(stat -c %h "$M/d16/s3")"
printf 'through d\n' >>"$M/d16/s3/deeper/x/d"
[ "$(cat "$M/d15/s1/c")" = "$(printf 'linked across d15 and d16\nthrough d')" ] || fail "c: $(cat "$M/d15/s1/c")"
grew "the hard links" "$f1" $((1024 * 1024))
printf 'through d\n' >>"$SRC/d16/s3/deeper/x/d"  # the source follows, for the comparison below

# --- Every name's type, permissions, nlink and file size, through the mount and on disk.
listing() { (cd "$1" && find . -printf '%p %y %m %n %s\n' | awk '$2 == "d" { $5 = 0 } { print }' | sort); }
listing "$SRC" >"$WORK/src.list"
listing "$M" >"$WORK/mnt.list"
[ "$(wc -l <"$WORK/src.list")" -gt 4600 ] || fail "the source listing is short"
diff "$WORK/src.list" "$WORK/mnt.list" >"$WORK/list.diff" || fail "the lazy mount differs from the source: $(head -20 "$WORK/list.diff")"

# --- Committed and pushed back: the links are still one group in the new Commit, and B's tree
# verifies (summaries included) once fetched.
b commit "$M" -m "through d" >/dev/null
b verify --fetch >/dev/null || fail "B's Store does not verify"
b push origin work >/dev/null
a fetch origin >/dev/null
a export origin/work "$WORK/out" >/dev/null
[ "$(stat -c %h "$WORK/out/d16/s3/deeper/x/d")" = 3 ] || fail "exported d has nlink $(stat -c %h "$WORK/out/d16/s3/deeper/x/d")"
[ "$(stat -c %i "$WORK/out/d07/s2/deep/er/a")" = "$(stat -c %i "$WORK/out/d07/s4/b")" ] || fail "exported a and b are two files"
echo "PASS"
