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

# expect_fail CMD...: shared with the other shell suites.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/expect_fail.bash"

# The observable state of the Store: history of every branch and the branch list.
store_state() {
  lfs branch
  lfs branch | while read -r name _; do lfs log --json "$name"; done
}
