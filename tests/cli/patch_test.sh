#!/usr/bin/env bash
# diff -p and show -p: Git's unified diff of every change, which `git apply` takes: applied to
# the export of A it gives the tree of B (text edits, additions, removals, a mode change, a
# symlink retargeted, a file turned into a symlink); binary files are named, not diffed.
source "$(dirname "$0")/lib.bash" "$1"
command -v git >/dev/null || fail "git is needed"
SRC=$WORK/src
mkdir -p "$SRC/sub"
seq 1 40 >"$SRC/lines.txt"
printf 'no newline' >"$SRC/nonl"
printf 'old\n' >"$SRC/gone.txt"
printf '#!/bin/sh\n' >"$SRC/run.sh"
ln -s lines.txt "$SRC/link"
printf 'was a file\n' >"$SRC/sub/becomes-link"
head -c 2000 /dev/urandom >"$SRC/blob.bin"
lfs init "$LAYERFS_STORE" >/dev/null
c1=$(lfs import -m one "$SRC")

sed -i 's/^20$/twenty/; s/^3$/three/' "$SRC/lines.txt"
echo 41 >>"$SRC/lines.txt"
printf 'no newline, changed' >"$SRC/nonl"
rm "$SRC/gone.txt"
printf 'fresh\n' >"$SRC/sub/new.txt"
chmod 755 "$SRC/run.sh"
ln -sfn nonl "$SRC/link"
rm "$SRC/sub/becomes-link" && ln -s ../nonl "$SRC/sub/becomes-link"
head -c 2000 /dev/urandom >"$SRC/blob.bin"
c2=$(lfs import -m two "$SRC")

lfs diff -p "$c1" "$c2" >"$WORK/p.patch"
grep -q '^@@ -1,6 +1,6 @@$' "$WORK/p.patch" || fail "no hunk for line 3: $(cat "$WORK/p.patch")"
grep -q '^-20$' "$WORK/p.patch" && grep -q '^+twenty$' "$WORK/p.patch" || fail "line 20's change is not in the patch"
grep -q '^old mode 100644$' "$WORK/p.patch" && grep -q '^new mode 100755$' "$WORK/p.patch" || fail "mode lines"
grep -q '^deleted file mode 100644$' "$WORK/p.patch" || fail "removal header"
grep -q '^Binary files a/blob.bin and b/blob.bin differ$' "$WORK/p.patch" || fail "binary file"
# Applied by git to A's tree (binary files left aside: a patch without index lines cannot carry
# them), it gives B's.
lfs export "$c1" "$WORK/a" >/dev/null
lfs export "$c2" "$WORK/b" >/dev/null
(cd "$WORK/a" && git init -q . && git apply --exclude=blob.bin "$WORK/p.patch") || fail "git apply refused the patch"
cp "$WORK/b/blob.bin" "$WORK/a/blob.bin"
diff -r --no-dereference --exclude=.git "$WORK/a" "$WORK/b" >/dev/null || fail "the patched tree differs from B"
[ "$(stat -c %a "$WORK/a/run.sh")" = 755 ] || fail "the mode change did not apply"
[ "$(readlink "$WORK/a/sub/becomes-link")" = ../nonl ] || fail "the file did not become a symlink"

# A...B, and the patch in --json beside each change; without -p, no patch.
[ "$(lfs diff -p "$c1...$c2" | md5sum)" = "$(md5sum <"$WORK/p.patch")" ] || fail "A...B -p"
# Its index line carries Git's blob ids.
ia=$(git hash-object "$WORK/b/lines.txt" | cut -c1-7)  # B's lines.txt
ib=$(grep -A1 '^diff --git a/lines.txt b/lines.txt$' "$WORK/p.patch" | sed -n 's/^index \([0-9a-f]*\)\.\..*/\1/p')
lfs cat "$c1:lines.txt" | git hash-object --stdin | grep -q "^$ib" || fail "index line: old id $ib"
lfs diff -p --json "$c1" "$c2" | python3 -c '
import json, sys
d = {c["path"]: c for c in json.load(sys.stdin)}
want = "diff --git a/lines.txt b/lines.txt\nindex %s..%s 100644\n--- a/lines.txt\n" % (sys.argv[1], sys.argv[2])
assert d["lines.txt"]["patch"].startswith(want), (want, d["lines.txt"])
assert d["sub"].get("patch", "") == "" if "sub" in d else True
assert "+fresh\n" in d["sub/new.txt"]["patch"], d["sub/new.txt"]' "$ib" "$ia" || fail "diff -p --json"
lfs diff --json "$c1" "$c2" | python3 -c '
import json, sys
assert all("patch" not in c for c in json.load(sys.stdin))' || fail "diff --json without -p carries patches"

