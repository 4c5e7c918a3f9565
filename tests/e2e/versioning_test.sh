#!/usr/bin/env bash
# The daemon path of versioning: mount, write, commit, status, fork, diverge, export, log,
# diff, cat, verify; the daemon exits by itself once the last mount goes.
source "$(dirname "$0")/lib.bash" "$1"
M=$WORK/m-main F=$WORK/m-f1
EXP_ONE=$WORK/exp-one EXP_MAIN=$WORK/exp-main EXP_F1=$WORK/exp-f1

# populate ROOT: the first tree, written the same way into a mount and a plain directory.
populate() {
  mkdir -p "$1/src/lib" "$1/docs" "$1/empty-dir"
  printf 'hello\n' >"$1/hello.txt"
  printf 'int main() { return 0; }\n' >"$1/src/main.c"
  printf 'lib\n' >"$1/src/lib/util.c"
  head -c 300000 "$WORK/random" >"$1/docs/big.bin"
  : >"$1/empty"
  printf '#!/bin/sh\necho hi\n' >"$1/run.sh"
  chmod 755 "$1/run.sh"
  chmod 600 "$1/src/lib/util.c"
  chmod 750 "$1/docs"
  ln -s hello.txt "$1/link"
  ln -s ../hello.txt "$1/src/up-link"
  ln -s /nonexistent/target "$1/dangling"
  ln "$1/src/main.c" "$1/main-hardlink.c"
  setfattr -n user.color -v blue "$1/hello.txt"
  setfattr -n user.tag -v dir "$1/docs"
}
# Different edits on each branch after the fork.
diverge_main() {
  printf 'hello from main\n' >>"$1/hello.txt"
  rm "$1/src/lib/util.c"
  mv "$1/docs" "$1/documents"
  mkdir "$1/main-only"
  printf 'only main\n' >"$1/main-only/file"
  chmod 644 "$1/run.sh"
}
diverge_f1() {
  printf 'fork edit\n' >"$1/src/main.c"   # also changes the hard link
  rm "$1/link"
  mv "$1/empty" "$1/src/moved-empty"
  rmdir "$1/empty-dir"
  printf 'f1 file\n' >"$1/f1.txt"
  ln -s f1.txt "$1/f1-link"
  setfattr -n user.color -v red "$1/hello.txt"
  dd if="$WORK/random" of="$1/docs/big.bin" bs=4096 seek=10 count=2 conv=notrunc status=none
}

head -c 400000 /dev/urandom >"$WORK/random"
lfs init "$LAYERFS_STORE" >/dev/null
mnt main "$M" >/dev/null
[ -S "$LAYERFS_STORE/control.sock" ] || fail "no control socket after mount"
pid=$(daemon_pid)
[ -n "$pid" ] && kill -0 "$pid" || fail "no daemon pid"

mkdir -p "$EXP_ONE"
populate "$M"
populate "$EXP_ONE"
same_tree "$M" "$EXP_ONE"
[ "$(inode_of "$M/src/main.c")" = "$(inode_of "$M/main-hardlink.c")" ] || fail "hard link has its own inode"
[ "$(stat -c %h "$M/src/main.c")" = 2 ] || fail "hard-linked file nlink is $(stat -c %h "$M/src/main.c"), not 2"

# status before the commit: everything added.
lfs status "$M" >"$WORK/st"
for p in hello.txt src src/main.c src/lib/util.c docs/big.bin empty run.sh link dangling main-hardlink.c empty-dir; do
  grep -qP "^A\t$p\$" "$WORK/st" || fail "status lacks 'A $p': $(cat "$WORK/st")"
done
c1=$(lfs commit "$M" -m one)
is_id "$c1" || fail "commit printed '$c1'"
[ -z "$(lfs status "$M")" ] || fail "status not empty after commit: $(lfs status "$M")"
[ "$(lfs branch | awk '$1=="main"{print $2}')" = "$c1" ] || fail "main is not at $c1"
# the branch list names where a branch is mounted (as git branch marks the current one)
[ "$(lfs branch | grep '^main ')" = "main $c1  mounted at $(realpath "$M")" ] || fail "branch: $(lfs branch)"

