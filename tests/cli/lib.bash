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

# applies_as_git PATCH FROM TO WHAT: `git apply` of PATCH on an export of Commit FROM gives an
# export of Commit TO exactly; fails naming WHAT otherwise.
applies_as_git() {
  local dir
  dir=$(mktemp -d "$WORK/apply.XXXXXX")
  lfs export "$2" "$dir/tree" >/dev/null
  lfs export "$3" "$dir/want" >/dev/null
  (cd "$dir/tree" && git init -q . && git apply --whitespace=nowarn "$1" && rm -rf .git) ||
    fail "git apply of $4: $(cat "$1")"
  diff -r --no-dereference "$dir/tree" "$dir/want" >/dev/null ||
    fail "git apply of $4: $(diff -r --no-dereference "$dir/tree" "$dir/want")"
}
