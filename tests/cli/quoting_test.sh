#!/usr/bin/env bash
# Paths with a tab, a newline, a double quote, a backslash or another control character are
# printed as Git prints them (core.quotePath false): in double quotes with C escapes, so one line
# stays one path; UTF-8 names as they are. The listings match Git's on the same change, and
# `git apply` takes the patch.
source "$(dirname "$0")/lib.bash" "$1"
SRC=$WORK/src
mkdir -p "$SRC"
names=($'tab\there' $'new\nline' 'say "hi"' 'back\slash' $'bell\a' 'café' 'plain')
for n in "${names[@]}"; do printf 'one %s\n' "$n" >"$SRC/$n"; done
lfs init "$LAYERFS_STORE" >/dev/null
c1=$(lfs import -m before "$SRC")
for n in "${names[@]}"; do printf 'two\n' >>"$SRC/$n"; done
rm "$SRC/plain" "$SRC/say \"hi\""
printf 'added\n' >"$SRC"/$'\x01'odd
c2=$(lfs import -m after "$SRC")

# The same change in Git
G=$WORK/git
mkdir -p "$G"
for n in "${names[@]}"; do printf 'one %s\n' "$n" >"$G/$n"; done
git -C "$G" init -q . && git -C "$G" add -A && git -C "$G" -c user.name=t -c user.email=t@t commit -qm before
for n in "${names[@]}"; do printf 'two\n' >>"$G/$n"; done
rm "$G/plain" "$G/say \"hi\""
printf 'added\n' >"$G"/$'\x01'odd
git -C "$G" add -A
gitq() { git -C "$G" -c core.quotePath=false "$@"; }

[ "$(lfs diff --name-status "$c1" "$c2")" = "$(gitq diff --cached --no-renames --name-status)" ] ||
  fail "name-status differs from Git's: $(lfs diff --name-status "$c1" "$c2" | od -c | head -20)"
[ "$(lfs diff --name-only "$c1" "$c2")" = "$(gitq diff --cached --no-renames --name-only)" ] ||
  fail "name-only differs from Git's: $(lfs diff --name-only "$c1" "$c2")"
[ "$(lfs diff --name-only "$c1" "$c2" | wc -l)" = 8 ] || fail "a path took more than one line"
lfs diff --name-only "$c1" "$c2" | grep -qxF '"tab\there"' && lfs diff --name-only "$c1" "$c2" | grep -qxF 'café' &&
  lfs diff --name-only "$c1" "$c2" | grep -qxF '"\001odd"' || fail "quoting: $(lfs diff --name-only "$c1" "$c2")"
[ "$(lfs log --name-only --format=%s -n 1 | tail -n +3)" = "$(lfs diff --name-only "$c1" "$c2")" ] || fail "log --name-only"

# The patch: Git's quoted headers; git apply turns the first tree into the second.
lfs diff -p "$c1" "$c2" >"$WORK/q.patch"
grep -qxF 'diff --git "a/tab\there" "b/tab\there"' "$WORK/q.patch" && grep -qxF -- '--- "a/new\nline"' "$WORK/q.patch" ||
  fail "patch headers: $(head -20 "$WORK/q.patch")"
applies_as_git "$WORK/q.patch" "$c1" "$c2" "the quoted patch"
# JSON keeps the bytes as they are
lfs diff --json "$c1" "$c2" | python3 -c '
import json, sys
paths = {e["path"] for e in json.load(sys.stdin)}
assert "tab\there" in paths and "new\nline" in paths and "say \"hi\"" in paths and "\x01odd" in paths, paths' ||
  fail "diff --json paths"
echo "quoting ok"