# status lists modifications and deletions too.
printf 'x\n' >>"$M/hello.txt"
rm "$M/empty"
printf 'n\n' >"$M/new"
lfs status "$M" >"$WORK/st"
grep -qP '^M\thello.txt$' "$WORK/st" || fail "status lacks M hello.txt: $(cat "$WORK/st")"
grep -qP '^D\tempty$' "$WORK/st" || fail "status lacks D empty"
grep -qP '^A\tnew$' "$WORK/st" || fail "status lacks A new"
[ "$(wc -l <"$WORK/st")" = 3 ] || fail "status should list 3 paths: $(cat "$WORK/st")"
lfs reset "$M" >/dev/null
[ -z "$(lfs status "$M")" ] || fail "status not empty after reset"
same_tree "$M" "$EXP_ONE"

# Fork at the commit and mount it: both mounts show the same tree.
lfs fork f1 "$c1" >/dev/null
mnt f1 "$F" >/dev/null
same_tree "$F" "$EXP_ONE"
same_tree "$M" "$F"
[ "$(inode_of "$F/src/main.c")" = "$(inode_of "$F/main-hardlink.c")" ] || fail "hard link split on the fork's mount"
[ "$(stat -c %h "$F/src/main.c")" = 2 ] || fail "fork's hard-linked file nlink is $(stat -c %h "$F/src/main.c"), not 2"
[ "$(lfs mounts | wc -l)" = 2 ] || fail "mounts should list 2: $(lfs mounts)"

# Inode numbers follow the Commit: a second fork of c1, walked in another order, numbers every
# path as f1 does, and again after it was unmounted (its untouched state dropped) and remounted.
numbers() { (cd "$1" && find . -mindepth 1 -printf '%i %p\n' | sort -k2); }
numbers "$F" >"$WORK/ino-f1"
lfs fork f3 "$c1" >/dev/null
F3=$WORK/mnt-f3
mnt f3 "$F3" >/dev/null
ls -R "$F3/src" >/dev/null  # materialise a subtree before its parent's siblings
numbers "$F3" >"$WORK/ino-f3"
cmp -s "$WORK/ino-f1" "$WORK/ino-f3" || fail "forks of one commit number inodes differently: $(diff "$WORK/ino-f1" "$WORK/ino-f3")"
lfs umount "$F3" >/dev/null
mnt f3 "$F3" >/dev/null
numbers "$F3" >"$WORK/ino-f3-again"
cmp -s "$WORK/ino-f3" "$WORK/ino-f3-again" || fail "inode numbers moved across a remount"
lfs umount "$F3" >/dev/null

cp -a "$EXP_ONE" "$EXP_MAIN"
cp -a "$EXP_ONE" "$EXP_F1"
diverge_main "$M"
diverge_main "$EXP_MAIN"
diverge_f1 "$F"
diverge_f1 "$EXP_F1"
same_tree "$M" "$EXP_MAIN"
same_tree "$F" "$EXP_F1"
# status -p: the uncommitted changes as Git's patch against the head (as `git diff HEAD`), the
# live side read from the Workspace.
(cd "$M" && lfs status -p) >"$WORK/status.patch"
old_id=$(lfs cat "$c1:hello.txt" | git hash-object --stdin | cut -c1-7)
new_id=$(git hash-object "$M/hello.txt" | cut -c1-7)
grep -A6 '^diff --git a/hello.txt b/hello.txt$' "$WORK/status.patch" >"$WORK/hello.patch"
[ "$(sed -n 2p "$WORK/hello.patch")" = "index $old_id..$new_id 100644" ] || fail "status -p index line: $(cat "$WORK/hello.patch")"
grep -q '^+hello from main$' "$WORK/hello.patch" || fail "status -p lacks the appended line: $(cat "$WORK/status.patch")"
grep -A2 '^diff --git a/run.sh b/run.sh$' "$WORK/status.patch" | grep -q '^new mode 100644$' || fail "status -p: run.sh's mode"
grep -A1 '^diff --git a/src/lib/util.c b/src/lib/util.c$' "$WORK/status.patch" | grep -q '^deleted file mode 100600$' ||
  fail "status -p: util.c's removal"
# diff A without B: from A to the working tree of HEAD, as `git diff A`: from main's mount against
# its head, the same patch as status -p.
(cd "$M" && lfs diff -p "$c1") >"$WORK/diff-wt.patch"
cmp -s "$WORK/status.patch" "$WORK/diff-wt.patch" ||
  fail "diff -p c1 in main's mount is not status -p: $(diff "$WORK/status.patch" "$WORK/diff-wt.patch")"
