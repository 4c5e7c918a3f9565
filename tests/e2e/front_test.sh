#!/usr/bin/env bash
# The front (`layerfs`, src/front/front.h) against the full CLI (`layerfs-full`): the same stdout,
# stderr and exit status for a set of command lines, successes and failures, with a daemon (the
# front has the daemon run them) and without one (the front execs the full CLI); and proof that
# the daemon, not the full CLI, ran them when a daemon listens.
source "$(dirname "$0")/lib.bash" "$1"
FULL=$(dirname "$LAYERFS")/layerfs-full
[ -x "$FULL" ] || fail "no $FULL beside $LAYERFS"
# The front loads none of the core's libraries.
if ldd "$LAYERFS" >"$WORK/ldd" 2>&1; then
  ! grep -Eq 'rocksdb|git2|rados|curl|zstd|fmt|spdlog' "$WORK/ldd" || fail "the front links: $(cat "$WORK/ldd")"
fi
M=$WORK/m
lfs init "$LAYERFS_STORE" >/dev/null
printf 'one\n' >"$WORK/seed"

# same ARGS...: front and full CLI give byte-identical stdout and stderr and the same status.
# Commands that change the Store are run by the front only (run_front), then compared by
# read-only commands.
same() {
  local rf=0 rl=0
  "$LAYERFS" "$@" >"$WORK/f.out" 2>"$WORK/f.err" || rf=$?
  "$FULL" "$@" >"$WORK/l.out" 2>"$WORK/l.err" || rl=$?
  [ "$rf" = "$rl" ] || fail "layerfs $*: exit $rf, full CLI $rl (stderr: $(cat "$WORK/f.err") / $(cat "$WORK/l.err"))"
  cmp -s "$WORK/f.out" "$WORK/l.out" || { diff "$WORK/f.out" "$WORK/l.out" >&2 || true; fail "layerfs $*: stdout differs"; }
  cmp -s "$WORK/f.err" "$WORK/l.err" || { diff "$WORK/f.err" "$WORK/l.err" >&2 || true; fail "layerfs $*: stderr differs"; }
  echo "$rf"
}

# A set of command lines: help, usage errors, successes, failures (text and --json).
compare_all() {
  [ "$(same --help)" = 0 ] || fail "--help"
  [ "$(same commit --help)" = 0 ] || fail "commit --help"
  [ "$(same)" = 2 ] || fail "no verb"
  [ "$(same --version)" = 2 ] || fail "--version"
  [ "$(same nosuchverb)" = 2 ] || fail "unknown verb"
  [ "$(same log --max-count)" = 2 ] || fail "option without value"
  same branch >/dev/null
  same branch --json >/dev/null
  same log >/dev/null
  same log --json -n 2 >/dev/null
  [ "$(same log nosuchbranch)" = 1 ] || fail "log of a missing branch"
  [ "$(same log nosuchbranch --json)" = 1 ] || fail "log --json of a missing branch"
  same show main >/dev/null
  same diff main~1 main >/dev/null
  same diff --stat main~1 main >/dev/null
  same cat main:big >/dev/null
  same cat main:file >/dev/null
  [ "$(same cat main:nothere)" = 1 ] || fail "cat of a missing path"
  lfs stats >/dev/null  # waits for background encoding: verify's counts stay put below
  same verify >/dev/null
  same --store "$LAYERFS_STORE" branch >/dev/null
  same "--store=$LAYERFS_STORE" log -n 1 >/dev/null
  [ "$(same fork main)" = 1 ] || fail "fork onto an existing branch"
  [ "$(same branch -d nosuch)" = 1 ] || fail "delete of a missing branch"
  [ "$(same merge nosuch --into main --json)" = 1 ] || fail "merge of a missing ref"
}

mnt main "$M" >/dev/null
printf 'v1\n' >"$M/file"
head -c $((17 << 20)) /dev/urandom >"$M/big"  # more than one 16 MiB window of cat
c1=$("$LAYERFS" commit "$M" -m one)
is_id "$c1" || fail "commit printed '$c1'"
# The daemon logs each command line it runs (its log is flushed a moment later).
for _ in $(seq 100); do grep -q 'cli commit' "$LAYERFS_STORE/layerfsd.log" && break; sleep 0.1; done
grep -q 'cli commit' "$LAYERFS_STORE/layerfsd.log" || fail "the daemon did not run the front's commit"
printf 'v2\n' >"$M/file"
c2=$("$LAYERFS" commit "$M" -m two)
[ "$("$LAYERFS" log -n 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')" = "$c2" ] ||
  fail "log does not start at the front's second commit"
cmp <("$LAYERFS" cat main:big) "$M/big" || fail "cat through the front differs from the file"
compare_all
# From inside the mount: the Store is found from the working directory, by both.
(cd "$M" && printf 'x\n' >x && [ "$(same status)" = 0 ] && same status --json >/dev/null) || fail "status in the mount"
same status "$M" >/dev/null
same mounts >/dev/null
# A relative --store, from the Store's parent directory.
(cd "$WORK" && same --store store branch >/dev/null) || fail "relative --store"
# write-file reads stdin: the front leaves it to the full CLI, which reads it.
printf 'from stdin\n' | "$LAYERFS" write-file main /w.txt
[ "$(cat "$M/w.txt")" = "from stdin" ] || fail "write-file from stdin through the front: $(cat "$M/w.txt")"
"$LAYERFS" write-file main /c.txt --content 'given' 
[ "$(cat "$M/c.txt")" = "given" ] || fail "write-file --content through the front"
# exec runs in the client: through the front it still runs.
out=$("$LAYERFS" exec main -- sh -c 'cat file')
[ "$out" = v2 ] || fail "exec through the front printed '$out'"
# init runs in the client even when LAYERFS_STORE names a running daemon's Store.
"$LAYERFS" init "$WORK/other" >/dev/null || fail "init through the front"
[ -d "$WORK/other" ] || fail "init made no Store"
# Progress on a terminal comes through the front (the daemon draws it on the front's stderr).
python3 - "$LAYERFS" <<'PY' || fail "no progress line on a terminal through the front"
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "verify"])
out = b""
while True:
    try:
        b = os.read(fd, 65536)
    except OSError:
        break
    if not b:
        break
    out += b
_, st = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(st) == 0, out
assert b"verify: " in out and b"\r" in out, out
PY

# Without a daemon: the front execs the full CLI, which opens the Store itself.
lfs umount "$M" >/dev/null
wait_daemon_gone 20
compare_all
[ ! -e "$LAYERFS_STORE/control.sock" ] || fail "a daemon was started by read-only verbs"
echo "front_test: OK"
