#!/usr/bin/env bash
# -M / --find-renames (diff, show, log): a file moved is one change R, paired as Git pairs
# renames (identical content first, a same base name preferred; then at least half similar);
# without -M the same change is a D and an A. The patch of a rename is Git's, and `git apply`
# takes a diff -M -p from one Commit's tree to the other's.
source "$(dirname "$0")/lib.bash" "$1"
SRC=$WORK/src
mkdir -p "$SRC/a" "$SRC/b"
seq 1 200 >"$SRC/a/long.txt"
printf 'same\n' >"$SRC/a/twin1"
printf 'same\n' >"$SRC/a/twin2"
printf 'unrelated one\n' >"$SRC/gone.txt"
printf 'keep\n' >"$SRC/kept.txt"
: >"$SRC/empty"
lfs init "$LAYERFS_STORE" >/dev/null
c1=$(lfs import -m before "$SRC")
# moved as is (twin2 to b/twin2: the same base name wins over twin1's identical content), moved
# and edited (more than half in common), an empty file moved, and one removed and another added
# with nothing in common.
mv "$SRC/a/twin2" "$SRC/b/twin2"
mv "$SRC/a/long.txt" "$SRC/b/longer.txt"
seq 201 260 >>"$SRC/b/longer.txt"
sed -i 's/^17$/seventeen/' "$SRC/b/longer.txt"
mv "$SRC/empty" "$SRC/b/empty"
rm "$SRC/gone.txt"
printf 'something else\n' >"$SRC/new.txt"
c2=$(lfs import -m after "$SRC")

lfs diff -M "$c1" "$c2" >"$WORK/ns"
grep -qx $'R100\ta/twin2\tb/twin2' "$WORK/ns" && grep -qx $'R100\tempty\tb/empty' "$WORK/ns" &&
  grep -q $'^R0[5-9][0-9]\ta/long.txt\tb/longer.txt$' "$WORK/ns" &&
  grep -qx $'D\tgone.txt' "$WORK/ns" && grep -qx $'A\tnew.txt' "$WORK/ns" && ! grep -q 'twin1' "$WORK/ns" ||
  fail "diff -M: $(cat "$WORK/ns")"
[ "$(grep -c '^R' "$WORK/ns")" = 3 ] || fail "diff -M renames: $(cat "$WORK/ns")"
# --find-renames is -M; without it, D and A
[ "$(lfs diff --find-renames "$c1" "$c2")" = "$(cat "$WORK/ns")" ] || fail "--find-renames"
lfs diff "$c1" "$c2" | grep -qx $'D\ta/long.txt' && lfs diff "$c1" "$c2" | grep -qx $'A\tb/longer.txt' &&
  ! lfs diff "$c1" "$c2" | grep -q '^R' || fail "diff without -M: $(lfs diff "$c1" "$c2")"
# JSON: the new path, from_path, similarity, both entries
lfs diff -M --json "$c1" "$c2" >"$WORK/r.json"
python3 - "$WORK/r.json" <<'PY' || fail "diff -M --json: $(cat "$WORK/r.json")"
import json, sys
d = {e["path"]: e for e in json.load(open(sys.argv[1]))}
r = d["b/longer.txt"]
assert r["change"] == "R" and r["from_path"] == "a/long.txt" and 50 <= r["similarity"] < 100, r
assert r["before"]["size"] < r["after"]["size"], r
assert d["b/twin2"]["similarity"] == 100 and d["b/twin2"]["before"]["id"] == d["b/twin2"]["after"]["id"]
assert "a/long.txt" not in d and "a/twin2" not in d and d["gone.txt"]["change"] == "D"
assert all("from_path" not in e for e in d.values() if e["change"] != "R")
PY
# --stat and --name-only
lfs diff -M --stat "$c1" "$c2" | grep -q '^R a/long.txt => b/longer.txt  *+[0-9]* bytes$' &&
  lfs diff -M --stat "$c1" "$c2" | grep -q ', 3 renamed$' || fail "diff -M --stat: $(lfs diff -M --stat "$c1" "$c2")"
lfs diff -M --name-only "$c1" "$c2" | grep -qx 'b/longer.txt' && ! lfs diff -M --name-only "$c1" "$c2" | grep -qx 'a/long.txt' ||
  fail "diff -M --name-only"

# The patch: Git's rename header, hunks only for the edited one, and git apply turns the first
# tree into the second.
lfs diff -M -p "$c1" "$c2" >"$WORK/r.patch"
grep -A4 '^diff --git a/a/twin2 b/b/twin2$' "$WORK/r.patch" | tr '\n' '|' |
  grep -q '^diff --git a/a/twin2 b/b/twin2|similarity index 100%|rename from a/twin2|rename to b/twin2|diff --git' ||
  fail "patch of a move: $(cat "$WORK/r.patch")"
grep -A6 '^diff --git a/a/long.txt b/b/longer.txt$' "$WORK/r.patch" | grep -q '^--- a/a/long.txt$' &&
  grep -A7 '^diff --git a/a/long.txt b/b/longer.txt$' "$WORK/r.patch" | grep -q '^+++ b/b/longer.txt$' ||
  fail "patch of an edited move: $(cat "$WORK/r.patch")"
applies_as_git "$WORK/r.patch" "$c1" "$c2" "diff -M -p"

# show -M and log -M list the same
lfs show -M "$c2" | grep -qx $'R100\ta/twin2\tb/twin2' || fail "show -M: $(lfs show -M "$c2")"
[ "$(lfs show -M --json "$c2" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["changes"], sort_keys=True))')" = \
  "$(lfs diff -M --json "$c1" "$c2" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), sort_keys=True))')" ] ||
  fail "show -M --json is not diff -M's"
[ "$(lfs log -M --name-status --format=%s -n 1)" = "after

$(cat "$WORK/ns")" ] || fail "log -M --name-status: $(lfs log -M --name-status --format=%s -n 1)"
expect_fail log -M
expect_fail show -M "$c2:new.txt"
echo "renames ok"