# and `diff` alone is `diff HEAD`, as `git diff`
(cd "$M/src" && lfs diff -p) | cmp -s "$WORK/status.patch" - || fail "diff -p alone in main's mount is not status -p"
(cd "$M" && lfs diff --json) >"$WORK/diff-alone.json"
lfs status --json "$M" | python3 -c '
import json, sys
changes = json.load(sys.stdin)["changes"]
assert changes and json.load(open(sys.argv[1])) == changes, "diff --json alone is not status'"'"'s changes"' "$WORK/diff-alone.json" ||
  fail "diff --json alone in main's mount"
# -M: a moved file is one change R (Git's -M) in status and in diff against the working tree,
# found by content (the Workspace's ids; an empty file pairs only with an empty one).
lfs status -M "$M" >"$WORK/st-M"
grep -qx $'R100\tdocs/big.bin\tdocuments/big.bin' "$WORK/st-M" && ! grep -q 'D.docs/big.bin' "$WORK/st-M" ||
  fail "status -M: $(cat "$WORK/st-M")"
lfs status "$M" | grep -qx $'D\tdocs/big.bin' || fail "status without -M: the move is not D and A"
(cd "$M" && lfs diff -M) | cmp -s "$WORK/st-M" - || fail "diff -M in main's mount is not status -M"
lfs status -M "$F" | grep -qx $'R100\tempty\tsrc/moved-empty' || fail "status -M of f1: $(lfs status -M "$F")"
lfs status -M -p "$M" >"$WORK/st-M.patch"
grep -A3 '^diff --git a/docs/big.bin b/documents/big.bin$' "$WORK/st-M.patch" | tr '\n' '|' |
  grep -q '^diff --git a/docs/big.bin b/documents/big.bin|similarity index 100%|rename from docs/big.bin|rename to documents/big.bin|$' ||
  fail "status -M -p: $(cat "$WORK/st-M.patch")"
c2=$(lfs commit "$M" -m main-two)
c3=$(lfs commit "$F" -m f1-two)
# From another Commit: in f1's mount (nothing uncommitted) the same as diff A f1's-head, in the
# read-only mount of c1 as diff A c1; an uncommitted change shows, with its path and its patch.
[ "$(cd "$F/src" && lfs diff "$c2")" = "$(lfs diff "$c2" "$c3")" ] || fail "diff c2 in f1's mount"
[ -n "$(lfs diff "$c2" "$c3")" ] || fail "c2 and c3 do not differ"
mkdir "$WORK/ro-c1"
lfs mount "$c1" "$WORK/ro-c1" >/dev/null
[ "$(cd "$WORK/ro-c1" && lfs diff --json "$c2")" = "$(lfs diff --json "$c2" "$c1")" ] || fail "diff c2 in c1's read-only mount"
lfs umount "$WORK/ro-c1"
echo "one more line" >>"$F/f1.txt"
[ "$(cd "$F/src" && lfs diff HEAD -- ../f1.txt)" = "$(printf 'M\tf1.txt')" ] || fail "diff HEAD -- ../f1.txt in f1's mount"
(cd "$F" && lfs diff -p "$c1" -- f1.txt) | grep -qx '+one more line' || fail "diff -p c1 -- f1.txt lacks the new line"
[ "$(cd "$WORK" && lfs diff "$c2")" = "" ] || fail "diff c2 outside a mount is not against main's clean Workspace"
lfs reset "$F" >/dev/null
[ "$(cat "$F/f1.txt")" = "f1 file" ] && [ -z "$(lfs status "$F")" ] || fail "reset of f1's mount"
is_id "$c2" && is_id "$c3" || fail "commit ids: $c2 $c3"
[ "$c2" != "$c3" ] || fail "divergent commits have one id"

