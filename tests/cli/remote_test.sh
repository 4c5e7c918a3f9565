#!/usr/bin/env bash
# Remote verbs without mounts: remote add/list/remove, push, fetch, pull and clone over file://,
# their --json, and their one-line refusals (unknown names, another history, non-fast-forward,
# diverged branches, bad URLs) that leave every Store and the remote as they were.
source "$(dirname "$0")/lib.bash" "$1"
S=$LAYERFS_STORE R=$WORK/remote
mkdir -p "$WORK/src/d"
printf 'one\n' >"$WORK/src/d/f"
lfs init "$S" >/dev/null
lfs import -m one "$WORK/src" >/dev/null

[ -z "$(lfs remote)" ] || fail "a new Store lists remotes"
expect_fail push
grep -q "^layerfs: no remote configured: add one with .layerfs remote add NAME URL.$" "$WORK/stderr" ||
  fail "push without remotes: $(cat "$WORK/stderr")"
lfs remote add origin "file://$R"
[ "$(lfs remote)" = origin ] || fail "remote: $(lfs remote)"
lfs remote -v | grep -q "^origin	file://$R$" || fail "remote -v: $(lfs remote -v)"
expect_fail remote add origin "file://$WORK/other"
expect_fail remote add bad/name "file://$WORK/other"
expect_fail remote add .hidden "file://$WORK/other"
expect_fail remote add x "ftp://host/path"
expect_fail remote add x "relative/path"
expect_fail remote remove nosuch
expect_fail push nosuch main
expect_fail push origin nosuch
expect_fail fetch nosuch

