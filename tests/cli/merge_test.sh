#!/usr/bin/env bash
# merge in the Store (no daemon): fast-forward, merge Commit, up to date, conflicts (exit 1, JSON),
# --ff-only, --no-ff, -s and -X, and how history shows it: log --graph, REF^2, show, diff A...B.
source "$(dirname "$0")/lib.bash" "$1"
SRC=$WORK/src
mkdir -p "$SRC/d"
printf '1\n2\n3\n4\n5\n' >"$SRC/t.txt"
printf 'keep\n' >"$SRC/d/k"
lfs init "$LAYERFS_STORE" >/dev/null
base=$(lfs import -m base "$SRC")
lfs fork feat main >/dev/null
lfs fork ff main >/dev/null

# Fast-forward of ff to feat's first commit.
rm -rf "$WORK/e" && lfs export feat "$WORK/e" && printf '1\n2\n3\n4\nFIVE\n' >"$WORK/e/t.txt"
f1=$(lfs import -b feat -m "feat 1" "$WORK/e")
lfs merge feat --into ff --json >"$WORK/ff.json"
python3 - "$WORK/ff.json" "$f1" "$base" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["commit"] == sys.argv[2] and j["fast_forward"] is True and j["conflicts"] == [], j
assert j["base"] == sys.argv[3], j
PY
[ "$(lfs log -n1 --json ff | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')" = "$f1" ] || fail "ff did not move"

# Up to date: exit 0, nothing changes.
out=$(lfs merge main --into ff) || fail "up-to-date merge failed"
[ "$out" = "already up to date" ] || fail "up to date printed '$out'"

# --ff-only on diverged histories: refused, one line, nothing changes.
printf 'ONE\n2\n3\n4\n5\n' >"$SRC/t.txt"
m1=$(lfs import -m "main 1" "$SRC")
expect_fail merge feat --into main --ff-only
[ "$(lfs log -n1 --json main | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')" = "$m1" ] || fail "ff-only moved main"

# A clean merge Commit with two parents; REF^2 names the merged side.
merged=$(lfs merge feat --into main -m "bring feat") || fail "clean merge failed"
[[ "$merged" =~ ^merged\ [0-9a-f]{32}$ ]] || fail "merge printed '$merged'"
[ "$(lfs cat main:t.txt)" = "$(printf 'ONE\n2\n3\n4\nFIVE')" ] || fail "merged content: $(lfs cat main:t.txt)"
lfs log -n1 --json main | python3 -c '
import json, sys
c = json.load(sys.stdin)[0]
assert c["message"] == "bring feat" and c["parents"] == [sys.argv[1], sys.argv[2]], c' "$m1" "$f1"
[ "$(lfs log -n1 --json 'main^2' | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')" = "$f1" ] || fail "main^2 is not feat's commit"
[ "$(lfs log -n1 --json 'main^1~1' | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')" = "$base" ] || fail "main^1~1 is not the base"
lfs show main | grep -q "^merge  " || fail "show of a merge does not say so"
lfs log --graph main >"$WORK/graph"
grep -q '^|\\$' "$WORK/graph" || fail "log --graph shows no merge: $(cat "$WORK/graph")"
[ "$(grep -c '^\(\* \|| \* \|\* |\)' "$WORK/graph")" -eq 5 ] || fail "log --graph: $(cat "$WORK/graph")"
lfs log --graph --json main | python3 -c '
import json, sys
log = json.load(sys.stdin)
assert len(log) == 5 and len(log[0]["parents"]) == 2, log'
# diff A...B: what B changed since the merge base of A and B.
[ "$(lfs diff feat...main)" = "$(printf 'M\tt.txt')" ] || fail "diff feat...main: $(lfs diff feat...main)"
printf 'new\n' >"$SRC/new"
lfs import -m "main 2" "$SRC" >/dev/null
[ "$(lfs diff main...feat)" = "" ] || fail "diff main...feat should be empty: $(lfs diff main...feat)"

# Conflicts: exit 1, JSON on stdout, one line on stderr (with --json the error object, code
# CONFLICT), the branch unchanged.
printf 'ours\n2\n3\n4\nFIVE\n' >"$SRC/t.txt"
m3=$(lfs import -m "main 3" "$SRC")
rm -rf "$WORK/e" && lfs export feat "$WORK/e" && printf 'theirs\n2\n3\n4\nFIVE\n' >"$WORK/e/t.txt" && rm "$WORK/e/d/k"
printf 'their bin\0' >"$WORK/e/b.bin"
f2=$(lfs import -b feat -m "feat 2" "$WORK/e")
printf 'our bin\0' >"$SRC/b.bin"
printf 'changed\n' >"$SRC/d/k"
m4=$(lfs import -m "main 4" "$SRC")
rc=0
lfs merge feat --into main --json >"$WORK/c.json" 2>"$WORK/c.err" || rc=$?
[ "$rc" -eq 1 ] || fail "conflicted merge exited $rc"
[ "$(wc -l <"$WORK/c.err")" -eq 1 ] && python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))["error"]
assert e["code"] == "CONFLICT" and e["errno"] == 0 and "conflict" in e["message"], e' "$WORK/c.err" ||
  fail "stderr: $(cat "$WORK/c.err")"
