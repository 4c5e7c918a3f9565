#!/usr/bin/env bash
# Commit speed on a big tree: 100,000 small files created through the mount and committed,
# then one file changed and committed again. Prints the times; asserts only correctness.
source "$(dirname "$0")/lib.bash" "$1"
N=${LAYERFS_E2E_FILES:-100000}
M=$WORK/m
lfs init "$LAYERFS_STORE" >/dev/null
mnt main "$M" >/dev/null
t0=$(date +%s.%N)
python3 - "$M" "$N" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
per = 1000
for i in range(n):
    d = os.path.join(root, "d%03d" % (i // per))
    if i % per == 0:
        os.mkdir(d)
    with open(os.path.join(d, "f%05d" % i), "w") as f:
        f.write("file %d\n" % i)
PY
t1=$(date +%s.%N)
c1=$(lfs commit "$M" -m "$N files")
t2=$(date +%s.%N)
printf 'changed\n' >"$M/d042/f42042"
t3=$(date +%s.%N)
c2=$(lfs commit "$M" -m "one change")
t4=$(date +%s.%N)
lfs show --json "$c2" | python3 -c "
import json,sys; j=json.load(sys.stdin)
assert j['parents']==['$c1'], j
assert [c['path'] for c in j['changes']]==['d042/f42042'], j['changes']" || fail "second commit is not one change"
[ "$(lfs cat "$c2:d042/f42042")" = changed ] || fail "changed file"
[ "$(lfs cat "$c2:d099/f99999")" = "file 99999" ] || [ "$N" -ne 100000 ] || fail "unchanged file"
lfs log --json -n 1 main | python3 -c "import json,sys; assert json.load(sys.stdin)[0]['files']==$N+$N//1000" ||
  fail "file count of the commit"
# A fresh fork of the big tree: first look at its root (materialises the root).
mkdir -p "$WORK/f"
lfs fork big main >/dev/null
t5=$(date +%s.%N)
mnt big "$WORK/f" >/dev/null
ls "$WORK/f" >/dev/null
t6=$(date +%s.%N)
[ "$(cat "$WORK/f/d042/f42042")" = changed ] || fail "fork of the big tree"
lfs umount "$WORK/f"
lfs umount "$M"
printf 'fresh fork of the big tree: mount + ls %.3f s\n' "$(awk -v a="$t5" -v b="$t6" 'BEGIN{print b-a}')"
awk -v n="$N" -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v e="$t4" 'BEGIN {
  printf "commit speed: create %d files via the mount %.1f s; first commit %.2f s; one-change commit %.3f s\n", n, b-a, c-b, e-d }'
