#!/usr/bin/env bash
# init / import / log / show / diff / cat / export / fork / branch / stats / verify / gc.
source "$(dirname "$0")/lib.bash" "$1"
SRC=$WORK/src
mkdir -p "$SRC/sub/deeper"
printf 'hello\n' >"$SRC/hello.txt"
printf 'deep content\n' >"$SRC/sub/deeper/deep.txt"
: >"$SRC/empty"
ln -s hello.txt "$SRC/link"
head -c 3000000 /dev/urandom >"$SRC/big.bin"

lfs init --policy 4/2/2 "$LAYERFS_STORE" >/dev/null
[ -f "$LAYERFS_STORE/LAYERFS" ] || fail "no LAYERFS marker"
[ "$(lfs branch | awk '{print $1}')" = main ] || fail "fresh store should have exactly branch main"

c1=$(lfs import -m "first import" "$SRC")
[[ "$c1" =~ ^[0-9a-f]{32}$ ]] || fail "import printed '$c1', not an id"
printf 'hello, world\n' >"$SRC/hello.txt"
rm "$SRC/empty"
printf 'new\n' >"$SRC/sub/new.txt"
chmod 600 "$SRC/sub/deeper/deep.txt"
c2=$(lfs import -m "second" "$SRC")

# log --json: newest first, with ids, parents, messages and times.
lfs log --json >"$WORK/log.json"
python3 - "$WORK/log.json" "$c1" "$c2" <<'PY'
import json, sys
log = json.load(open(sys.argv[1])); c1, c2 = sys.argv[2], sys.argv[3]
assert isinstance(log, list) and len(log) == 3, log
assert [e["id"] for e in log[:2]] == [c2, c1], log
assert log[0]["parents"] == [c1] and log[1]["parents"] == [log[2]["id"]] and log[2]["parents"] == []
assert log[0]["message"] == "second" and log[1]["message"] == "first import" and log[2]["message"] == "init"
for e in log:
    assert set(["id", "parents", "message", "time"]) <= set(e), e
    assert isinstance(e["time"], int) and e["time"] > 1600000000, e
