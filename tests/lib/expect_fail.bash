# Sourced by the shell test suites; uses $LAYERFS, $WORK and fail() from the sourcing lib.
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
