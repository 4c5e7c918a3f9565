#!/usr/bin/env bash
# reset on a mounted branch, read-only commit mounts, refused double mounts and deletes, mount -f.
source "$(dirname "$0")/lib.bash" "$1"
M=$WORK/m R=$WORK/ro
lfs init "$LAYERFS_STORE" >/dev/null
mnt main "$M" >/dev/null
printf 'v1\n' >"$M/file"
mkdir "$M/dir"
printf 'in dir\n' >"$M/dir/a"
c1=$(lfs commit "$M" -m one)
printf 'v2\n' >"$M/file"
rm "$M/dir/a"
printf 'new\n' >"$M/second"
c2=$(lfs commit "$M" -m two)

# reset discards uncommitted changes and the mount shows the head again.
printf 'scratch\n' >"$M/file"
printf 'junk\n' >"$M/junk"
rm "$M/second"
[ -n "$(lfs status "$M")" ] || fail "no status before reset"
lfs reset "$M" >/dev/null
[ -z "$(lfs status "$M")" ] || fail "status after reset: $(lfs status "$M")"
[ "$(cat "$M/file")" = v2 ] || fail "reset kept the uncommitted write"
[ ! -e "$M/junk" ] || fail "reset kept an uncommitted file"
[ "$(cat "$M/second")" = new ] || fail "reset did not bring back a deleted file"
# reset works in place: a file held open reads the head's bytes afterwards, and a process whose
# working directory is in the mount goes on there (a remount left it on a detached mount:
# "Transport endpoint is not connected"), the mount itself unchanged.
dev=$(stat -c %d "$M")
printf 'open scratch\n' >"$M/file"
mkdir -p "$M/dir/sub"
printf 'uncommitted\n' >"$M/dir/sub/x"
exec 7<"$M/file"
(
  cd "$M/dir" || exit 1
  touch "$WORK/in-dir"
  while [ ! -e "$WORK/go" ]; do sleep 0.05; done
  { ls -a . | tr '\n' ' '; [ -e sub ] || echo gone; } >"$WORK/cwd.out" 2>&1
) &
cwd_pid=$!
while [ ! -e "$WORK/in-dir" ]; do sleep 0.05; done
lfs reset "$M" >/dev/null
touch "$WORK/go"
wait $cwd_pid
[ "$(cat <&7)" = v2 ] || fail "a file open across reset does not read the head's bytes"
exec 7<&-
[ "$(cat "$WORK/cwd.out")" = ". .. gone" ] ||
  fail "a working directory in the mount did not survive reset: '$(cat "$WORK/cwd.out")'"
[ "$(stat -c %d "$M")" = "$dev" ] || fail "reset remounted"
[ -z "$(lfs status "$M")" ] || fail "status after an in-place reset: $(lfs status "$M")"

# reset --hard main~1 moves the branch; the mount shows the older tree.
printf 'uncommitted\n' >"$M/file"
out=$(lfs reset "$M" --hard main~1)
[ "$out" = "main $c1" ] || fail "reset --hard printed '$out'"
[ "$(lfs branch | awk '$1=="main"{print $2}')" = "$c1" ] || fail "main did not move to $c1"
[ "$(cat "$M/file")" = v1 ] || fail "after reset --hard file is $(cat "$M/file")"
[ "$(cat "$M/dir/a")" = "in dir" ] || fail "after reset --hard dir/a missing"
[ ! -e "$M/second" ] || fail "after reset --hard second still there"
[ -z "$(lfs status "$M")" ] || fail "status after reset --hard"
printf 'v3\n' >"$M/file"
c3=$(lfs commit "$M" -m three)
lfs log --json main | python3 -c "import json,sys; l=json.load(sys.stdin); assert l[0]['parents']==['$c1'], l[0]" ||
  fail "commit after reset --hard is not on $c1"