assert log[0]["time"] >= log[1]["time"] >= log[2]["time"]
PY
[ "$(lfs log | wc -l)" -eq 3 ] || fail "plain log should have 3 lines"
[ "$(lfs log -n 1 --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 1 ] || fail "log -n 1"
lfs log --json main~1 | python3 -c "import json,sys; l=json.load(sys.stdin); assert l[0]['id']=='$c1'" || fail "log main~1"

# show
lfs show "$c2" | grep -q "^commit $c2" || fail "show header"
lfs show "$c2" | grep -q "second" || fail "show message"
lfs show --json main | python3 -c "
import json,sys; j=json.load(sys.stdin)
assert j['id']=='$c2' and j['parents']==['$c1'], j
ch={c['path']:c['change'] for c in j['changes']}
assert ch=={'hello.txt':'M','empty':'D','sub/new.txt':'A','sub/deeper/deep.txt':'P'}, ch
" || fail "show --json"

# diff, diff --stat, diff --json
lfs diff "$c1" "$c2" >"$WORK/diff.txt"
grep -qP '^M\thello.txt$' "$WORK/diff.txt" || fail "diff: hello.txt not M"
grep -qP '^D\tempty$' "$WORK/diff.txt" || fail "diff: empty not D"
grep -qP '^A\tsub/new.txt$' "$WORK/diff.txt" || fail "diff: sub/new.txt not A"
grep -qP '^P\tsub/deeper/deep.txt$' "$WORK/diff.txt" || fail "diff: deep.txt not P"
[ "$(wc -l <"$WORK/diff.txt")" -eq 4 ] || fail "diff should list 4 paths"
lfs diff --stat "$c1" "$c2" | grep -q "4 paths changed: 1 added, 1 removed, 1 modified, 0 type changed, 1 attributes changed" ||
  fail "diff --stat summary"
lfs diff --stat "$c1" "$c2" | grep -E '^M hello.txt +\+7 bytes$' >/dev/null || fail "diff --stat size delta"
lfs diff --json "${c1:0:10}" main | python3 -c "
import json,sys; d=json.load(sys.stdin)
m={e['path']:e for e in d}
assert m['hello.txt']['change']=='M' and m['hello.txt']['before']['size']==6 and m['hello.txt']['after']['size']==13, m
assert m['sub/deeper/deep.txt']['before']['mode']=='0644' and m['sub/deeper/deep.txt']['after']['mode']=='0600', m
assert 'after' not in m['empty'] and 'before' not in m['sub/new.txt']
" || fail "diff --json"
[ -z "$(lfs diff main main)" ] || fail "diff of a commit with itself is empty"
# Git's habits: diff --name-only / --name-status, log --oneline, show with no REF (HEAD, here
# main), show REF:PATH (the file), status -s.
[ "$(lfs diff --name-only "$c1" "$c2" | sort | tr '\n' ' ')" = "empty hello.txt sub/deeper/deep.txt sub/new.txt " ] ||
  fail "diff --name-only: $(lfs diff --name-only "$c1" "$c2")"
[ "$(lfs diff --name-status "$c1" "$c2")" = "$(lfs diff "$c1" "$c2")" ] || fail "diff --name-status"
[ "$(lfs log --oneline -n 1 main)" = "$(lfs rev-parse main | cut -c1-12) $(lfs log --json -n 1 main | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["message"].split("\n")[0])')" ] ||
  fail "log --oneline: $(lfs log --oneline -n 1 main)"
[ "$(lfs log --oneline | wc -l)" = "$(lfs log | wc -l)" ] || fail "log --oneline lists every Commit"
[ "$(lfs show --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')" = "$(lfs rev-parse main)" ] ||
  fail "show with no REF is not HEAD (main)"
[ "$(lfs show main:hello.txt)" = "hello, world" ] || fail "show main:hello.txt"
[ "$(lfs show "$c1:hello.txt")" = "hello" ] || fail "show c1:hello.txt"
lfs show main:big.bin | cmp - "$SRC/big.bin" || fail "show main:big.bin"
expect_fail show main:no-such-file
expect_fail show -p main:hello.txt
[ "$(lfs status -s main)" = "$(lfs status main)" ] || fail "status -s"
[ "$(lfs status --porcelain main)" = "$(lfs status main)" ] || fail "status --porcelain"
# diff --cached / --staged: there is no index, so the same as without
[ -n "$(lfs diff "$c1")" ] && [ "$(lfs diff --cached "$c1")" = "$(lfs diff "$c1")" ] &&
  [ "$(lfs diff --staged --name-only "$c1")" = "$(lfs diff --name-only "$c1")" ] || fail "diff --cached"
# log -N: at most N Commits
[ "$(lfs log -1 --oneline main)" = "$(lfs log --oneline -n 1 main)" ] || fail "log -1: $(lfs log -1 --oneline main)"
[ "$(lfs log --oneline -2 main | wc -l)" = 2 ] || fail "log -2: $(lfs log --oneline -2 main)"
[ "$(lfs branch git-habit "$c1")" = "git-habit $c1" ] || fail "branch NEW START"
[ "$(lfs branch git-habit2)" = "git-habit2 $(lfs rev-parse main)" ] || fail "branch NEW at HEAD"
expect_fail branch git-habit
expect_fail branch -d git-habit git-habit2
lfs branch -d git-habit && lfs branch -d git-habit2 || fail "branch -d"
[ -z "$(lfs branch | grep git-habit)" ] || fail "branches left: $(lfs branch)"

# cat
[ "$(lfs cat main:hello.txt)" = "hello, world" ] || fail "cat main:hello.txt"
[ "$(lfs cat "$c1:hello.txt")" = "hello" ] || fail "cat old version"
[ "$(lfs cat main~1:sub/deeper/deep.txt)" = "deep content" ] || fail "cat REF~1"
[ "$(lfs cat main:link)" = "hello.txt" ] || fail "cat of a symlink prints its target"
lfs cat main:big.bin | cmp - "$SRC/big.bin" || fail "cat big.bin"
[ -z "$(lfs cat "$c1:empty")" ] || fail "cat empty"

# export: byte-identical tree, modes and link targets
lfs export main "$WORK/out"
diff -r --no-dereference "$SRC" "$WORK/out" || fail "export differs from source"
[ "$(stat -c %a "$WORK/out/sub/deeper/deep.txt")" = 600 ] || fail "export mode"
[ "$(readlink "$WORK/out/link")" = hello.txt ] || fail "export symlink"
[ "$(stat -c %Y "$SRC/hello.txt")" = "$(stat -c %Y "$WORK/out/hello.txt")" ] || fail "export mtime"
mkdir "$WORK/out_empty"
lfs export "$c1" "$WORK/out_empty"
[ -f "$WORK/out_empty/empty" ] && [ ! -e "$WORK/out_empty/sub/new.txt" ] || fail "export of c1"

# fork and branch
out=$(lfs fork feature)
[ "$out" = "feature $c2" ] || fail "fork printed '$out'"
lfs fork old "$c1" >/dev/null
lfs fork older main~2 >/dev/null
lfs branch >"$WORK/branches"
grep -qx "feature $c2" "$WORK/branches" || fail "branch lists feature"
grep -qx "old $c1" "$WORK/branches" || fail "branch lists old"
grep -qx "main $c2" "$WORK/branches" || fail "branch lists main"
[ "$(wc -l <"$WORK/branches")" -eq 4 ] || fail "4 branches expected"
printf 'feature only\n' >"$SRC/feature.txt"
head -c 2500000 /dev/urandom >"$SRC/feature.bin"
c3=$(lfs import -b feature -m "feature work" "$SRC")
[ "$(lfs log --json feature | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["parents"][0])')" = "$c2" ] ||
  fail "feature commit's parent"
[ "$(lfs branch | grep '^main ')" = "main $c2" ] || fail "import into feature moved main"

# stats --json
lfs stats --json >"$WORK/stats1.json"
python3 - "$WORK/stats1.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for k in ["allocated_bytes", "payload_bytes", "metadata_bytes", "other_bytes", "logical_bytes", "commits"]:
    assert isinstance(s[k], int) and s[k] >= 0, (k, s)
assert s["commits"] == 4, s
assert s["allocated_bytes"] == s["payload_bytes"] + s["metadata_bytes"] + s["other_bytes"], s
assert s["payload_bytes"] > 5000000, s
for k in ["whole", "chunk", "metadata"]:
    assert isinstance(s["max_chain_depth"][k], int), s
assert s["max_chain_depth"]["whole"] <= 4 and s["max_chain_depth"]["chunk"] <= 2 and s["max_chain_depth"]["metadata"] <= 2, s
assert s["policy"] == "4/2/2", s
PY
lfs stats | grep -q "policy 4/2/2, 4 commits, 4 branches" || fail "stats text"

# verify
lfs verify | grep -q "0 problems" || fail "verify"
lfs verify main "$c1" | grep -q "0 problems" || fail "verify named commits"

# branch -d + gc: objects only feature had are freed; the rest still verifies and exports
lfs branch -d feature
! lfs branch | grep -q '^feature ' || fail "feature still listed"
lfs gc | grep -qE '^deleted [1-9][0-9]* objects' || fail "gc deleted nothing"
lfs stats --json >"$WORK/stats2.json"
python3 - "$WORK/stats1.json" "$WORK/stats2.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert b["commits"] == a["commits"] - 1, (a["commits"], b["commits"])
assert sum(b["objects"].values()) < sum(a["objects"].values())
assert b["payload_bytes"] < a["payload_bytes"]
PY
lfs verify | grep -q "0 problems" || fail "verify after gc"
lfs export old "$WORK/out_old"
lfs export main "$WORK/out_main"
rm "$SRC/feature.txt" "$SRC/feature.bin"
diff -r --no-dereference "$SRC" "$WORK/out_main" || fail "main export after gc"
[ "$(lfs gc | head -c 17)" = "deleted 0 objects" ] || fail "second gc should delete nothing"

# commit --amend: the new Commit takes the head's place (its parents, its tree with what was
# written since); -am MSG is accepted as in Git.
parent_of() { lfs show --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["parents"][0])'; }
lfs write-file main amend.txt --content one >/dev/null
ca=$(lfs commit main -am "amend test")
lfs write-file main amend.txt --content two >/dev/null
cb=$(lfs commit main --amend -m "amend test, amended")
[ "$cb" != "$ca" ] && [ "$(lfs rev-parse main)" = "$cb" ] || fail "commit --amend did not move main to a new Commit"
[ "$(parent_of "$cb")" = "$(parent_of "$ca")" ] || fail "commit --amend: parents $(parent_of "$cb"), not $(parent_of "$ca")"
[ "$(lfs cat main:amend.txt)" = two ] && [ "$(lfs cat "$ca:amend.txt")" = one ] || fail "commit --amend: content"
[ "$(lfs log --oneline -n 1 main)" = "${cb:0:12} amend test, amended" ] || fail "commit --amend: log $(lfs log -n 2 main)"

# -C DIR before the verb, as git -C: relative paths, and a relative --store, from DIR.
in_c=$(cd / && env -u LAYERFS_STORE "$LAYERFS" -C "$WORK" --store store log --oneline -n 1 main)
[ "$in_c" = "$(lfs log --oneline -n 1 main)" ] || fail "-C DIR --store REL: '$in_c'"
(cd / && "$LAYERFS" -C "$WORK" -C src export main ../exported-via-C >/dev/null)
[ "$(cat "$WORK/exported-via-C/amend.txt")" = two ] || fail "-C DIR -C SUB: export to a relative path"

# init --from
lfs init --from "$SRC" -m "from dir" "$WORK/store2" >"$WORK/init_from"
LAYERFS_STORE=$WORK/store2 lfs log --json | python3 -c "
import json,sys; l=json.load(sys.stdin); assert len(l)==2 and l[0]['message']=='from dir' and l[0]['id']=='$(cat "$WORK/init_from")', l"
[ "$(lfs --store "$WORK/store2" cat main:hello.txt)" = "hello, world" ] || fail "--store"
echo ok
