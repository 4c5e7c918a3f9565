#!/usr/bin/env bash
# Multi-user (docs/reliability.md, "Multi-user"), run as root:
#  1. A mount with --allow-other used by two non-root users (setpriv to uids 2001 and 2002,
#     2001 also in group 3000): creation in sticky and setgid directories, ownership and modes
#     of what they create (umask 022 and 077), chmod/chown/chgrp rules, setuid and setgid bits
#     cleared by another user's write, sticky-directory unlink and rename, protected hard
#     links, xattrs, private directories. Every operation runs in the mount and in a directory on
#     ext4 beside it, and the results (errno, owner, group, mode) must be the same.
#  2. Without --allow-other, the other users cannot enter the mount at all.
#  3. The control socket: another user gets one clear refusal, whether the Store's directory
#     stops them or the daemon does (socket opened to them on purpose).
#  4. Nothing the Store, the daemon or the data log creates is readable by others, even under
#     umask 000; a Store whose owner opens its directory to a group gets group-readable files.
# Usage: multi_user_test.sh LAYERFS
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "multi_user_test: needs root (setpriv to other uids)" >&2; exit 1; }
LAYERFS=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/layerfs-users.XXXXXX)
chmod 0755 "$WORK"
export LAYERFS_STORE=$WORK/store
MOUNTED=()
# Python for the other users: a per-user interpreter (pyenv) in /root would be out of their reach.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
U1=(setpriv --reuid=2001 --regid=2001 --groups=2001,3000 --)
U2=(setpriv --reuid=2002 --regid=2002 --groups=2002 --)

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
running() {
  local st
  st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  st=${st##*) }
  [ "${st%% *}" != Z ]
}
is_mounted() { awk -v d="$(realpath -m "$1")" '$2 == d { f = 1 } END { exit !f }' /proc/mounts; }
cleanup() {
  local rc=$? d pid s
  for d in "${MOUNTED[@]}"; do
    if is_mounted "$d"; then timeout 20 "$LAYERFS" umount "$d" >/dev/null 2>&1 || fusermount3 -u -z "$d" 2>/dev/null || true; fi
  done
  for s in "$WORK/store" "$WORK/store2"; do
    pid=$(cat "$s/layerfsd.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && running "$pid" && grep -q layerfsd "/proc/$pid/cmdline" 2>/dev/null; then kill -KILL "$pid" || true; fi
  done
  rm -rf "$WORK" 2>/dev/null || true
  exit "$rc"
}
trap cleanup EXIT
mnt() {
  mkdir -p "$2"
  MOUNTED+=("$(realpath "$2")")
  "$LAYERFS" mount "$@" >/dev/null
}

# ---- 1. parity of a shared mount with ext4, as other users
"$LAYERFS" init "$LAYERFS_STORE" >/dev/null
mnt main "$WORK/mnt" --allow-other
mkdir "$WORK/ref"
grep -E " $WORK/mnt " /proc/mounts | grep -q nosuid || fail "the mount is not nosuid"
grep -E " $WORK/mnt " /proc/mounts | grep -q nodev || fail "the mount is not nodev"
for root in "$WORK/mnt" "$WORK/ref"; do
  out=$WORK/$(basename "$root").txt
  "$PY" "$here/multi_user_ops.py" "$root" root >"$out"
  for phase in u1 u2 u1-again; do
    echo "-- $phase" >>"$out"
    case $phase in
      u2) "${U2[@]}" "$PY" "$here/multi_user_ops.py" "$root" $phase >>"$out" ;;
      *) "${U1[@]}" "$PY" "$here/multi_user_ops.py" "$root" $phase >>"$out" ;;
    esac
  done
done
if ! diff -u "$WORK/ref.txt" "$WORK/mnt.txt" >&2; then fail "the shared mount differs from ext4 (- ext4, + mount)"; fi
checks=$(grep -c ': ' "$WORK/ref.txt")
denied=$(grep -c ': ERR ' "$WORK/ref.txt" || true)
# The committed tree keeps the users' ownership and modes.
"$LAYERFS" commit "$WORK/mnt" -m "users" >/dev/null
"$LAYERFS" export main "$WORK/exported" >/dev/null
[ "$(stat -c '%u %g %a' "$WORK/exported/sgid/sub")" = "$(stat -c '%u %g %a' "$WORK/ref/sgid/sub")" ] \
  || fail "export lost the owner or mode of sgid/sub"
[ "$(stat -c '%u %g %a' "$WORK/exported/shared/w1")" = "$(stat -c '%u %g %a' "$WORK/ref/shared/w1")" ] \
  || fail "export lost the owner or mode of shared/w1"

# ---- 2. without --allow-other, another user cannot enter the mount
mnt main "$WORK/own" --read-only
if "${U1[@]}" ls "$WORK/own" >/dev/null 2>&1; then fail "another user entered a mount without --allow-other"; fi

