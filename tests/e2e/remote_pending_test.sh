#!/usr/bin/env bash
# Push right after commits in a mount, while their content is still pending (stored raw, not yet
# encoded by the background encoder; docs/design.md, "Commits in the background"): the push
# sends encoded records only, and a full clone and a lazy clone elsewhere read every Commit byte
# for byte. Twice: through the daemon with its encoder busy (the usual case), and by the CLI
# after the daemon was killed with the backlog left pending (no encoder runs at all: every pending
# record the push reaches is encoded by the push itself).
source "$(dirname "$0")/lib.bash" "$1"
source "$(dirname "$0")/remote_lib.bash"
URL=$(new_remote_url pending)
M=$WORK/m B=$WORK/B C=$WORK/C
stop_daemon_of() {
  local pid
  pid=$(cat "$1/layerfsd.pid" 2>/dev/null || true)
  [ -n "$pid" ] && running "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do running "$pid" || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}
cleanup_hosts() {
  local d
  for d in "${MOUNTED[@]}"; do is_mounted "$d" && timeout 10 "$LAYERFS" umount "$d" >/dev/null 2>&1 || true; done
  stop_daemon_of "$C"
}
trap 'rc=$?; cleanup_hosts; (exit $rc); cleanup' EXIT

lfs init "$LAYERFS_STORE" >/dev/null
lfs remote add origin "$URL"
# Level-19 encoding of large inputs keeps the encoder busy well after each commit returns.
export LAYERFS_TUNING="level=19,large_full_level=19"
python3 - "$WORK/gen" <<'PY'
import os, random, sys
out = sys.argv[1]
rng = random.Random(11)
words = [''.join(rng.choice('abcdefghij') for _ in range(rng.randint(2, 9))) for _ in range(3000)]
def text(n):
    return (' '.join(rng.choice(words) for _ in range(n // 5)) + '\n').encode()[:n]
base = {f"f{i}.txt": bytearray(text(rng.randint(2000, 60000))) for i in range(16)}
base["big.txt"] = bytearray(text(3_000_000))   # chunked (>= 2 MiB)
for step in range(3):
    d = os.path.join(out, str(step))
    os.makedirs(d)
    for name, data in base.items():
        for _ in range(3):
            at = rng.randrange(len(data))
            data[at:at + 20] = text(20)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
PY
commit_step() {
  cp "$WORK/gen/$1/"* "$M/"
  lfs commit "$M" -m "step $1"
}
check_clone() {  # check_clone STORE STEP COMMIT
  rm -rf "$WORK/check"
  LAYERFS_STORE=$1 lfs export "$3" "$WORK/check" >/dev/null || fail "export of step $2 from $1"
  diff -r "$WORK/check" "$WORK/gen/$2" >&2 || fail "step $2 differs in $1"
}

# --- Through the daemon: two commits (the second's records hint at the first's), then a push at once.
mnt main "$M" >/dev/null
c0=$(commit_step 0)
c1=$(commit_step 1)
is_id "$c0" && is_id "$c1" || fail "commits printed '$c0' '$c1'"
lfs push origin main --json >"$WORK/push1.json" || fail "push under a busy encoder"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['refs'][0]['status'] == 'created', j" \
  "$WORK/push1.json" || fail "push: $(cat "$WORK/push1.json")"
lfs clone "$URL" "$B" >/dev/null
check_clone "$B" 0 "$c0"
check_clone "$B" 1 "$c1"
v=$(LAYERFS_STORE=$B lfs verify --json)
python3 -c "import json,sys; j=json.loads(sys.argv[1]); assert j['ok'] and j['pending'] == 0, j" "$v" ||
  fail "the clone received pending records or damage: $v"

# --- No encoder at all: a commit whose content stays pending (the daemon is killed before its
# encoder gets through it), pushed by the CLI.
c2=$(commit_step 2)
is_id "$c2" || fail "commit printed '$c2'"
pid=$(daemon_pid)
kill -KILL "$pid"
for _ in $(seq 100); do running "$pid" || break; sleep 0.05; done
! running "$pid" || fail "daemon $pid survived SIGKILL"
force_unmount "$M"
v=$(lfs verify --json)
pending=$(python3 -c "import json,sys; j=json.loads(sys.argv[1]); assert j['ok'], j['problems']; print(j['pending'])" "$v") ||
  fail "verify after the kill: $v"
echo "pushing with $pending objects pending"
[ "$pending" -gt 0 ] || fail "the encoder had finished before the kill: nothing tested"
lfs push origin main >/dev/null || fail "push of pending records by the CLI"
# The pushing Store still reads the same, and its leftover queue settles without complaint.
rm -rf "$WORK/check"
lfs export "$c2" "$WORK/check" >/dev/null && diff -r "$WORK/check" "$WORK/gen/2" >&2 || fail "the pusher's step 2"
# The full clone fetches it; a lazy clone mounts it and reads it on demand.
LAYERFS_STORE=$B lfs pull origin main >/dev/null || fail "pull of step 2"
check_clone "$B" 2 "$c2"
v=$(LAYERFS_STORE=$B lfs verify --json)
python3 -c "import json,sys; j=json.loads(sys.argv[1]); assert j['ok'] and j['pending'] == 0, j" "$v" ||
  fail "the clone's verify after step 2: $v"
LAYERFS_STORE=$C lfs clone --lazy "$URL" "$C" >/dev/null
LAYERFS_STORE=$C mnt main "$WORK/mC" --read-only >/dev/null
diff -r "$WORK/mC" "$WORK/gen/2" >&2 || fail "the lazy clone's mount differs from step 2"
LAYERFS_STORE=$C lfs umount "$WORK/mC"
s=$(lfs stats --json)
python3 -c "import json,sys; j=json.loads(sys.argv[1]); assert j['pending_objects'] == 0, j" "$s" || fail "stats: $s"
lfs verify >/dev/null || fail "the pusher's final verify"
echo "remote pending ok ($REMOTE_KIND): pushed with $pending objects pending"