# show -p: the header, then the patch against the first parent.
lfs show -p "$c2" >"$WORK/show"
grep -q "^commit $c2$" "$WORK/show" || fail "show -p header"
[ "$(sed -n '/^diff --git/,$p' "$WORK/show" | md5sum)" = "$(md5sum <"$WORK/p.patch")" ] || fail "show -p's patch"
# Paths (Git's `-- PATH...`, or --path): the changes at or below them, the Commits that changed them.
[ "$(lfs diff "$c1" "$c2" -- sub | cut -f2)" = "$(printf 'sub/becomes-link\nsub/new.txt')" ] ||
  fail "diff -- sub: $(lfs diff "$c1" "$c2" -- sub)"
[ "$(lfs diff "$c1" "$c2" --path nonl --path gone.txt | cut -f2)" = "$(printf 'gone.txt\nnonl')" ] || fail "diff --path"
lfs diff -p "$c1" "$c2" -- lines.txt | grep -q '^diff --git a/lines.txt b/lines.txt$' || fail "diff -p -- lines.txt"
[ "$(lfs diff -p "$c1" "$c2" -- lines.txt | grep -c '^diff --git')" = 1 ] || fail "diff -p -- lines.txt has other files"
c3=$(lfs import -m three "$SRC")  # nothing changed
[ "$(lfs log --json -- lines.txt | python3 -c 'import json,sys; print(" ".join(c["id"] for c in json.load(sys.stdin)))')" = "$c2 $c1" ] ||
  fail "log -- lines.txt: $(lfs log -- lines.txt)"
[ "$(lfs log --json -- gone.txt | python3 -c 'import json,sys; print(" ".join(c["id"] for c in json.load(sys.stdin)))')" = "$c2 $c1" ] ||
  fail "log -- gone.txt (removed in $c2)"
[ -z "$(lfs log -- no/such/path)" ] || fail "log of a path never there lists Commits"
[ "$(lfs log -n 1 -- sub | cut -d' ' -f1)" = "$c2" ] || fail "log -n 1 -- sub"
[ -z "$(lfs show "$c3" -- lines.txt | sed -n '/^    three$/,$p' | tail -n +2 | grep .)" ] || fail "show of an empty change -- lines.txt"
expect_fail log --graph -- lines.txt
# log -p: each listed Commit as show -p prints it (within the paths).
lfs log -p -- lines.txt >"$WORK/logp"
[ "$(grep -c '^commit ' "$WORK/logp")" = 2 ] && grep -q "^commit $c2$" "$WORK/logp" && grep -q "^commit $c1$" "$WORK/logp" ||
  fail "log -p -- lines.txt commits: $(cat "$WORK/logp")"
[ "$(grep -c '^diff --git' "$WORK/logp")" = 2 ] || fail "log -p -- lines.txt shows other paths: $(cat "$WORK/logp")"
[ "$(sed -n "/^commit $c2$/,/^commit $c1$/p" "$WORK/logp" | sed -n '/^diff --git/,/^commit/p' | sed '$d' | sed '$d' | md5sum)" = \
  "$(lfs diff -p "$c1" "$c2" -- lines.txt | md5sum)" ] || fail "log -p's patch of $c2 is not diff -p's"
expect_fail log --graph -p
# rev-parse: the id a REF names.
[ "$(lfs rev-parse main)" = "$c3" ] && [ "$(lfs rev-parse HEAD~1)" = "$c2" ] && [ "$(lfs rev-parse "${c1:0:6}")" = "$c1" ] ||
  fail "rev-parse: $(lfs rev-parse main) $(lfs rev-parse HEAD~1)"
expect_fail rev-parse nosuch
expect_fail log -- ../outside
echo "patch ok"
