# Shared helpers for the daemon end-to-end tests; sourced, not run (it has no test of its own).
# Usage in a test: source "$(dirname "$0")/lib.bash" "$1"
# Every mount made through mnt() is unmounted by the EXIT trap, and the store's daemon is
# killed, so nothing is left mounted even when a test fails.
set -euo pipefail
LAYERFS=$(realpath "$1")
WORK=$(mktemp -d /tmp/layerfs-e2e.XXXXXX)
export LAYERFS_STORE=$WORK/store
MOUNTED=()
# Commands the EXIT trap runs once mounts and the daemon are gone, before $WORK is removed (a
# test's loop-device filesystem, say); each may fail without stopping the others.
CLEANUP_HOOKS=()

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

lfs() { "$LAYERFS" "$@"; }

daemon_pid() { cat "$LAYERFS_STORE/layerfsd.pid" 2>/dev/null || true; }

# running PID: PID exists and has not exited. An exited daemon can stay a zombie until init
# reaps it (seconds, in some containers), so kill -0 alone would wait for the reaper.
running() {
  local st
  st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  st=${st##*) }
  [ "${st%% *}" != Z ]
}

# is_mounted DIR: DIR is a mountpoint in /proc/mounts.
is_mounted() {
  local d
  d=$(realpath -m "$1")
  awk -v d="$d" '$2 == d { found = 1 } END { exit !found }' /proc/mounts
}

# force_unmount DIR: lazily detaches DIR if anything is still mounted there.
force_unmount() {
  local i
  for i in 1 2 3; do
    is_mounted "$1" || return 0
    fusermount3 -u -z "$1" 2>/dev/null || umount -l "$1" 2>/dev/null || true
  done
}

# mnt REF DIR [ARGS...]: mounts REF at DIR (creating DIR) and records it for cleanup.
mnt() {
  mkdir -p "$2"
  MOUNTED+=("$(realpath "$2")")
  lfs mount "$@"
}

cleanup() {
  local rc=$? d pid
  for d in "${MOUNTED[@]}"; do
    if is_mounted "$d"; then timeout 10 "$LAYERFS" umount "$d" >/dev/null 2>&1 || true; fi
  done
  for d in "${MOUNTED[@]}"; do force_unmount "$d"; done
  pid=$(daemon_pid)
  if [ -n "$pid" ] && running "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do running "$pid" || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  for d in "${MOUNTED[@]}"; do force_unmount "$d"; done
  if [ "$rc" -ne 0 ] && [ -f "$LAYERFS_STORE/layerfsd.log" ]; then
    echo "--- tail of layerfsd.log" >&2
    tail -n 30 "$LAYERFS_STORE/layerfsd.log" >&2 || true
  fi
  for d in "${CLEANUP_HOOKS[@]}"; do eval "$d" || true; done
  rm -rf "$WORK" 2>/dev/null || true
  exit "$rc"
}
trap cleanup EXIT

# expect_fail CMD...: shared with the other shell suites.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/expect_fail.bash"

is_id() { [[ "$1" =~ ^[0-9a-f]{32}$ ]]; }

# wait_daemon_gone [SECONDS]: the daemon exits by itself (its socket disappears).
wait_daemon_gone() {
  local n=$((${1:-10} * 10)) pid
  pid=$(daemon_pid)
  for _ in $(seq "$n"); do
    if [ ! -e "$LAYERFS_STORE/control.sock" ] && { [ -z "$pid" ] || ! running "$pid"; }; then return 0; fi
    sleep 0.1
  done
  fail "daemon still running after ${1:-10}s"
}

# tree_listing DIR: one line per entry: path, type, mode, size (dirs: no size), link target,
# user xattrs; sorted. Comparing listings of two trees compares their metadata.
tree_listing() {
  (cd "$1" && find . -mindepth 1 -print0 | sort -z | while IFS= read -r -d '' p; do
    local t x
    t=$(stat -c %F "$p")
    x=$(getfattr --absolute-names -d -m '^user\.' "$p" 2>/dev/null | grep -v '^#' | grep -v '^$' | tr '\n' ' ' || true)
    case "$t" in
      directory) printf '%s dir %s %s\n' "$p" "$(stat -c %a "$p")" "$x" ;;
      "symbolic link") printf '%s link -> %s\n' "$p" "$(readlink "$p")" ;;
      *) printf '%s %s %s %s %s\n' "$p" "$t" "$(stat -c %a "$p")" "$(stat -c %s "$p")" "$x" ;;
    esac
  done)
}

# same_tree A B: content (diff -r, symlinks not followed) and metadata listings are equal.
same_tree() {
  diff -r --no-dereference "$1" "$2" >&2 || fail "trees differ: $1 vs $2"
  diff <(tree_listing "$1") <(tree_listing "$2") >&2 || fail "tree metadata differs: $1 vs $2"
}

# inode_of PATH
inode_of() { stat -c %i "$1"; }
