#!/usr/bin/env bash
# Every verb's --help exits 0 and prints usage.
source "$(dirname "$0")/lib.bash" "$1"
out=$(lfs --help) || fail "layerfs --help"
for verb in init import fork branch stats verify gc log show diff cat export; do
  grep -q "$verb" <<<"$out" || fail "top-level help does not list $verb"
  h=$(lfs "$verb" --help) || fail "layerfs $verb --help exited non-zero"
  grep -qi "usage" <<<"$h" || fail "layerfs $verb --help printed no usage"
done
# No verb, or an unknown one, is a usage error.
expect_fail
expect_fail frobnicate
echo ok