# HEAD, as in Git: the branch mounted at the working directory (else main); log and fork start
# there by default.
first_id() { python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])'; }
[ "$(cd "$F/src" && lfs log -n 1 --json | first_id)" = "$c3" ] || fail "log in f1's mount does not start at f1"
[ "$(cd "$F" && lfs log -n 1 --json HEAD~1 | first_id)" = "$c1" ] || fail "HEAD~1 in f1's mount"
[ "$(cd "$M" && lfs log -n 1 --json HEAD | first_id)" = "$c2" ] || fail "HEAD in main's mount"
[ "$(cd "$F/src" && lfs rev-parse HEAD)" = "$c3" ] || fail "rev-parse HEAD in f1's mount"
[ "$(cd "$WORK" && lfs log -n 1 --json HEAD | first_id)" = "$c2" ] || fail "HEAD outside a mount is not main"
[ "$(cd "$F" && lfs cat HEAD:f1.txt)" = "$(cat "$F/f1.txt")" ] || fail "cat HEAD:PATH in f1's mount"
(cd "$F" && lfs diff HEAD~1 HEAD) | grep -q "f1.txt" || fail "diff HEAD~1 HEAD in f1's mount"
[ "$(cd "$F" && lfs fork f1-copy)" = "f1-copy $c3" ] || fail "fork in f1's mount does not start at f1"
lfs branch -d f1-copy >/dev/null
# Paths after `--` are relative to the working directory in a mount, as Git reads them.
[ "$(cd "$F/src" && lfs log --json -- main.c | first_id)" = "$c3" ] || fail "log -- main.c in f1's src"
[ "$(cd "$F/src" && lfs log --json -- main.c | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 2 ] ||
  fail "log -- main.c in f1's src: $(cd "$F/src" && lfs log -- main.c)"
[ "$(cd "$F/src" && lfs diff HEAD~1 HEAD -- ../f1.txt | cut -f2)" = f1.txt ] || fail "diff -- ../f1.txt in f1's src"
(cd "$F" && expect_fail fork HEAD)
grep -q "invalid branch name 'HEAD'" "$WORK/stderr" || fail "a branch named HEAD: $(cat "$WORK/stderr")"
lfs mount "$c1" "$WORK/ro-c1" >/dev/null
[ "$(cd "$WORK/ro-c1" && lfs log -n 1 --json HEAD | first_id)" = "$c1" ] || fail "HEAD in a read-only mount of $c1"
lfs umount "$WORK/ro-c1"

# Every commit exported equals the tree built by hand.
for pair in "$c1:$EXP_ONE" "$c2:$EXP_MAIN" "$c3:$EXP_F1"; do
  c=${pair%%:*} exp=${pair#*:}
  lfs export "$c" "$WORK/out-$c" >/dev/null
  same_tree "$WORK/out-$c" "$exp"
done
# The hard link survives export.
[ "$(inode_of "$WORK/out-$c1/src/main.c")" = "$(inode_of "$WORK/out-$c1/main-hardlink.c")" ] ||
  fail "export of $c1 split the hard link"

# log --json: parents.
lfs log --json main >"$WORK/log-main"
lfs log --json f1 >"$WORK/log-f1"
python3 - "$WORK/log-main" "$WORK/log-f1" "$c1" "$c2" "$c3" <<'PY'
import json, sys
m, f = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
c1, c2, c3 = sys.argv[3:6]
assert [e["id"] for e in m[:2]] == [c2, c1], m
assert [e["id"] for e in f[:2]] == [c3, c1], f
assert m[0]["parents"] == [c1] and f[0]["parents"] == [c1], (m[0], f[0])
assert m[1]["parents"] == [m[2]["id"]] and m[2]["parents"] == [] and len(m) == 3, m
assert m[0]["message"] == "main-two" and f[0]["message"] == "f1-two" and m[1]["message"] == "one"
PY

# diff main f1 lists the divergent paths.
lfs diff main f1 >"$WORK/diff"
for p in hello.txt src/main.c main-hardlink.c link src/lib/util.c documents docs f1.txt f1-link main-only empty src/moved-empty empty-dir run.sh docs/big.bin; do
  grep -qP "^[ADMTP]\t\Q$p\E\$" "$WORK/diff" || fail "diff main f1 lacks $p: $(cat "$WORK/diff")"
done
grep -qP '^M\tsrc/main.c$' "$WORK/diff" || fail "src/main.c not M"
grep -qP '^[AD]\tf1.txt$' "$WORK/diff" || fail "f1.txt not A/D"
! grep -qP '\tsrc/up-link$' "$WORK/diff" || fail "unchanged path in diff"

# cat
[ "$(lfs cat "$c1:hello.txt")" = hello ] || fail "cat $c1:hello.txt"
[ "$(lfs cat "$c3:src/main.c")" = "fork edit" ] || fail "cat $c3:src/main.c"
[ "$(lfs cat "f1:main-hardlink.c")" = "fork edit" ] || fail "cat f1:main-hardlink.c"
cmp <(lfs cat "$c2:documents/big.bin") "$EXP_MAIN/documents/big.bin" || fail "cat of big.bin differs"
expect_fail cat "$c2:docs/big.bin"

# A hard link across directories on a fresh fork: right nlink at first sight, and a write
# through one link is committed through both.
G=$WORK/m-f2
lfs fork f2 "$c1" >/dev/null
mnt f2 "$G" >/dev/null
[ "$(stat -c %h "$G/main-hardlink.c")" = 2 ] || fail "fresh fork: nlink of a hard link is $(stat -c %h "$G/main-hardlink.c")"
printf 'through the link\n' >"$G/main-hardlink.c"
c4=$(lfs commit "$G" -m f2-link)
[ "$(lfs cat "$c4:src/main.c")" = "through the link" ] || fail "write through a hard link not committed for its other name"
lfs export "$c4" "$WORK/out-c4" >/dev/null
[ "$(inode_of "$WORK/out-c4/src/main.c")" = "$(inode_of "$WORK/out-c4/main-hardlink.c")" ] || fail "export of $c4 split the hard link"
lfs umount "$G"

# cp inside a mount: its copy_file_range is served by the daemon (no READ or WRITE through the
# mount); a committed file is cloned (the copy's commit records the same content id), a file
# written since is copied byte for byte.
requests() {  # requests MOUNTPOINT OP: how many OP requests the mount served
  lfs mounts --json | python3 -c 'import json,sys
for m in json.load(sys.stdin):
    if m["mountpoint"] == sys.argv[1]: print(m.get("requests", {}).get(sys.argv[2], 0))' "$1" "$2"
}
head -c 3000000 /dev/urandom >"$WORK/clone-a"
cp "$WORK/clone-a" "$M/clone-a"  # across file systems: cp reads and writes
c5=$(lfs commit "$M" -m clone-base)
reads=$(requests "$M" read) writes=$(requests "$M" write) copies=$(requests "$M" copy_file_range)
cp "$M/clone-a" "$M/clone-b"
printf 'written since the commit\n%.0s' $(seq 5000) >"$M/clone-c"
cp "$M/clone-c" "$M/clone-d"
[ "$(requests "$M" copy_file_range)" -ge $((copies + 2)) ] || fail "cp sent no copy_file_range to the daemon"
[ "$(requests "$M" read)" = "$reads" ] || fail "cp read through the mount: $reads -> $(requests "$M" read) READs"
cmp "$M/clone-b" "$WORK/clone-a" || fail "clone-b differs from clone-a"
cmp "$M/clone-d" "$M/clone-c" || fail "clone-d differs from clone-c"
[ "$(stat -c %s "$M/clone-d")" = $((25 * 5000)) ] || fail "clone-d has $(stat -c %s "$M/clone-d") bytes"
c6=$(lfs commit "$M" -m clones)
id_of() { lfs show "$1" --json | python3 -c 'import json,sys
for c in json.load(sys.stdin)["changes"]:
    if c["path"] == sys.argv[1]: print(c["after"]["id"])' "$2"; }
[ -n "$(id_of "$c5" clone-a)" ] && [ "$(id_of "$c6" clone-b)" = "$(id_of "$c5" clone-a)" ] ||
  fail "the clone of a committed file has another content id: $(id_of "$c6" clone-b) vs $(id_of "$c5" clone-a)"
[ "$(id_of "$c6" clone-d)" = "$(id_of "$c6" clone-c)" ] || fail "clone-d and clone-c differ in $c6"
cmp <(lfs cat "$c6:clone-b") "$WORK/clone-a" || fail "cat $c6:clone-b differs"
rm "$M/clone-a" "$M/clone-b" "$M/clone-c" "$M/clone-d" "$WORK/clone-a"
lfs commit "$M" -m "clones gone" >/dev/null

lfs verify >/dev/null || fail "verify failed while mounted"
lfs stats --json | python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["commits"] >= 4, j' || fail "stats"

lfs umount "$M"
! is_mounted "$M" || fail "$M still mounted"
lfs umount "$F"
! is_mounted "$F" || fail "$F still mounted"
wait_daemon_gone 10
# Without the daemon the same verbs run in-process.
[ "$(lfs cat "$c3:f1.txt")" = "f1 file" ] || fail "in-process cat"
lfs verify >/dev/null || fail "in-process verify"
echo "versioning ok"
