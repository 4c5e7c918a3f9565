#!/usr/bin/env bash
# Commits return before their content is encoded (docs/design.md, "Commits in the background").
# The daemon is killed with SIGKILL while the background encoder is working through a backlog:
# every Commit a `layerfs commit` reported reads back exactly, verify passes with objects still
# pending, a fork and an export of a pending Commit are exact, and what is left is encoded by the
# next daemon or by stats (nothing pending, every chain within the policy), after which all
# reads the same.
source "$(dirname "$0")/lib.bash" "$1"
M=$WORK/m
lfs init "$LAYERFS_STORE" >/dev/null
# Level-19 encoding of large inputs makes the backlog slow enough to be killed in the middle.
export LAYERFS_TUNING="level=19,large_full_level=19"
mnt main "$M" >/dev/null
mkdir -p "$WORK/expect"
commits=()
python3 - "$WORK/gen" <<'PY'
import os, random, sys
out = sys.argv[1]
os.makedirs(out)
rng = random.Random(7)
words = [''.join(rng.choice('abcdefghij') for _ in range(rng.randint(2, 9))) for _ in range(3000)]
def text(n):
    return (' '.join(rng.choice(words) for _ in range(n // 5)) + '\n').encode()[:n]
base = {f"f{i}.txt": bytearray(text(rng.randint(2000, 60000))) for i in range(20)}
base["big.txt"] = bytearray(text(3_000_000))   # chunked (>= 2 MiB)
for step in range(8):
    d = os.path.join(out, str(step))
    os.makedirs(d)
    for name, data in base.items():
        for _ in range(3):
            at = rng.randrange(len(data))
            data[at:at + 20] = text(20)
        if step % 3 == 2:
            data += text(5000)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
PY
for step in $(seq 0 7); do
  cp "$WORK/gen/$step/"* "$M/"
  c=$(lfs commit "$M" -m "step $step")
  is_id "$c" || fail "commit printed '$c'"
  commits+=("$c")
done
pid=$(daemon_pid)
kill -KILL "$pid"
for _ in $(seq 100); do running "$pid" || break; sleep 0.05; done
! running "$pid" || fail "daemon $pid survived SIGKILL"
force_unmount "$M"

# No daemon: a CLI verify opens the Store and encodes nothing.
v=$(lfs verify --json)
pending=$(python3 -c "import json,sys; j=json.loads(sys.argv[1]); assert j['ok'], j['problems']; print(j['pending'])" "$v") ||
  fail "verify after the kill: $v"
echo "killed with $pending objects pending"
[ "$pending" -gt 0 ] || fail "the encoder had finished before the kill: nothing tested"
# Every Commit exported whole and compared with what was committed; one file through cat too.
check_all() {
  local i
  for i in $(seq 0 7); do
    rm -rf "$WORK/check"
    lfs export "${commits[$i]}" "$WORK/check" >/dev/null || fail "$1: export of step $i"
    diff -r "$WORK/check" "$WORK/gen/$i" >&2 || fail "$1: step $i differs"
  done
  lfs cat "${commits[7]}:big.txt" | cmp -s - "$WORK/gen/7/big.txt" || fail "$1: cat of big.txt differs"
}
check_all "pending"
[ "$(lfs log --json main | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 9 ] || fail "log length"
# The encoder killed again at random points of its work: each time every Commit reads back
# exactly and verify passes, whatever is pending or final.
for round in 1 2 3; do
  mnt main "$M" >/dev/null   # a daemon: its encoder takes up the queue
  sleep "$(python3 -c "import random; print(round(random.uniform(0.2, 1.5), 2))")"
  pid=$(daemon_pid)
  kill -KILL "$pid"
  for _ in $(seq 100); do running "$pid" || break; sleep 0.05; done
  ! running "$pid" || fail "daemon $pid survived SIGKILL (round $round)"
  force_unmount "$M"
  v=$(lfs verify --json)
  p=$(python3 -c "import json,sys; j=json.loads(sys.argv[1]); assert j['ok'], j['problems']; print(j['pending'])" "$v") ||
    fail "verify after kill $round: $v"
  echo "kill $round: $p objects pending"
  check_all "after kill $round"
done
# A fork of a Commit pending at the first kill, mounted (its daemon encodes meanwhile).
lfs fork old "${commits[3]}" >/dev/null
mnt old "$WORK/old" >/dev/null
for f in "$WORK/gen/3/"*; do cmp -s "$WORK/old/$(basename "$f")" "$f" || fail "fork of step 3: $(basename "$f")"; done
lfs export "${commits[5]}" "$WORK/exp5" >/dev/null
diff -r "$WORK/exp5" "$WORK/gen/5" >&2 || fail "export of step 5"
lfs umount "$WORK/old"
wait_daemon_gone 120
# stats encodes what the daemons left pending first (no daemon runs: on this thread).
s=$(lfs stats --json)
python3 -c "
import json,sys; j=json.loads(sys.argv[1])
assert j['pending_objects'] == 0, j
assert j['max_chain_depth']['whole'] <= 16 and j['max_chain_depth']['chunk'] <= 8 and j['max_chain_depth']['metadata'] <= 8, j
assert j['payload_bytes'] * 3 < j['logical_bytes'], j  # encoded (deltas), not the raw content
" "$s" || fail "stats after the restart: $s"
v=$(lfs verify --json)
python3 -c "import json,sys; j=json.loads(sys.argv[1]); assert j['ok'] and j['pending'] == 0, j" "$v" ||
  fail "verify after stats: $v"
check_all "encoded"
lfs gc >/dev/null
check_all "after gc"
lfs verify >/dev/null || fail "final verify"
echo "background encoding crash ok"