rc=0
lfs merge feat --into main >/dev/null 2>"$WORK/c.err" || rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l <"$WORK/c.err")" -eq 1 ] && grep -q '^layerfs: .*conflict' "$WORK/c.err" ||
  fail "conflicted merge without --json: $rc $(cat "$WORK/c.err")"
python3 - "$WORK/c.json" "$m4" "$f2" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["commit"] is None and j["fast_forward"] is False, j
assert j["ours"] == sys.argv[2] and j["theirs"] == sys.argv[3], j
kinds = {c["path"]: c["kind"] for c in j["conflicts"]}
assert kinds == {"t.txt": "content", "b.bin": "add/add", "d/k": "modify/delete"}, kinds
for c in j["conflicts"]:
    assert set(c) >= {"path", "kind", "base", "ours", "theirs"}, c
    assert c["ours"] and len(c["ours"]) == 32, c
d = {c["path"]: c for c in j["conflicts"]}
assert d["d/k"]["theirs"] is None and d["b.bin"]["base"] is None, d
PY
[ "$(lfs log -n1 --json main | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')" = "$m4" ] || fail "a conflicted merge moved main"
lfs merge feat --into main >"$WORK/c.txt" 2>/dev/null && fail "text conflicted merge exited 0"
grep -q '^CONFLICT (content): t.txt$' "$WORK/c.txt" || fail "text conflicts: $(cat "$WORK/c.txt")"

# -X theirs settles every conflict with theirs' side; -s ours keeps ours' tree.
lfs fork x main >/dev/null
lfs merge feat --into x -X theirs >/dev/null || fail "-X theirs failed"
[ "$(lfs cat x:t.txt | head -1)" = theirs ] || fail "-X theirs: $(lfs cat x:t.txt)"
[ "$(lfs cat x:b.bin | tr -d '\0')" = "their bin" ] || fail "-X theirs binary"
lfs cat x:d/k >/dev/null 2>&1 && fail "-X theirs kept a file theirs deleted"
lfs fork o main >/dev/null
lfs merge feat --into o -s ours --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["commit"] and not j["conflicts"], j'
[ "$(lfs cat o:t.txt | head -1)" = ours ] || fail "-s ours"
[ "$(lfs log -n1 --json o | python3 -c 'import json,sys; print(len(json.load(sys.stdin)[0]["parents"]))')" = 2 ] || fail "-s ours made no merge"
# --no-ff makes a merge Commit where a fast-forward was possible.
lfs fork nf "$m4" >/dev/null
lfs fork nf2 "$m4" >/dev/null
printf 'x\n' >"$SRC/extra"
lfs import -b nf2 -m "nf2" "$SRC" >/dev/null
lfs merge nf2 --into nf --no-ff --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["fast_forward"] is False and j["commit"], j'
expect_fail merge nf2 --into nf --ff-only --continue
expect_fail merge --continue --into main
expect_fail merge nosuchref --into main
expect_fail merge feat --into main -X sideways
# cherry-pick: the change of one Commit onto another branch, one parent, its message.
rm -rf "$WORK/p" && lfs export "$base" "$WORK/p" && lfs fork pick "$base" >/dev/null
printf '1\n2\n3\n4\n5\nsix\n' >"$WORK/p/t.txt" && printf 'picked\n' >"$WORK/p/p.txt"
lfs fork src "$base" >/dev/null
pc=$(lfs import -b src -m "add six and p" "$WORK/p")
printf 'ONE\n2\n3\n4\n5\n' >"$WORK/p/t.txt" && rm "$WORK/p/p.txt"
rm -rf "$WORK/q" && lfs export "$base" "$WORK/q" && printf 'ONE\n2\n3\n4\n5\n' >"$WORK/q/t.txt"
lfs import -b pick -m "pick base" "$WORK/q" >/dev/null
lfs cherry-pick "$pc" --into pick --json >"$WORK/pick.json" || fail "cherry-pick failed"
lfs log -n1 --json pick | python3 -c '
import json, sys
c = json.load(sys.stdin)[0]
assert c["message"] == "add six and p" and len(c["parents"]) == 1, c'
[ "$(lfs cat pick:t.txt)" = "$(printf 'ONE\n2\n3\n4\n5\nsix')" ] || fail "cherry-pick content: $(lfs cat pick:t.txt)"
[ "$(lfs cat pick:p.txt)" = picked ] || fail "cherry-pick added file"
# revert: the inverse change, on top.
lfs revert pick --into pick >/dev/null || fail "revert failed"
[ "$(lfs cat pick:t.txt)" = "$(printf 'ONE\n2\n3\n4\n5')" ] || fail "revert content: $(lfs cat pick:t.txt)"
lfs cat pick:p.txt >/dev/null 2>&1 && fail "revert kept the added file"
expect_fail revert pick --into pick~2  # not a branch
expect_fail cherry-pick 'main~3' --into pick  # a merge Commit
lfs verify >/dev/null || fail "verify after merges"
echo "merge CLI OK"