# restore, as git restore: PATHs back as the head (or --source REF) has them, in place; files the
# source does not have stay. Paths are relative to the working directory in the mount.
printf 'scratch\n' >"$M/file"
chmod 600 "$M/file"
rm "$M/dir/a"
printf 'kept\n' >"$M/dir/new"
(cd "$M/dir" && lfs restore a)
[ "$(cat "$M/dir/a")" = "in dir" ] || fail "restore a in dir/"
[ "$(cat "$M/file")" = scratch ] || fail "restore of dir/a touched file"
(cd "$M" && lfs restore file)
[ "$(cat "$M/file")" = v3 ] && [ "$(stat -c %a "$M/file")" = 644 ] || fail "restore file: $(cat "$M/file") $(stat -c %a "$M/file")"
[ "$(cat "$M/dir/new")" = kept ] || fail "restore dropped a file the head does not have"
[ "$(lfs status "$M")" = "$(printf 'A\tdir/new')" ] || fail "status after restore: $(lfs status "$M")"
rm -r "$M/dir"
lfs restore --target "$M" dir
[ "$(cat "$M/dir/a")" = "in dir" ] && [ ! -e "$M/dir/new" ] || fail "restore of a removed directory: $(ls "$M/dir")"
[ -z "$(lfs status "$M")" ] || fail "status after restoring dir: $(lfs status "$M")"
# From another Commit the restored paths are uncommitted changes.
(cd "$M" && lfs restore --source "$c2" file second)
[ "$(cat "$M/file")" = v2 ] && [ "$(cat "$M/second")" = new ] || fail "restore --source $c2"
[ "$(lfs status "$M" | sort | tr '\n' ' ')" = "$(printf 'A\tsecond M\tfile ')" ] || fail "status after restore --source: $(lfs status "$M")"
lfs restore --json --target "$M" --source "$c2" file | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["branch"] == "main" and r["restored"] == [], r' || fail "restore of a path already as the source has it"
(cd "$M" && expect_fail restore nosuch)
grep -q "nosuch: not in" "$WORK/stderr" || fail "restore of a path the head lacks: $(cat "$WORK/stderr")"
(cd "$WORK" && expect_fail restore file)
lfs reset "$M" >/dev/null
[ -z "$(lfs status "$M")" ] && [ "$(cat "$M/file")" = v3 ] || fail "reset after restore --source"

# A commit id mounts read-only.
out=$(mnt "$c2" "$R")
case "$out" in *"(read-only)"*) ;; *) fail "mount of a commit did not say read-only: $out" ;; esac
[ "$(cat "$R/file")" = v2 ] || fail "read-only mount shows $(cat "$R/file")"
err=$( { printf x >"$R/file"; } 2>&1) && fail "write to a read-only mount succeeded"
case "$err" in *"Read-only file system"*) ;; *) fail "write error on read-only mount: $err" ;; esac
err=$(touch "$R/newfile" 2>&1) && fail "create on a read-only mount succeeded"
case "$err" in *"Read-only file system"*) ;; *) fail "create error on read-only mount: $err" ;; esac
err=$(mkdir "$R/d" 2>&1) && fail "mkdir on a read-only mount succeeded"
err=$(rm "$R/file" 2>&1) && fail "rm on a read-only mount succeeded"
python3 - "$R/file" <<'PY' || fail "open for writing on a read-only mount is not EROFS"
import errno, os, sys
try:
    os.open(sys.argv[1], os.O_WRONLY)
except OSError as e:
    sys.exit(0 if e.errno == errno.EROFS else 1)
sys.exit(1)
PY
expect_fail commit "$R" -m nope
expect_fail reset "$R"

# A branch mounts writable once; a mounted branch cannot be deleted; a mountpoint is used once.
mkdir -p "$WORK/m2"
expect_fail mount main "$WORK/m2"
! is_mounted "$WORK/m2" || fail "second mount of main happened"
expect_fail mount main "$R"
lfs fork other main >/dev/null
expect_fail mount other "$M"
expect_fail branch -d main
lfs branch | grep -q '^main ' || fail "main was deleted while mounted"
expect_fail mount no-such-branch "$WORK/m2"
expect_fail mount main "$WORK/does-not-exist"
[ "$(lfs mounts | wc -l)" = 2 ] || fail "mounts: $(lfs mounts)"

lfs umount "$R"
lfs umount "$M"
wait_daemon_gone 10
lfs branch -d other >/dev/null || fail "branch -d of an unmounted branch"

# mount -f: the daemon stays in the foreground and ends with its last mount.
F=$WORK/fg
mkdir -p "$F"
MOUNTED+=("$(realpath "$F")")
"$LAYERFS" mount -f main "$F" >"$WORK/fg.out" 2>"$WORK/fg.err" &
fgpid=$!
for _ in $(seq 100); do is_mounted "$F" && break; sleep 0.1; done
is_mounted "$F" || fail "mount -f did not mount: $(cat "$WORK/fg.err")"
kill -0 "$fgpid" 2>/dev/null || fail "mount -f returned while mounted"
[ "$(daemon_pid)" = "$fgpid" ] || fail "foreground daemon pid $(daemon_pid) is not $fgpid"
[ "$(cat "$F/file")" = v3 ] || fail "foreground mount content"
lfs umount "$F"
for _ in $(seq 100); do kill -0 "$fgpid" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$fgpid" 2>/dev/null || fail "mount -f process still running after umount"
wait "$fgpid" || fail "mount -f exited with $?"
wait_daemon_gone 10
echo "reset and read-only ok"
