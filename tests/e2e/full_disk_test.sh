#!/usr/bin/env bash
# A Store on a small ext4 filesystem (a loop device) filled to the last block, through the mount
# and from outside it (docs/reliability.md, "Full disk"): writers get ENOSPC, never EIO or a dead
# mount; commit, import and gc fail cleanly and move nothing; the daemon lives and serves reads;
# deleting through the mount frees space, also when the disk was filled by something else (the
# reserve); everything works afterwards and verify is clean; the daemon closes cleanly on a full
# disk; read-only verbs work there without a daemon and change nothing; and a mount on a full
# disk starts (the issue's user could not even delete the file that filled it).
# Prints its figures (FIGURE lines) for docs/reliability.md. Needs root (losetup, mount).
source "$(dirname "$0")/lib.bash" "$1"
[ "$(id -u)" = 0 ] || fail "needs root for the loop device"

IMG=$WORK/disk.img
DISK=$WORK/disk
LOOP=
M=$WORK/m
mkdir -p "$DISK" "$M"
detach_disk() {
  if mountpoint -q "$DISK"; then umount "$DISK" || umount -l "$DISK"; fi
  if [ -n "$LOOP" ]; then losetup -d "$LOOP"; fi
}
CLEANUP_HOOKS+=(detach_disk)

truncate -s 256M "$IMG"
mkfs.ext4 -q -F -m 0 "$IMG"  # -m 0: no blocks kept for root, so root fills it as a user would
LOOP=$(losetup -f --show "$IMG")
mount "$LOOP" "$DISK"
export LAYERFS_STORE=$DISK/store

free_bytes() { df -B1 --output=avail "$DISK" | tail -n 1 | tr -d ' '; }
alive() { local pid; pid=$(daemon_pid); [ -n "$pid" ] && running "$pid"; }
log_has() { grep -q -- "$1" "$LAYERFS_STORE/layerfsd.log"; }
now_ms() { date +%s%3N; }
# fill_file PATH: writes 1 MiB fsync'ed chunks until a write fails; prints "errno chunks".
fill_file() {
  python3 - "$1" <<'EOF'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
i = 0
try:
    while True:
        os.pwrite(fd, os.urandom(1 << 20), i << 20)
        os.fsync(fd)
        i += 1
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)), i)
EOF
}
# fill_outside: a file beside the Store takes every free block (a process writing elsewhere).
fill_outside() {
  fallocate -l "$(free_bytes)" "$DISK/filler" 2>/dev/null || true
  local left
  left=$(free_bytes)
  [ "$left" -lt $((1 << 20)) ] || head -c "$left" /dev/zero >>"$DISK/filler" 2>/dev/null || true
}
# wait_free MIN_BYTES: free space reaches MIN_BYTES within 10 s (forgets and collection are async).
wait_free() {
  for _ in $(seq 100); do [ "$(free_bytes)" -ge "$1" ] && return 0; sleep 0.1; done
  fail "free space stayed at $(free_bytes), wanted $1"
}

lfs init "$LAYERFS_STORE" >/dev/null
[ -f "$LAYERFS_STORE/reserve" ] || fail "no reserve file in a new Store"
reserve=$(stat -c %s "$LAYERFS_STORE/reserve")
echo "FIGURE filesystem_bytes=$(df -B1 --output=size "$DISK" | tail -n 1 | tr -d ' ') reserve_bytes=$reserve"

