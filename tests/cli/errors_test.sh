#!/usr/bin/env bash
# Failures print one "layerfs: " line on stderr, exit non-zero, and leave the Store unchanged.
source "$(dirname "$0")/lib.bash" "$1"
SRC=$WORK/src
mkdir -p "$SRC/dir"
printf 'x\n' >"$SRC/dir/file"
printf 'y\n' >"$SRC/top"

# Missing store.
LAYERFS_STORE=$WORK/nope expect_fail log
LAYERFS_STORE=$WORK/nope expect_fail branch
LAYERFS_STORE=$WORK/nope expect_fail import "$SRC"
[ ! -e "$WORK/nope" ] || fail "a failed command created the missing store"
(unset LAYERFS_STORE; expect_fail log)

# Bad --policy: nothing is created.
expect_fail init --policy 1/2 "$WORK/s_bad"
expect_fail init --policy a/b/c "$WORK/s_bad"
expect_fail init --policy 1/2/3/4 "$WORK/s_bad"
[ ! -e "$WORK/s_bad" ] || fail "init with a bad policy created a store"

lfs init "$LAYERFS_STORE"
c1=$(lfs import -m one "$SRC")
lfs fork side >/dev/null
before=$(store_state)

# init on an existing store
expect_fail init "$LAYERFS_STORE"
# -C into a directory that is not there
expect_fail -C "$WORK/nowhere" log
grep -qF "layerfs: cannot change to '$WORK/nowhere': No such file or directory" "$WORK/stderr" || fail "-C: $(cat "$WORK/stderr")"
# an empty commit message, as Git: refused before anything is written
expect_fail commit -m ""
grep -qF "layerfs: empty commit message" "$WORK/stderr" || fail "empty message: $(cat "$WORK/stderr")"
expect_fail commit -m $' \n\t'
expect_fail commit --amend -m ""
# a word that is no verb is named; Git's verbs without a counterpart say what to do instead
expect_fail comit -m x
grep -qF "'comit' is not a layerfs command (\`layerfs --help\` lists them)" "$WORK/stderr" || fail "unknown verb: $(cat "$WORK/stderr")"
expect_fail add .
grep -qF "'add' is not a layerfs command: there is no staging area" "$WORK/stderr" || fail "add: $(cat "$WORK/stderr")"
expect_fail --store "$LAYERFS_STORE" checkout side
grep -qF "layerfs mount BRANCH DIR" "$WORK/stderr" || fail "checkout: $(cat "$WORK/stderr")"
# unknown refs
expect_fail log nosuch
expect_fail show nosuch
expect_fail show main~5
expect_fail diff main nosuch
expect_fail cat nosuch:top
expect_fail export nosuch "$WORK/o1"
[ ! -e "$WORK/o1" ] || fail "failed export created its directory"
expect_fail fork x nosuch
expect_fail verify nosuch
# bad names and duplicates
expect_fail fork side
expect_fail fork "bad name"
expect_fail fork ../escape
expect_fail branch -d nosuch
expect_fail import -b nosuch "$SRC"
# cat of a directory, of a missing path, without a colon
expect_fail cat main:dir
expect_fail cat main:
expect_fail cat main:missing
expect_fail cat main:top/below
expect_fail cat main
# export into a non-empty directory, or onto a file
mkdir "$WORK/full"
printf 'keep\n' >"$WORK/full/keep"
expect_fail export main "$WORK/full"
[ "$(ls "$WORK/full")" = keep ] && [ "$(cat "$WORK/full/keep")" = keep ] || fail "export touched a non-empty dir"
expect_fail export main "$SRC/top"
# import of something that is not a directory
expect_fail import "$WORK/missing_dir"
expect_fail import "$SRC/top"
# usage errors
expect_fail diff main...
expect_fail diff main...side side
expect_fail diff nosuch
expect_fail log --no-such-flag
expect_fail stats extra-arg

after=$(store_state)
[ "$before" = "$after" ] || fail "a failed command changed the store"$'\n'"$before"$'\n---\n'"$after"
lfs verify >/dev/null || fail "store damaged after failures"
[ "$(lfs cat main:dir/file)" = x ] || fail "cat"
echo ok
