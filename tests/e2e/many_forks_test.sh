#!/usr/bin/env bash
# 50 forks of one commit mounted at once by one daemon: write, commit via the mountpoint, cat.
source "$(dirname "$0")/lib.bash" "$1"
N=50
lfs init "$LAYERFS_STORE" >/dev/null
mnt main "$WORK/main" >/dev/null
mkdir "$WORK/main/shared"
printf 'base\n' >"$WORK/main/shared/base.txt"
base=$(lfs commit "$WORK/main" -m base)
lfs umount "$WORK/main"
wait_daemon_gone 10
start=$(date +%s)
for i in $(seq $N); do
  lfs fork "f$i" main >/dev/null
  mnt "f$i" "$WORK/m$i" >/dev/null
done
[ "$(lfs mounts | wc -l)" = $N ] || fail "mounts lists $(lfs mounts | wc -l), not $N"
for i in $(seq $N); do
  [ "$(cat "$WORK/m$i/shared/base.txt")" = base ] || fail "f$i does not show the base"
  printf 'fork %d\n' "$i" >"$WORK/m$i/own-$i.txt"
done
declare -A commit
for i in $(seq $N); do
  commit[$i]=$(lfs commit "$WORK/m$i" -m "fork $i")
  is_id "${commit[$i]}" || fail "commit of f$i printed '${commit[$i]}'"
done
for i in $(seq $N); do
  c=${commit[$i]}
  [ "$(lfs cat "$c:own-$i.txt")" = "fork $i" ] || fail "cat $c:own-$i.txt"
  [ "$(lfs cat "$c:shared/base.txt")" = base ] || fail "cat $c:shared/base.txt"
  j=$((i % N + 1))
  expect_fail cat "$c:own-$j.txt"
  lfs log --json "f$i" | python3 -c "import json,sys; l=json.load(sys.stdin); assert l[0]['parents']==['$base'], l[0]" ||
    fail "f$i's commit is not on the base"
done
[ "$(lfs mounts | wc -l)" = $N ] || fail "mounts after commits"
for i in $(seq $N); do lfs umount "$WORK/m$i"; done
wait_daemon_gone 10
for i in $(seq $N); do ! is_mounted "$WORK/m$i" || fail "m$i still mounted"; done
echo "many forks ok ($(($(date +%s) - start)) s for $N forks)"
