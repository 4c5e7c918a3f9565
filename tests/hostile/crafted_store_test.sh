#!/usr/bin/env bash
# Crafted Stores (docs/reliability.md, "Crafted Stores"): for each scenario of layerfs_craft,
# verify, log, export, gc and a real mount (find, cat, a write and a commit, umount) run under
# a memory limit (prlimit --as) and a time limit, and must:
#   - never write outside their folder: the sandbox holds only what export wrote below out/, and
#     a victim file the crafted objects point at is untouched;
#   - end (no loop) within the limit, and never die of memory: every failure is one clear
#     "layerfs: ..." line with exit 1, and the daemon is still serving after the mount's reads;
#   - keep what verify says unchanged across gc (gc must not make damage worse).
# Then a Store whose runtime files are symlinks out of it: the daemon must not write through them.
# Usage: crafted_store_test.sh LAYERFS LAYERFS_CRAFT
set -euo pipefail
LAYERFS=$(realpath "$1")
CRAFT=$(realpath "$2")
WORK=$(mktemp -d /tmp/layerfs-crafted.XXXXXX)
# Address space for every command (the daemon inherits it from `layerfs mount`): RocksDB, the
# FUSE threads and io_uring rings need ~1 GiB of it; a decoder that followed a crafted size
# would need far more.
AS_LIMIT=${LAYERFS_CRAFTED_AS:-2G}
T_LIMIT=${LAYERFS_CRAFTED_TIMEOUT:-120}
MOUNTED=()
STORES=()

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
  local rc=$? d s pid
  for d in "${MOUNTED[@]}"; do
    is_mounted "$d" && { fusermount3 -u -z "$d" 2>/dev/null || umount -l "$d" 2>/dev/null || true; }
  done
  for s in "${STORES[@]}"; do
    pid=$(cat "$s/layerfsd.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && running "$pid" && grep -q layerfsd "/proc/$pid/cmdline" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$WORK" 2>/dev/null || true
  exit "$rc"
}
trap cleanup EXIT

limited() { timeout -k 5 "$T_LIMIT" prlimit --as="$(numfmt --from=iec "$AS_LIMIT")" -- "$@"; }

# check_errors FILE: every line of stderr is a "layerfs: " line, and there is at most one.
one_line_error() {
  local f=$1
  [ "$(wc -l <"$f")" -le 1 ] || { cat "$f" >&2; fail "$2: more than one line of error"; }
  if [ -s "$f" ]; then grep -q '^layerfs: ' "$f" || { cat "$f" >&2; fail "$2: error is not a 'layerfs: ' line"; }; fi
}

# expect RC WANT WHAT [ERRFILE]: WANT is 0, 1 or "any" (0 or 1; never a crash, signal or
# timeout); on a mismatch ERRFILE (the command's stderr) is shown.
expect() {
  local rc=$1 want=$2 what=$3 err=${4:-/dev/null}
  case $want in
    any) [ "$rc" -le 1 ] || { cat "$err" >&2; fail "$what: exit $rc (a crash, a signal or the time limit)"; } ;;
    *) [ "$rc" -eq "$want" ] || { cat "$err" >&2; fail "$what: exit $rc, expected $want"; } ;;
  esac
}

# Per scenario: expected exit of verify and export (0: clean, 1: damage found and named).
declare -A VERIFY=(
  [honest]=0 [symlink-loops]=0 [link-group-symlink]=0 [workspace-loop]=0 [ws-counter-huge]=0
  [commit-count-huge]=1 [subtree-count-lies]=1 [subtree-count-overflow]=1 [wide-dag]=1 [deep-tree]=1
)
declare -A EXPORT=(
  [honest]=0 [symlink-loops]=0 [link-group-symlink]=0 [workspace-loop]=0 [ws-counter-huge]=0
)
# A root tree that cannot be read (or a Commit that cannot be numbered) fails the mount itself.
declare -A MOUNT=([commit-count-huge]=1 [link-group-dir]=1 [tree-cycle]=1)

