#!/usr/bin/env bash
# Three "hosts" (three Stores, each with its own daemon and mounts) sharing one remote: A commits
# in a mount and pushes; B clones lazily, forks, mounts, checks the tree byte for byte, commits
# and pushes; C fetches and sees both; then all three push one branch at once, round after round:
# one winner per round, every refused host pulls (a merge, through its mount) and pushes again,
# and no pushed Commit and no host's change is lost.
# REMOTE_KIND=rados|s3 (remote_lib.bash) runs the same against the test cluster.
source "$(dirname "$0")/lib.bash" "$1"
source "$(dirname "$0")/remote_lib.bash"
ROUNDS=${ROUNDS:-6}
A=$WORK/store B=$WORK/B C=$WORK/C
URL=$(new_remote_url hosts)
a() { LAYERFS_STORE=$A lfs "$@"; }
b() { LAYERFS_STORE=$B lfs "$@"; }
c() { LAYERFS_STORE=$C lfs "$@"; }

# The daemons of B and C go with the test too (lib.bash stops A's).
stop_daemon_of() {
  local pid
  pid=$(cat "$1/layerfsd.pid" 2>/dev/null || true)
  [ -n "$pid" ] && running "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do running "$pid" || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}
cleanup_hosts() {
  local d
  for d in "${MOUNTED[@]}"; do is_mounted "$d" && timeout 10 "$LAYERFS" umount "$d" >/dev/null 2>&1 || true; done
  stop_daemon_of "$B"
  stop_daemon_of "$C"
}
trap 'rc=$?; cleanup_hosts; (exit $rc); cleanup' EXIT

# --- A: a tree made in a mount, committed there, pushed.
a init "$A" >/dev/null
LAYERFS_STORE=$A mnt main "$WORK/mA" >/dev/null
mkdir -p "$WORK/mA/src/deep/er" "$WORK/mA/empty"
# An older Commit's file that the head no longer has: a lazy clone reading the whole head never
# fetches it (what lazy verify must count as not fetched yet; a pack's frames carry the
# neighbours of what is read, so the head's own records may all come in).
head -c 3000000 /dev/urandom >"$WORK/mA/old.bin"
a commit "$WORK/mA" -m "an old file" >/dev/null
rm "$WORK/mA/old.bin"
for i in $(seq 40); do printf 'file %d\n%s\n' "$i" "$(seq "$i")" >"$WORK/mA/src/f$i.txt"; done
head -c 5000000 /dev/urandom >"$WORK/mA/src/deep/er/big.bin"
printf '#!/bin/sh\necho hi\n' >"$WORK/mA/src/run.sh"
chmod 755 "$WORK/mA/src/run.sh"
ln -s f1.txt "$WORK/mA/src/link"
setfattr -n user.tag -v blue "$WORK/mA/src/f2.txt"
first=$(a commit "$WORK/mA" -m "tree from A")
is_id "$first" || fail "commit printed '$first'"
a remote add origin "$URL"
a push origin main >"$WORK/push1.out"
grep -q "created *main -> origin/main" "$WORK/push1.out" || fail "first push: $(cat "$WORK/push1.out")"
[ "$(a log -n 1 origin/main --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')" = "$first" ] ||
  fail "origin/main is not A's commit"

# --- C clones in full now; B clones lazily.
c clone "$URL" "$C" >/dev/null
c verify >/dev/null || fail "C's clone does not verify"
b clone --lazy "$URL" "$B" --json >"$WORK/clone.json"
python3 -c "import json,sys; j=json.load(open('$WORK/clone.json')); assert j['lazy'] and j['branches'][0]['name']=='main', j" ||
  fail "clone --json: $(cat "$WORK/clone.json")"
before=$(du -sk "$B" | cut -f1)
b fork feature origin/main >/dev/null
LAYERFS_STORE=$B mnt feature "$WORK/mB" >/dev/null
# Eight readers at once on a mount that has fetched nothing yet: the same bytes as A's.
sums() { (cd "$1" && find . -type f -print0 | xargs -0 -P 8 -n 3 sha256sum | sort -k2); }
[ "$(sums "$WORK/mB")" = "$(sums "$WORK/mA")" ] || fail "parallel lazy reads differ from A's files"
same_tree "$WORK/mA" "$WORK/mB"
cmp "$WORK/mA/src/deep/er/big.bin" "$WORK/mB/src/deep/er/big.bin" || fail "big file differs"
printf 'from B\n' >"$WORK/mB/src/from-b.txt"
rm "$WORK/mB/src/f3.txt"
feature=$(b commit "$WORK/mB" -m "B's change")
# Run by B's daemon (its mounts are live), the push shows progress on a terminal's stderr.
LAYERFS_STORE=$B script -qec "$LAYERFS push origin feature" /dev/null >"$WORK/push-tty.out" </dev/null
grep -q "push: .* objects" "$WORK/push-tty.out" || fail "no progress on a terminal: $(cat -v "$WORK/push-tty.out")"
grep -q "created *feature -> origin/feature" "$WORK/push-tty.out" || fail "push through the daemon: $(cat -v "$WORK/push-tty.out")"
b verify >"$WORK/verify-b.out" || fail "lazy verify: $(cat "$WORK/verify-b.out")"
grep -q "not fetched yet" "$WORK/verify-b.out" || fail "a lazy Store fetched everything: $(cat "$WORK/verify-b.out")"

# --- C fetches and sees both; reads B's branch through a read-only mount.
c fetch origin --json >"$WORK/fetch-c.json"
python3 - "$WORK/fetch-c.json" "$feature" <<'EOF' || fail "C's fetch: $(cat "$WORK/fetch-c.json")"
import json, sys
j = json.load(open(sys.argv[1]))
refs = {r["branch"]: r for r in j["refs"]}
assert refs["feature"]["status"] == "new" and refs["feature"]["new"] == sys.argv[2], refs
assert refs["main"]["status"] == "unchanged", refs
EOF
[ "$(c cat origin/feature:src/from-b.txt)" = "from B" ] || fail "C cannot read B's file"
LAYERFS_STORE=$C mnt origin/feature "$WORK/mC-feature" --read-only >/dev/null
same_tree "$WORK/mB" "$WORK/mC-feature"
c umount "$WORK/mC-feature"

# --- gc keeps what only a remote-tracking ref reaches (C has no branch of B's work), and in a
# lazy Store under a live mount (B) skips what was never fetched; reads fetch as before.
c gc >/dev/null
[ "$(c cat origin/feature:src/from-b.txt)" = "from B" ] || fail "gc dropped what origin/feature reaches"
c verify >/dev/null || fail "C does not verify after gc"
b gc --json >"$WORK/gc-b.json"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['missing'] > 0, j" "$WORK/gc-b.json" ||
  fail "gc of a lazy Store: $(cat "$WORK/gc-b.json")"
cmp "$WORK/mA/src/deep/er/big.bin" "$WORK/mB/src/deep/er/big.bin" || fail "B's mount after gc"
b cat origin/main:src/f7.txt >"$WORK/f7" && cmp "$WORK/f7" "$WORK/mA/src/f7.txt" || fail "lazy read after gc"
b verify >/dev/null || fail "B does not verify after gc"

# --- All three push main at once, round after round.
LAYERFS_STORE=$B mnt main "$WORK/mB-main" >/dev/null
LAYERFS_STORE=$C mnt main "$WORK/mC" >/dev/null
declare -A mounts=([a]="$WORK/mA" [b]="$WORK/mB-main" [c]="$WORK/mC")
winners=()
for r in $(seq "$ROUNDS"); do
  for h in a b c; do
    $h pull origin main >/dev/null || fail "round $r: $h cannot pull"
    printf 'round %d from %s\n' "$r" "$h" >"${mounts[$h]}/round-$r-$h.txt"
    $h commit "${mounts[$h]}" -m "round $r $h" >/dev/null
  done
  pending=(a b c)
  tries=0
  while [ ${#pending[@]} -gt 0 ]; do
    tries=$((tries + 1))
    [ $tries -le 6 ] || fail "round $r: pushes did not settle"
    for h in "${pending[@]}"; do
      rm -f "$WORK/push-$h.rc"
      ( rc=0; $h push origin main >"$WORK/push-$h.out" 2>"$WORK/push-$h.err" || rc=$?; echo $rc >"$WORK/push-$h.rc" ) &
    done
    wait
    won=()
    lost=()
    for h in "${pending[@]}"; do
      if [ "$(cat "$WORK/push-$h.rc")" = 0 ]; then
        won+=("$h")
      else
        grep -q "rejected main -> origin/main" "$WORK/push-$h.err" || fail "round $r: $h failed otherwise: $(cat "$WORK/push-$h.err")"
        lost+=("$h")
      fi
    done
    [ ${#won[@]} = 1 ] || fail "round $r: ${#won[@]} pushes won (${won[*]})"
    winners+=("$($won log -n 1 main --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')")
    # Each refused host pulls: the winner's Commit merges into its mounted branch.
    for h in "${lost[@]}"; do
      $h pull origin main --json >"$WORK/pull-$h.json" || fail "round $r: $h cannot pull: $(cat "$WORK/pull-$h.json")"
      python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['status']=='merged' and j['through_workspace'], j" \
        "$WORK/pull-$h.json" || fail "round $r: $h's pull: $(cat "$WORK/pull-$h.json")"
    done
    pending=("${lost[@]}")
  done
done
# Everyone ends on the remote's head; every change and every winning Commit is in its history.
for h in a b c; do
  $h pull origin main >/dev/null || fail "$h: final pull"
done
head_a=$(a log -n 1 main --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
for h in b c; do
  [ "$($h log -n 1 main --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')" = "$head_a" ] ||
    fail "$h is not on the remote head"
done
history=$(a log --graph --json main)
for w in "${winners[@]}"; do grep -q "\"$w\"" <<<"$history" || fail "winning commit $w was lost"; done
for r in $(seq "$ROUNDS"); do
  for h in a b c; do
    for m in "${mounts[@]}"; do
      [ "$(cat "$m/round-$r-$h.txt")" = "round $r from $h" ] || fail "$m lacks round $r of $h"
    done
  done
done
same_tree "$WORK/mA" "$WORK/mC"
c verify >/dev/null || fail "C does not verify"
a verify >/dev/null || fail "A does not verify"
echo "remote hosts ok ($REMOTE_KIND): $ROUNDS rounds, lazy clone of B grew by $(($(du -sk "$B" | cut -f1) - before)) KB"
