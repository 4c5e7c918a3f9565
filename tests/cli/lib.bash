# Shared helpers for the CLI tests; sourced, not run (it has no test of its own).
# Usage in a test: source "$(dirname "$0")/lib.bash" "$1"
set -euo pipefail
LAYERFS=$(realpath "$1")
WORK=$(mktemp -d)
trap 'chmod -R u+rwx "$WORK" 2>/dev/null || true; rm -rf "$WORK"' EXIT
export LAYERFS_STORE=$WORK/store

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

lfs() { "$LAYERFS" "$@"; }

# expect_fail CMD...: the command exits non-zero and prints exactly one stderr line that starts
# with "layerfs: ", and nothing on stdout.
expect_fail() {
  local out err rc=0
  out=$("$LAYERFS" "$@" 2>"$WORK/stderr") || rc=$?
  err=$(cat "$WORK/stderr")
  [ "$rc" -ne 0 ] || fail "expected failure: layerfs $*"
  [ "$(wc -l <"$WORK/stderr")" -eq 1 ] || fail "expected one stderr line from layerfs $*, got: $err"
  case "$err" in layerfs:\ *) ;; *) fail "stderr of layerfs $* does not start with 'layerfs: ': $err" ;; esac
  [ -z "$out" ] || fail "unexpected stdout from failing layerfs $*: $out"
}

# The observable state of the Store: history of every branch and the branch list.
store_state() {
  lfs branch
  lfs branch | while read -r name _; do lfs log --json "$name"; done
}