scenarios=$("$CRAFT" --list | awk '{print $1}')
[ "$(wc -w <<<"$scenarios")" -ge 20 ] || fail "layerfs_craft lists too few scenarios"
# LAYERFS_CRAFTED_ONLY=NAME runs one scenario (and skips the symlinked-files part).
if [ -n "${LAYERFS_CRAFTED_ONLY:-}" ]; then scenarios=$LAYERFS_CRAFTED_ONLY; fi
for sc in $scenarios; do
  echo "--- $sc"
  box=$WORK/$sc
  store=$box/store
  mkdir -p "$box/sandbox"
  victim=$box/sandbox/victim
  printf 'precious\n' >"$victim"
  touch -d @1600000000 "$victim"
  STORES+=("$store")
  "$CRAFT" "$store" "$sc" "$victim" || fail "$sc: craft"

  set +e
  limited "$LAYERFS" --store "$store" verify >"$box/verify1.out" 2>"$box/verify1.err"
  rc=$?
  set -e
  expect $rc "${VERIFY[$sc]:-1}" "$sc: verify" "$box/verify1.err"
  one_line_error "$box/verify1.err" "$sc: verify"
  if [ $rc -eq 1 ]; then grep -q '^damaged: ' "$box/verify1.out" || fail "$sc: verify names nothing"; fi

  set +e
  limited "$LAYERFS" --store "$store" log main >/dev/null 2>"$box/log.err"
  rc=$?
  set -e
  expect $rc 0 "$sc: log" "$box/log.err"

  set +e
  (cd "$box/sandbox" && limited "$LAYERFS" --store "$store" export main out >/dev/null 2>"$box/export.err")
  rc=$?
  set -e
  expect $rc "${EXPORT[$sc]:-1}" "$sc: export" "$box/export.err"
  one_line_error "$box/export.err" "$sc: export"
  # Nothing outside out/: the sandbox holds the victim and out only, and the victim is intact.
  extra=$(cd "$box/sandbox" && find . -mindepth 1 -maxdepth 1 ! -name victim ! -name out)
  [ -z "$extra" ] || fail "$sc: export wrote outside its folder: $extra"
  [ "$(cat "$victim")" = precious ] && [ "$(stat -c %Y "$victim")" = 1600000000 ] || fail "$sc: victim changed"
  [ ! -e "$box/escaped" ] && [ ! -e "$WORK/escaped" ] && [ ! -e /tmp/escaped ] || fail "$sc: escaped"

  set +e
  limited "$LAYERFS" --store "$store" gc >/dev/null 2>"$box/gc.err"
  rc=$?
  limited "$LAYERFS" --store "$store" verify >"$box/verify2.out" 2>/dev/null
  set -e
  expect $rc any "$sc: gc" "$box/gc.err"
  one_line_error "$box/gc.err" "$sc: gc"
  diff "$box/verify1.out" "$box/verify2.out" >&2 || fail "$sc: verify differs after gc"

  mnt=$box/mnt
  mkdir -p "$mnt"
  MOUNTED+=("$mnt")
  set +e
  limited "$LAYERFS" --store "$store" mount main "$mnt" >/dev/null 2>"$box/mount.err"
  rc=$?
  set -e
  expect $rc "${MOUNT[$sc]:-0}" "$sc: mount" "$box/mount.err"
  one_line_error "$box/mount.err" "$sc: mount"
  [ $rc -eq 0 ] || continue
  pid=$(cat "$store/layerfsd.pid")
  # Every name, every file's bytes, every link: errors (EIO, ELOOP) are fine, hangs are not.
  timeout -k 5 "$T_LIMIT" find "$mnt" >/dev/null 2>&1 || [ $? -ne 124 ] || fail "$sc: find in the mount hung"
  while IFS= read -r -d '' f; do
    timeout -k 5 60 head -c 4M "$f" >/dev/null 2>&1 || [ $? -ne 124 ] || fail "$sc: reading $f hung"
  done < <(timeout 60 find "$mnt" -maxdepth 8 -type f -print0 2>/dev/null)
  timeout 60 ls -laR "$mnt" >/dev/null 2>&1 || true
  # No two names share an inode unless they are hard links (an inode seen more often than its
  # link count means lying counts gave two entries one number).
  dup=$(timeout 60 find "$mnt" -printf '%i %n\n' 2>/dev/null | sort | uniq -c | awk '$1 > $3 { print $2 }' | head -3 || true)
  [ -z "$dup" ] || fail "$sc: inode numbers shared by unrelated names: $dup"
  running "$pid" || fail "$sc: the daemon died while the mount was read"
  echo new >"$mnt/written-here" 2>/dev/null || true  # EIO where the root itself is damaged
  set +e
  limited "$LAYERFS" --store "$store" commit "$mnt" -m "after reading" >/dev/null 2>"$box/commit.err"
  rc=$?
  set -e
  expect $rc any "$sc: commit" "$box/commit.err"
  one_line_error "$box/commit.err" "$sc: commit"
  running "$pid" || fail "$sc: the daemon died at the commit"
  timeout 60 "$LAYERFS" --store "$store" umount "$mnt" >/dev/null || fail "$sc: umount"
  for _ in $(seq 100); do running "$pid" || break; sleep 0.1; done
  ! running "$pid" || fail "$sc: the daemon did not exit after its last mount"
  ! grep -Eiq 'terminate|sanitizer|abort' "$store/layerfsd.log" || fail "$sc: the daemon log shows a crash"
  [ "$(cat "$victim")" = precious ] && [ "$(stat -c %Y "$victim")" = 1600000000 ] || fail "$sc: victim changed"
done

if [ -n "${LAYERFS_CRAFTED_ONLY:-}" ]; then echo "crafted stores: $LAYERFS_CRAFTED_ONLY passed"; exit 0; fi
echo "--- store files that are symlinks out of the Store"
box=$WORK/symlinks
store=$box/store
mkdir -p "$box/outside/dir"
STORES+=("$store")
"$LAYERFS" init "$store" >/dev/null
for f in layerfsd.log layerfsd.pid; do
  printf 'precious\n' >"$box/outside/$f"
  ln -s "$box/outside/$f" "$store/$f"
done
ln -s "$box/outside/dir" "$store/data"
mnt=$box/mnt
mkdir -p "$mnt"
MOUNTED+=("$mnt")
set +e
"$LAYERFS" --store "$store" mount main "$mnt" 2>"$box/mount.err"
rc=$?
set -e
one_line_error "$box/mount.err" "symlinked data/: mount"
[ $rc -eq 1 ] && grep -q 'data.*symlink' "$box/mount.err" || { cat "$box/mount.err" >&2; fail "a symlinked data/ was not refused"; }
rm "$store/data"
"$LAYERFS" --store "$store" mount main "$mnt"
pid=$(cat "$store/layerfsd.pid")
head -c 3M /dev/urandom >"$mnt/blob"
"$LAYERFS" --store "$store" commit "$mnt" -m blob >/dev/null
"$LAYERFS" --store "$store" umount "$mnt"
for _ in $(seq 100); do running "$pid" || break; sleep 0.1; done
for f in layerfsd.log layerfsd.pid; do
  [ "$(cat "$box/outside/$f")" = precious ] || fail "the daemon wrote through $f"
done
[ -z "$(ls -A "$box/outside/dir")" ] || fail "the data log went outside the Store"
echo "crafted stores: all scenarios passed"