# ---- 3. the control socket refuses other users
set +e
msg=$("${U1[@]}" "$LAYERFS" --store "$LAYERFS_STORE" log 2>&1 >/dev/null)
rc=$?
set -e
[ $rc -eq 1 ] && [ "$(wc -l <<<"$msg")" = 1 ] && grep -q '^layerfs: .*another user' <<<"$msg" \
  || fail "another user's CLI: exit $rc, '$msg'"
# Open the way on purpose (directory searchable, socket world-writable): the daemon itself refuses.
chmod 0711 "$LAYERFS_STORE"
chmod 0666 "$LAYERFS_STORE/control.sock"
set +e
msg=$("${U1[@]}" "$LAYERFS" --store "$LAYERFS_STORE" log 2>&1 >/dev/null)
rc=$?
set -e
[ $rc -eq 1 ] && [ "$(wc -l <<<"$msg")" = 1 ] && grep -q '^layerfs: .*uid 2001 is not the owner' <<<"$msg" \
  || fail "the daemon did not refuse uid 2001 clearly: exit $rc, '$msg'"
chmod 0600 "$LAYERFS_STORE/control.sock"
chmod 0700 "$LAYERFS_STORE"
for d in "${MOUNTED[@]}"; do is_mounted "$d" && "$LAYERFS" umount "$d" >/dev/null; done

# ---- 4. modes of everything a Store holds, under umask 000 (in a subshell: its mount is
# registered here, for the cleanup)
mkdir -p "$WORK/m2"
MOUNTED+=("$WORK/m2")
(
  umask 000
  s=$WORK/store2
  "$LAYERFS" init "$s" >/dev/null
  "$LAYERFS" --store "$s" mount main "$WORK/m2" >/dev/null
  head -c 5M /dev/urandom >"$WORK/m2/big"   # whole blocks: the data log
  echo small >"$WORK/m2/small"
  "$LAYERFS" --store "$s" commit "$WORK/m2" -m one >/dev/null
  open=$(find "$s" -perm /077 -printf '%m %p\n')
  [ -z "$open" ] || fail "readable by others while mounted: $open"
  "$LAYERFS" --store "$s" umount "$WORK/m2" >/dev/null
  for _ in $(seq 100); do [ -e "$s/layerfsd.pid" ] || break; sleep 0.1; done
  "$LAYERFS" --store "$s" gc >/dev/null
  "$LAYERFS" --store "$s" verify >/dev/null
  open=$(find "$s" -perm /077 -printf '%m %p\n')
  [ -z "$open" ] || fail "readable by others: $open"
  [ "$(stat -c %a "$s")" = 700 ] || fail "the Store directory is $(stat -c %a "$s")"
  # Asked: the owner opens the Store to a group; files made from then on are group-readable,
  # never world-writable.
  chmod 0750 "$s"
  "$LAYERFS" --store "$s" mount main "$WORK/m2" >/dev/null
  echo again >"$WORK/m2/again"
  "$LAYERFS" --store "$s" commit "$WORK/m2" -m two >/dev/null
  [ -n "$(find "$s" -newer "$s/LAYERFS" -type f -perm -040 -print -quit)" ] || fail "a shared Store made no group-readable file"
  "$LAYERFS" --store "$s" umount "$WORK/m2" >/dev/null
  [ -z "$(find "$s" -perm -002 -print -quit)" ] || fail "a world-writable file in the Store"
)
# ---- 5. a user's own Store: its Workspace's root is theirs (it was uid 0's: nothing could be
# created at the top of their mount), or, where this host does not let the user mount, the
# refusal is one line that says why (fusermount3's or libfuse's own reason).
u=$WORK/user1
mkdir -p "$u/m"
chown -R 2001:2001 "$u"
"${U1[@]}" "$LAYERFS" init "$u/s" >/dev/null
set +e
msg=$(cd "$u" && "${U1[@]}" "$LAYERFS" --store "$u/s" mount main "$u/m" 2>&1)
rc=$?
set -e
if [ $rc -eq 0 ]; then
  MOUNTED+=("$u/m")
  owner=$("${U1[@]}" stat -c %u:%g "$u/m")
  [ "$owner" = 2001:2001 ] || fail "the root of a user's mount is $owner"
  "${U1[@]}" touch "$u/m/top" || fail "the user cannot create a file at the top of their mount"
  "${U1[@]}" "$LAYERFS" --store "$u/s" umount "$u/m" >/dev/null
else
  [ $rc -eq 1 ] && [ "$(wc -l <<<"$msg")" = 1 ] &&
    grep -Eq "^layerfs: cannot mount $u/m: .*(fusermount3|/dev/fuse)" <<<"$msg" ||
    fail "a user's refused mount: exit $rc, '$msg'"
  echo "multi-user: a user cannot mount on this host: $msg"
fi
for _ in $(seq 100); do [ -e "$u/s/layerfsd.pid" ] || break; sleep 0.1; done
echo "multi-user: $checks operations by two users matched ext4 ($denied of them refused alike); socket and modes checked"