lfs push origin main --json >"$WORK/push.json"
python3 - "$WORK/push.json" <<'PY' || fail "push --json: $(cat "$WORK/push.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["remote"] == "origin" and j["refs"][0]["status"] == "created" and j["refs"][0]["old"] is None, j
assert j["sent"]["objects"] >= 4 and j["sent"]["packs"] == 1, j
PY
head=$(lfs log -n 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
[ "$(lfs log -n 1 --json origin/main | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')" = "$head" ] ||
  fail "origin/main is not the pushed head"
lfs push origin | grep -q "up-to-date" || fail "second push is not up to date"
# Without REMOTE: origin, as with Git; with several remotes and none named origin, a refusal
# naming them; with just one, that one.
lfs push | grep -q "^  up-to-date   main -> origin/main" || fail "push without REMOTE did not use origin"
lfs fetch | grep -q "^From file://$R$" || fail "fetch without REMOTE did not use origin"
lfs remote add zeta "file://$WORK/zeta"
lfs push | grep -q "origin/main" || fail "push without REMOTE, origin among others"
lfs remote remove origin
lfs remote add alpha "file://$WORK/alpha"
expect_fail push
grep -q "^layerfs: no REMOTE given and 2 remotes, none named origin: name one of alpha, zeta$" "$WORK/stderr" ||
  fail "push with two remotes and no origin: $(cat "$WORK/stderr")"
expect_fail fetch
expect_fail pull
lfs remote remove alpha
lfs push | grep -q "created      main -> zeta/main" || fail "push without REMOTE did not use the only remote"
lfs remote remove zeta
lfs remote add origin "file://$R"
lfs fetch >/dev/null

# Clones: full and lazy; into a non-empty directory or from nowhere: refused, nothing left.
lfs clone "file://$R" "$WORK/c1" >/dev/null
[ "$(LAYERFS_STORE=$WORK/c1 lfs cat main:d/f)" = one ] || fail "clone lacks the file"
LAYERFS_STORE=$WORK/c1 lfs verify >/dev/null
lfs clone --lazy "$R" "$WORK/c2" >/dev/null
[ "$(LAYERFS_STORE=$WORK/c2 lfs remote -v)" = "origin	$R (lazy)"$'\n'"  origin/main $head" ] ||
  fail "lazy remote -v: $(LAYERFS_STORE=$WORK/c2 lfs remote -v)"
expect_fail clone "file://$R" "$WORK/c1"
expect_fail clone "ftp://host/x" "$WORK/c3"
[ ! -e "$WORK/c3" ] || fail "a failed clone left its directory"
expect_fail clone "file://$WORK/nowhere" "$WORK/c3"
[ ! -e "$WORK/c3" ] && [ ! -e "$WORK/nowhere" ] || fail "a clone from a missing directory left something"
out=$(lfs clone "$WORK/nowhere" "$WORK/c3" 2>&1) && fail "a clone from a missing path succeeded"
grep -q "nowhere: No such file or directory" <<<"$out" || fail "a clone from a missing path does not say why: $out"
# librados is opened only for a rados:// remote; without it, that remote fails in one line.
out=$(LAYERFS_LIBRADOS=$WORK/no-librados.so.2 lfs clone rados://pool "$WORK/c4" 2>&1) &&
  fail "a rados:// clone without librados succeeded"
[ "$(wc -l <<<"$out")" = 1 ] && grep -q "rados:// remotes need librados ($WORK/no-librados.so.2)" <<<"$out" ||
  fail "a rados:// clone without librados: $out"
[ ! -e "$WORK/c4" ] || fail "a failed rados:// clone left its directory"
# An empty remote (an empty directory) clones as a new Store whose first push gives the remote
# its history.
mkdir "$WORK/empty"
lfs clone "file://$WORK/empty" "$WORK/c4" | grep -q "empty" || fail "clone of an empty remote does not say so"
LAYERFS_STORE=$WORK/c4 lfs push origin main >/dev/null
lfs clone "file://$WORK/empty" "$WORK/c5" >/dev/null
[ "$(LAYERFS_STORE=$WORK/c5 lfs log --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 1 ] ||
  fail "clone of the once-empty remote"

# Another history (another id key) is refused both ways.
lfs init "$WORK/s2" >/dev/null
LAYERFS_STORE=$WORK/s2 lfs remote add origin "file://$R"
LAYERFS_STORE=$WORK/s2 expect_fail push origin main
grep -q "another history" "$WORK/stderr" || fail "push of another history: $(cat "$WORK/stderr")"
LAYERFS_STORE=$WORK/s2 expect_fail fetch origin

# Non-fast-forward: c1 pushes first; this Store is refused, then pulls... diverged.
printf 'two\n' >"$WORK/src/d/f"
LAYERFS_STORE=$WORK/c1 lfs import -m "c1 two" "$WORK/src" >/dev/null
LAYERFS_STORE=$WORK/c1 lfs push origin main >/dev/null
printf 'three\n' >"$WORK/src/d/f"
lfs import -m three "$WORK/src" >/dev/null
before=$(store_state)
expect_fail push origin main
grep -q "rejected main -> origin/main: fetch first" "$WORK/stderr" || fail "rejection: $(cat "$WORK/stderr")"
# Both changed d/f: the merge a pull makes has a conflict (listed, as `merge` lists them), and
# without a mount to resolve it nothing changes.
if lfs pull origin main >"$WORK/pull.out" 2>"$WORK/pull.err"; then fail "a conflicting pull succeeded"; fi
grep -q "^CONFLICT (content): d/f$" "$WORK/pull.out" || fail "pull conflicts: $(cat "$WORK/pull.out")"
[ "$(wc -l <"$WORK/pull.err")" = 1 ] && grep -q "^layerfs: .*1 conflict(s); nothing was changed" "$WORK/pull.err" ||
  fail "pull conflict error: $(cat "$WORK/pull.err")"
[ "$(store_state)" = "$before" ] || fail "a refused push or pull changed the Store"
[ "$(lfs cat origin/main:d/f)" = two ] || fail "the refused pull did not fetch"
lfs push origin main --force | grep -q "forced" || fail "push --force"
# c2 (lazy) never saw c1's commit: the forced head is a fast-forward of what it has.
LAYERFS_STORE=$WORK/c2 lfs pull origin main --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["status"] == "fast-forward" and j["fetch"]["lazy"], j' || fail "lazy pull of the forced head"
[ "$(LAYERFS_STORE=$WORK/c2 lfs cat main:d/f)" = three ] || fail "lazy pull: content"
LAYERFS_STORE=$WORK/c2 lfs fetch origin >/dev/null
LAYERFS_STORE=$WORK/c2 lfs fork mine origin/main >/dev/null
[ "$(LAYERFS_STORE=$WORK/c2 lfs cat mine:d/f)" = three ] || fail "fork of origin/main in a lazy Store"
lfs fork topic >/dev/null
lfs push origin topic >/dev/null
LAYERFS_STORE=$WORK/c2 lfs pull origin topic | grep -q "topic: created" || fail "pull of a new branch"

# Removing a remote forgets its tracking refs.
lfs remote remove origin
[ -z "$(lfs remote)" ] || fail "remote remove"
expect_fail log origin/main
echo "remote cli ok"