# --- (a) fill the disk through the mount.
mnt main "$M" >/dev/null
pid=$(daemon_pid)
mkdir "$M/keep"
for i in $(seq 20); do printf 'kept %d\n' "$i" >"$M/keep/f$i"; done
head -c 3000000 /dev/urandom >"$M/keep/blob"
cp "$M/keep/blob" "$WORK/blob"
c1=$(lfs commit "$M" -m before-full)
lfs fork side main >/dev/null
# Garbage for gc: a commit made unreachable.
head -c 2000000 /dev/urandom >"$M/garbage"
lfs commit "$M" -m garbage >/dev/null
lfs reset --hard "$c1" "$M" >/dev/null
[ ! -e "$M/garbage" ] || fail "reset left garbage"
read -r err chunks < <(fill_file "$M/big")
[ "$err" = ENOSPC ] || fail "filling through the mount ended with $err, not ENOSPC"
[ "$chunks" -gt 100 ] || fail "only $chunks MiB fit before ENOSPC"
echo "FIGURE mount_enospc_after_mib=$chunks free_at_enospc=$(free_bytes)"
alive || fail "daemon died when the disk filled"
# The mount lives and serves reads; small writes still go through or fail with ENOSPC.
ls "$M/keep" >/dev/null || fail "mount dead after ENOSPC"
cmp "$M/keep/blob" "$WORK/blob" || fail "committed file unreadable on a full disk"
[ "$(cat "$M/keep/f3")" = "kept 3" ] || fail "committed file wrong on a full disk"
if ! out=$(head -c 4000000 /dev/urandom 2>/dev/null >"$M/more" 2>&1); then :; fi
if [ -e "$M/more" ]; then
  rm -f "$M/more"
fi
big_size=$(stat -c %s "$M/big")
[ "$big_size" -ge $((chunks << 20)) ] || fail "fsync'ed chunks lost: big is $big_size bytes"
# df on the mount shows no room left for writers.
avail=$(df -B1 --output=avail "$M" | tail -n 1 | tr -d ' ')
[ "$avail" -lt $((16 << 20)) ] || fail "df on the full mount says $avail bytes available"

# commit, import and gc on the full disk fail cleanly (one error line) and move nothing.
expect_fail commit "$M" -m on-full-disk
grep -qi "no space" "$WORK/stderr" || fail "commit error does not say no space: $(cat "$WORK/stderr")"
[ "$(lfs branch | awk '$1=="main"{print $2}')" = "$c1" ] || fail "failed commit moved main"
mkdir -p "$WORK/imp"
head -c 40000000 /dev/urandom >"$WORK/imp/big"
side=$(lfs branch | awk '$1=="side"{print $2}')
expect_fail import "$WORK/imp" -b side -m on-full-disk
grep -qi "no space" "$WORK/stderr" || fail "import error does not say no space: $(cat "$WORK/stderr")"
[ "$(lfs branch | awk '$1=="side"{print $2}')" = "$side" ] || fail "failed import moved side"
gc_rc=0
lfs gc >"$WORK/gc.out" 2>"$WORK/gc.err" || gc_rc=$?
[ "$gc_rc" = 0 ] || grep -qi "no space\|room" "$WORK/gc.err" || fail "gc on a full disk: $(cat "$WORK/gc.err")"
alive || fail "daemon died during commit/import/gc on a full disk"
# Read-only verbs through the daemon.
lfs log main >/dev/null || fail "log on a full disk"
lfs cat "$c1:keep/f3" | grep -q "kept 3" || fail "cat on a full disk"
lfs verify >"$WORK/verify.out" || fail "verify on a full disk: $(cat "$WORK/verify.out")"
grep -q "0 problems" "$WORK/verify.out" || fail "verify found problems on a full disk"

# Deleting through the mount frees the space.
before=$(free_bytes)
t0=$(now_ms)
rm "$M/big"
wait_free $((before + (chunks - 8) * (1 << 20)))
echo "FIGURE rm_frees_ms=$(($(now_ms) - t0)) freed_bytes=$(($(free_bytes) - before))"
alive || fail "daemon died freeing space"
# Everything works again.
head -c 5000000 /dev/urandom >"$M/after"
cp "$M/after" "$WORK/after"
c2=$(lfs commit "$M" -m after-full)
is_id "$c2" || fail "commit after freeing space: $c2"
lfs cat "$c2:after" | cmp - "$WORK/after" || fail "committed file differs after the full disk"
lfs gc >/dev/null || fail "gc after freeing space"
lfs verify >/dev/null || fail "verify after freeing space"

