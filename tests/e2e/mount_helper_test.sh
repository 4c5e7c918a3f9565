#!/usr/bin/env bash
# mount(8) and fstab: mount.fuse3 runs `layerfs STORE:REF DIR -o OPTS`; plain umount(8) ends the
# mount and the daemon. An installed layerfs is found as type fuse.layerfs; this build is named
# by path with the helper's PROGRAM#SOURCE form (type fuse), which reaches the same code: mount(8)
# runs helpers with a fixed PATH.
source "$(dirname "$0")/lib.bash" "$1"
command -v mount.fuse3 >/dev/null || fail "mount.fuse3 is missing (Debian package fuse3)"
SRC="$LAYERFS#$LAYERFS_STORE"
M=$WORK/m
mkdir -p "$M"
MOUNTED+=("$(realpath "$M")")
lfs init "$LAYERFS_STORE" >/dev/null

mount -t fuse "$SRC:main" "$M" || fail "mount -t fuse $SRC:main failed"
is_mounted "$M" || fail "not mounted after mount(8)"
printf 'through mount(8)\n' >"$M/f"
c1=$(lfs commit "$M" -m helper)
is_id "$c1" || fail "commit printed '$c1'"
umount "$M" || fail "umount failed"
is_mounted "$M" && fail "still mounted after umount"
wait_daemon_gone 10

# An fstab entry: read-only, with options mount and FUSE own.
printf '%s %s fuse ro,noauto,nodev,x-test=1 0 0\n' "$SRC:main" "$M" >"$WORK/fstab"
mount -T "$WORK/fstab" "$M" || fail "mount from an fstab entry failed"
[ "$(cat "$M/f")" = "through mount(8)" ] || fail "fstab mount shows '$(cat "$M/f")'"
if (printf x >"$M/g") 2>"$WORK/err"; then fail "wrote to a read-only fstab mount"; fi
grep -q "Read-only file system" "$WORK/err" || fail "read-only write failed with: $(cat "$WORK/err")"
umount "$M" || fail "umount of the fstab mount failed"
wait_daemon_gone 10

# A ref the Store does not have, and an option layerfs does not know: mount fails, nothing mounted.
if mount -t fuse "$SRC:nosuchbranch" "$M" 2>"$WORK/err"; then fail "mounted a missing ref"; fi
is_mounted "$M" && fail "a failed mount left a mount"
if mount -t fuse -o bogus_option "$SRC:main" "$M" 2>"$WORK/err"; then
  fail "mounted with an unknown option"
fi
grep -q "bogus_option" "$WORK/err" || fail "unknown option error does not name it: $(cat "$WORK/err")"
is_mounted "$M" && fail "a refused option left a mount"
echo "mount helper: ok"
