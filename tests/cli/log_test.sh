#!/usr/bin/env bash
# log as Git users write it: --format/--pretty placeholders, --stat / --name-only / --name-status,
# --all over every branch, --reverse, --grep, --since/--until (a root Commit's whole tree as its change: StoreTest.DiffParent...).
source "$(dirname "$0")/lib.bash" "$1"
SRC=$WORK/src
mkdir -p "$SRC/sub"
printf 'one\n' >"$SRC/a.txt"
lfs init "$LAYERFS_STORE" >/dev/null
init=$(lfs rev-parse main)
c1=$(lfs import -m "first
the body, line one
line two" "$SRC")
printf 'two\n' >"$SRC/sub/b.txt"
printf 'ONE\n' >"$SRC/a.txt"
c2=$(lfs import -m second "$SRC")
lfs fork side "$c1" >/dev/null
printf 'side\n' >"$SRC/side.txt"
rm "$SRC/sub/b.txt"
c3=$(lfs import --branch side -m "on side" "$SRC")
t2=$(lfs log --json -n 1 main | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["time"])')

# --format: ids, parents, tree, subject, body, whole message, times; unknown placeholders kept.
[ "$(lfs log --format='%H|%h|%p|%s' main)" = "$c2|${c2:0:12}|${c1:0:12}|second
$c1|${c1:0:12}|${init:0:12}|first
$init|${init:0:12}||init" ] || fail "log --format ids/subjects: $(lfs log --format='%H|%h|%p|%s' main)"
[ "$(lfs log -n 1 --format=%b "$c1")" = "the body, line one
line two" ] || fail "%b: $(lfs log -n 1 --format=%b "$c1")"
[ "$(lfs log -n 1 --format='%B' "$c1" | wc -l)" = 3 ] || fail "%B: $(lfs log -n 1 --format='%B' "$c1")"
[ "$(lfs log -n 1 --format='%T' main)" = "$(lfs show --json main | python3 -c 'import json,sys; print(json.load(sys.stdin)["root"])')" ] ||
  fail "%T"
[ "$(lfs log -n 1 --pretty=format:%ct main)" = "$t2" ] || fail "%ct: $(lfs log -n 1 --pretty=format:%ct main)"
[ "$(lfs log -n 1 --format=%cI main)" = "$(date -u -d "@$t2" +%Y-%m-%dT%H:%M:%S+00:00)" ] || fail "%cI"
[ "$(lfs log -n 1 --format=%cd main)" = "$(LC_ALL=C date -u -d "@$t2" '+%a %b %-d %H:%M:%S %Y +0000')" ] || fail "%cd"
[ "$(lfs log -n 1 --format='%%|%x|%n|' main)" = "%|%x|
|" ] || fail "%% %x %n: $(lfs log -n 1 --format='%%|%x|%n|' main)"
[[ "$(lfs log -n 1 --format=%cr main)" =~ ^[0-9]+\ (second|minute)s?\ ago$ ]] || fail "%cr: $(lfs log -n 1 --format=%cr main)"
[ "$(lfs log --pretty=oneline main | head -1)" = "$c2 second" ] || fail "--pretty=oneline"
# format: separates (no newline after the last), tformat: and plain text terminate
[ "$(lfs log --format=format:%h main | od -c | tail -2 | head -1 | awk '{print $NF}')" != '\n' ] ||
  fail "format: ended in a newline"
[ "$(lfs log --format=tformat:%h main | tail -c 1 | od -An -c | tr -d ' ')" = '\n' ] || fail "tformat: did not end in one"
lfs log --pretty=medium main | grep -q "^commit $c2$" || fail "--pretty=medium is show's header"
expect_fail log --format=nosuchformat
lfs log --pretty=nosuchformat 2>"$WORK/err" && fail "bad format accepted"
[ "$(wc -l <"$WORK/err")" = 1 ] && grep -q "invalid --format 'nosuchformat'" "$WORK/err" || fail "bad format: $(cat "$WORK/err")"

# --name-only / --name-status / --stat: each Commit's change against its first parent.
[ "$(lfs log --name-only --format=%s main)" = "second

a.txt
sub/b.txt
first

a.txt
sub
init" ] || fail "log --name-only: $(lfs log --name-only --format=%s main)"
[ "$(lfs log --oneline --name-status -n 1 side)" = "${c3:0:12} on side
M	a.txt
A	side.txt" ] || fail "log --name-status: $(lfs log --oneline --name-status -n 1 side)"
lfs log --stat -n 1 main >"$WORK/stat"
grep -q "^commit $c2$" "$WORK/stat" && grep -q '^M a.txt  *+0 bytes$' "$WORK/stat" &&
  grep -q '^A sub/b.txt  *+4 bytes$' "$WORK/stat" && grep -q '^2 paths changed: 1 added, 0 removed, 1 modified' "$WORK/stat" ||
  fail "log --stat: $(cat "$WORK/stat")"
# the same changes in JSON (the protocol's `changes`), within paths
lfs log --json --name-status -- sub >"$WORK/changes.json"
python3 - "$WORK/changes.json" "$c2" "$c1" <<'PY' || fail "log --name-status --json"
import json, sys
log = json.load(open(sys.argv[1]))
assert [c["id"] for c in log] == sys.argv[2:], log
assert [(e["change"], e["path"]) for e in log[0]["changes"]] == [("A", "sub/b.txt")], log
assert [(e["change"], e["path"]) for e in log[1]["changes"]] == [("A", "sub")], log
PY
# show takes the same: -s/--no-patch, --format, --name-only, --stat, --name-status
[ "$(lfs show -s --format=%H main)" = "$c2" ] && [ "$(lfs show --no-patch --pretty=format:%s "$c1")" = first ] ||
  fail "show -s --format: $(lfs show -s --format=%H main)"
[ "$(lfs show --name-only --format=%s main)" = "second

a.txt
sub/b.txt" ] || fail "show --name-only: $(lfs show --name-only --format=%s main)"
lfs show --stat main | grep -q '^2 paths changed: 1 added, 0 removed, 1 modified' || fail "show --stat: $(lfs show --stat main)"
[ "$(lfs show --name-status main | tail -2)" = "$(printf 'M\ta.txt\nA\tsub/b.txt')" ] || fail "show --name-status"
lfs show -s main | grep -qx '    second' && ! lfs show -s main | grep -q 'a.txt' || fail "show -s: $(lfs show -s main)"
expect_fail show --format=nosuchformat main
# the multi-line message indented line by line, as Git shows one
lfs show "$c1" | grep -q '^    line two$' || fail "show indents every line: $(lfs show "$c1")"

# --all: every branch through all parents, newest first; with REF as well; --reverse
[ "$(lfs log --all --format=%H | sort)" = "$(printf '%s\n' "$c1" "$c2" "$c3" "$init" | sort)" ] ||
  fail "log --all: $(lfs log --all --oneline)"
[ "$(lfs log --all --format=%H | tail -1)" = "$init" ] && [ "$(lfs log --all --format=%H | sed -n 3p)" = "$c1" ] ||
  fail "log --all order: $(lfs log --all --oneline)"
[ "$(lfs log --all -n 2 --format=%H | sort)" = "$(printf '%s\n' "$c2" "$c3" | sort)" ] || fail "log --all -n 2"
[ "$(lfs log --all "$c1" --format=%H | wc -l)" = 4 ] || fail "log --all REF"
[ "$(lfs log --all --format=%s -- side.txt)" = "on side" ] && [ -z "$(lfs log --format=%s -- side.txt)" ] &&
  [ "$(lfs log --all --format=%s -- sub/b.txt)" = second ] || fail "log --all -- PATH: $(lfs log --all --format=%s -- side.txt)"
lfs log --all --graph --format='%h %s' >"$WORK/graph"
grep -q "^[*| ]*\* ${c1:0:12} first$" "$WORK/graph" || fail "graph --format: $(cat "$WORK/graph")"
[ "$(grep -c '^[*| ]*\*' "$WORK/graph")" = 4 ] || fail "graph --all lists every Commit: $(cat "$WORK/graph")"
[ "$(lfs log --reverse --format=%s main)" = "init
first
second" ] || fail "log --reverse: $(lfs log --reverse --format=%s main)"
[ "$(lfs log --reverse -n 1 --format=%s main)" = second ] || fail "log --reverse -n 1 (newest, as Git)"
# --grep (extended regular expression on the whole message, -i), --since/--after and
# --until/--before; -n counts what they let through, as in Git.
[ "$(lfs log --grep=sec --format=%s main)" = second ] || fail "--grep: $(lfs log --grep=sec --format=%s main)"
[ "$(lfs log --grep='LINE TWO' -i --format=%s main)" = first ] || fail "--grep -i on the body"
[ -z "$(lfs log --grep='LINE TWO' --format=%s main)" ] || fail "--grep is not case-sensitive"
[ "$(lfs log --grep='^on' --all --format=%s)" = "on side" ] || fail "--grep --all"
[ "$(lfs log -n 1 --grep='i(n|r)' --format=%s main)" = first ] || fail "-n 1 --grep: $(lfs log -n 1 --grep='i(n|r)' --format=%s main)"
[ -z "$(lfs log --grep=nomatch main)" ] || fail "--grep nomatch"
[ -z "$(lfs log --until=2000-01-01 main)" ] && [ -z "$(lfs log --before='2000-01-01 12:00:00' main)" ] || fail "--until"
[ "$(lfs log --since=2000-01-01 --format=%H main | wc -l)" = 3 ] && [ "$(lfs log --after='1 year ago' --format=%H main | wc -l)" = 3 ] ||
  fail "--since"
[ -z "$(lfs log --since="@$((t2 + 1))" main)" ] && lfs log --since="@$t2" --format=%H main | grep -qx "$c2" ||
  fail "--since @SECONDS"
[ "$(lfs log --since="$(date -u -d "@$t2" +%Y-%m-%dT%H:%M:%SZ)" --until="$(date -u -d "@$t2" '+%Y-%m-%d %H:%M:%S')" --format=%H main | head -1)" = "$c2" ] ||
  fail "--since/--until ISO"
for bad in sometime 2026-13-01 '3 parsecs ago' '2026-12-01 25:00'; do
  lfs log --since="$bad" main 2>"$WORK/err" && fail "--since '$bad' accepted"
  [ "$(wc -l <"$WORK/err")" = 1 ] && grep -q "cannot read the date" "$WORK/err" || fail "--since '$bad': $(cat "$WORK/err")"
done
expect_fail log --grep='('
expect_fail log --graph --grep=x
# ranges: A..B (what B reaches and A does not), A...B (one of them, not both), a side left out
# is HEAD; diff A..B is diff A B.
[ "$(lfs log main..side --format=%s)" = "on side" ] && [ "$(lfs log side..main --format=%H)" = "$c2" ] ||
  fail "log A..B: $(lfs log main..side --format=%s) / $(lfs log side..main --format=%s)"
[ "$(lfs log main...side --format=%s | sort)" = "on side
second" ] || fail "log A...B: $(lfs log main...side --format=%s)"
[ "$(lfs log ..side --format=%s)" = "on side" ] && [ -z "$(lfs log side.. --format=%s -- side.txt)" ] || fail "log ..B / A.."
[ -z "$(lfs log main..main)" ] || fail "log main..main lists Commits"
[ "$(lfs diff main~1..main)" = "$(lfs diff main~1 main)" ] && [ -n "$(lfs diff main~1..main)" ] || fail "diff A..B"
expect_fail log nosuch..main
expect_fail diff main~1..main main
expect_fail log --graph --reverse
expect_fail log --graph --stat
expect_fail log -n -1
echo "log ok"