# --- (b) something else fills the disk: deleting through the mount still works (the reserve).
head -c 30000000 /dev/urandom >"$M/victim"
lfs commit "$M" -m victim >/dev/null
head -c 20000000 /dev/urandom >"$M/uncommitted"
fill_outside
echo "FIGURE outside_fill_left=$(free_bytes)"
out=$(python3 -c "
import errno, os
try:
    with open('$M/new', 'wb') as f:
        f.write(os.urandom(3 << 20)); f.flush(); os.fsync(f.fileno())
    print('OK')
except OSError as e:
    print(errno.errorcode[e.errno])")
[ "$out" = ENOSPC ] || fail "a write on a disk filled from outside gave $out, not ENOSPC"
t0=$(now_ms)
rm "$M/uncommitted" || fail "rm on a disk filled from outside"
rm -f "$M/new"
echo "FIGURE rm_on_outside_full_ms=$(($(now_ms) - t0))"
# Renames and deletions go on until the database's own WAL meets the full disk: it takes the
# reserve, reopens, and the operation goes through.
t0=$(now_ms)
for i in $(seq 300); do
  mv "$M/keep/f1" "$M/keep/g1" || fail "rename $i on a disk filled from outside"
  mv "$M/keep/g1" "$M/keep/f1" || fail "rename back $i on a disk filled from outside"
  log_has "reopened after the failure" && break
done
echo "FIGURE renames_until_reopen=$i ms=$(($(now_ms) - t0))"
alive || fail "daemon died on a disk filled from outside"
log_has "released the 8.0 MiB reserve" || fail "the reserve was not released for the database"
log_has "reopened after the failure" || fail "the database did not reopen after running out of space"
[ "$(cat "$M/keep/f1")" = "kept 1" ] || fail "renamed file lost its content"
cmp "$M/keep/blob" "$WORK/blob" || fail "read after the disk filled from outside"
[ "$(lfs branch | awk '$1=="main"{print $2}')" != "$c1" ] || fail "main lost its commits"
rm "$DISK/filler"
sleep 0.5
head -c 3000000 /dev/urandom >"$M/back"
c3=$(lfs commit "$M" -m back)
is_id "$c3" || fail "commit once the outside filler went: $c3"
lfs verify >/dev/null || fail "verify after the outside fill"
for _ in $(seq 50); do [ -f "$LAYERFS_STORE/reserve" ] && break; touch "$M/poke"; sleep 0.1; done
[ -f "$LAYERFS_STORE/reserve" ] || fail "the reserve was not taken back once space returned"

# --- (c) the daemon closes on a full disk, and read-only verbs work there without it.
head -c 4000000 /dev/urandom >"$M/unsaved"  # uncommitted: survives the close in the WAL and log
cp "$M/unsaved" "$WORK/unsaved"
# stats encodes what commits left to the background first: no write of the daemon is in flight
# when the disk fills (one admitted just before would meet it, and take the reserve: part (b)).
lfs stats >/dev/null || fail "stats before the close"
fill_outside
lfs umount "$M" >/dev/null || fail "umount on a full disk"
wait_daemon_gone 20
! log_has "fatal signal" || fail "the daemon crashed: $(grep -A5 'fatal signal' "$LAYERFS_STORE/layerfsd.log")"
log_has "closed $LAYERFS_STORE" || fail "no clean close in the log"
log_has "compact workspace data at exit: no space" || fail "the exit's compaction did not say it was skipped"
[ -f "$LAYERFS_STORE/reserve" ] || fail "the daemon's close on a full disk used up the reserve"
fill_outside
listing() { (cd "$LAYERFS_STORE" && find . -path ./LOCK -prune -o -type f -printf '%p %s\n' | sort); }
before_ro=$(listing)
for verb in "log main" "branch" "show $c3" "diff $c1 $c3" "cat $c3:back" "stats" "verify"; do
  # shellcheck disable=SC2086
  lfs $verb >"$WORK/ro.out" 2>"$WORK/ro.err" || fail "layerfs $verb on a full disk without a daemon: $(cat "$WORK/ro.err")"
  grep -q "opened read-only" "$WORK/ro.err" || fail "layerfs $verb did not say it read a read-only Store: $(cat "$WORK/ro.err")"
done
# The live Workspace too: status, read-file and list-dir open it over the read-only Store, in
# memory, and show the uncommitted file.
lfs status main >"$WORK/ro.out" 2>"$WORK/ro.err" || fail "status on a full disk without a daemon: $(cat "$WORK/ro.err")"
grep -q "opened read-only" "$WORK/ro.err" || fail "status did not say it read a read-only Store: $(cat "$WORK/ro.err")"
grep -qx $'A\tunsaved' "$WORK/ro.out" || fail "status on a full disk lacks the uncommitted file: $(cat "$WORK/ro.out")"
[ -z "$(grep -vx $'A\tunsaved' "$WORK/ro.out" | grep -vx $'A\tpoke')" ] || fail "status on a full disk: $(cat "$WORK/ro.out")"
lfs read-file main unsaved >"$WORK/ro.out" 2>"$WORK/ro.err" || fail "read-file on a full disk: $(cat "$WORK/ro.err")"
cmp "$WORK/ro.out" "$WORK/unsaved" || fail "read-file on a full disk read other bytes"
lfs list-dir main >"$WORK/ro.out" 2>"$WORK/ro.err" || fail "list-dir on a full disk: $(cat "$WORK/ro.err")"
grep -q " 4000000 unsaved$" "$WORK/ro.out" || fail "list-dir on a full disk: $(cat "$WORK/ro.out")"
lfs export "$c3" "$WORK/export" 2>/dev/null || fail "export on a full disk"
cmp "$WORK/export/keep/blob" "$WORK/blob" || fail "exported file differs"
[ "$(listing)" = "$before_ro" ] || fail "read-only verbs changed the Store's files: $(diff <(echo "$before_ro") <(listing))"
expect_fail fork nope main
grep -qi "read-only\|space" "$WORK/stderr" || fail "fork on a full disk: $(cat "$WORK/stderr")"
expect_fail write-file main nope --content x
grep -qi "read-only\|space" "$WORK/stderr" || fail "write-file on a full disk: $(cat "$WORK/stderr")"
# Their failed writable opens leave nothing behind (RocksDB began a WAL and a MANIFEST).
[ "$(listing)" = "$before_ro" ] || fail "failed writable verbs changed the Store's files: $(diff <(echo "$before_ro") <(listing))"

[ -f "$LAYERFS_STORE/reserve" ] || fail "read-only verbs released the reserve"
# A mount on the full disk starts (the reserve gives the database room to open), and deleting
# through it frees space.
t0=$(now_ms)
mnt main "$M" >/dev/null || fail "mount on a full disk"
echo "FIGURE mount_on_full_disk_ms=$(($(now_ms) - t0))"
cmp "$M/unsaved" "$WORK/unsaved" || fail "uncommitted data lost across a close on a full disk"
rm "$M/victim" "$M/unsaved"
rm "$DISK/filler"
c4=$(lfs commit "$M" -m final)
is_id "$c4" || fail "commit after the full-disk close"
lfs cat "$c4:back" >/dev/null || fail "cat after everything"
lfs verify >"$WORK/verify.out" || fail "final verify: $(cat "$WORK/verify.out")"
grep -q "0 problems" "$WORK/verify.out" || fail "final verify found problems"
alive || fail "daemon gone at the end"
echo "FIGURE reopens=$(grep -c 'reopened after the failure' "$LAYERFS_STORE/layerfsd.log" || true)"
grep -h "reopened after the failure" "$LAYERFS_STORE/layerfsd.log" | sed 's/^/FIGURE log: /' || true
echo "full_disk_test: ok"
