#!/usr/bin/env bash
# A remote that fails under live mounts: it goes away in the middle of a push and of a lazy read
# (REMOTE_KIND=s3: radosgw killed; rados: the OSD killed), its main moves underneath a host (a
# refused push, a forced update seen by fetch, a pull that merges), a ref is damaged, and it holds
# a damaged pack. Each gives one clear error, nothing is lost, and once the remote is back
# everything works, the push sending only what had not arrived.
source "$(dirname "$0")/lib.bash" "$1"
source "$(dirname "$0")/remote_lib.bash"
export LAYERFS_REMOTE_TIMEOUT=5
A=$WORK/store B=$WORK/B C=$WORK/C
a() { LAYERFS_STORE=$A lfs "$@"; }
b() { LAYERFS_STORE=$B lfs "$@"; }
c() { LAYERFS_STORE=$C lfs "$@"; }
stop_daemon_of() {
  local pid
  pid=$(cat "$1/layerfsd.pid" 2>/dev/null || true)
  [ -n "$pid" ] && running "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do running "$pid" || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}
CLUSTER_DIR=
DOWN=
outage() {  # outage down|up: the remote's server goes away or comes back
  [ "$REMOTE_KIND" != file ] || return 0
  CLUSTER_DIR=${CLUSTER_DIR:-$LAYERFS_TEST_CEPH_DIR}
  local what=rgw
  [ "$REMOTE_KIND" = rados ] && what=osd
  if [ "$1" = down ]; then
    "$(dirname "$0")/../remote/ceph-cluster" kill "$CLUSTER_DIR" "$what" >/dev/null
    DOWN=$what
  else
    "$(dirname "$0")/../remote/ceph-cluster" revive "$CLUSTER_DIR" "$what" >/dev/null
    DOWN=
  fi
}
cleanup_faults() {
  local d
  for d in "${MOUNTED[@]}"; do is_mounted "$d" && timeout 10 "$LAYERFS" umount "$d" >/dev/null 2>&1 || true; done
  stop_daemon_of "$B"
  stop_daemon_of "$C"
  stop_daemon_of "$WORK/D"
  # Never leave the shared cluster down for the tests after this one.
  if [ -n "$DOWN" ]; then "$(dirname "$0")/../remote/ceph-cluster" revive "$CLUSTER_DIR" "$DOWN" >/dev/null || true; fi
}
trap 'rc=$?; cleanup_faults; (exit $rc); cleanup' EXIT
one_line_error() {  # one_line_error FILE WHAT: FILE holds exactly one "layerfs: " line
  [ "$(wc -l <"$1")" = 1 ] && grep -q '^layerfs: ' "$1" || fail "$2: not one clear error: $(cat "$1")"
}
URL=$(new_remote_url faults)

# Whether a pack has reached the remote (the push is under way).
has_pack() {
  case $REMOTE_KIND in
    rados) rados -c "$CEPH_CONF" -p "$LAYERFS_TEST_RADOS_POOL" -N "${URL#rados://*/}" ls 2>/dev/null | grep -q '^index/' ;;
    s3)
      local b=${URL#s3://}
      curl -sf --max-time 2 -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" --aws-sigv4 "aws:amz:us-east-1:s3" \
        --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
        "$LAYERFS_TEST_S3_ENDPOINT/${b%%\?*}?list-type=2&prefix=index%2F" 2>/dev/null | grep -q '<Key>index/'
      ;;
  esac
}

# A: 200 MB of random data in a mount (several packs), committed.
a init "$A" >/dev/null
LAYERFS_STORE=$A mnt main "$WORK/mA" >/dev/null
mkdir -p "$WORK/mA/data"
for i in $(seq 50); do head -c 4000000 /dev/urandom >"$WORK/mA/data/r$i.bin"; done
for i in $(seq 30); do printf 'small %d\n' "$i" >"$WORK/mA/s$i.txt"; done
a commit "$WORK/mA" -m data >/dev/null
a remote add origin "$URL"

if [ "$REMOTE_KIND" != file ]; then
  # The remote goes away in the middle of a push: once its first pack is in.
  a push origin main >"$WORK/push.out" 2>"$WORK/push.err" &
  pid=$!
  for _ in $(seq 600); do has_pack && break; sleep 0.05; done
  has_pack || fail "no pack reached the remote"
  outage down
  rc=0
  wait $pid || rc=$?
  [ $rc -ne 0 ] || fail "a push through an outage succeeded"
  one_line_error "$WORK/push.err" "push through an outage"
  outage up
  # The ref did not move; the next push sends only what had not arrived.
  a push origin main --json >"$WORK/push2.json"
  python3 - "$WORK/push2.json" <<'PY' || fail "push after the outage: $(cat "$WORK/push2.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["refs"][0]["status"] == "created", j
assert j["sent"]["bytes"] < 190e6, j
PY
else
  a push origin main >/dev/null
fi
c clone "$URL" "$C" >/dev/null
c verify >/dev/null || fail "the remote is not whole after the outage"

# B reads lazily through a mount; the remote goes away mid-read: EIO, then the same bytes.
b clone --lazy "$URL" "$B" >/dev/null
LAYERFS_STORE=$B mnt main "$WORK/mB" >/dev/null
cmp "$WORK/mA/data/r1.bin" "$WORK/mB/data/r1.bin" || fail "lazy read differs"
if [ "$REMOTE_KIND" != file ]; then
  outage down
  start=$(date +%s)
  if cat "$WORK/mB/data/r2.bin" >/dev/null 2>"$WORK/cat.err"; then fail "a lazy read through an outage succeeded"; fi
  grep -q "Input/output error" "$WORK/cat.err" || fail "lazy read through an outage: $(cat "$WORK/cat.err")"
  [ $(($(date +%s) - start)) -lt 60 ] || fail "a lazy read waited $(($(date +%s) - start)) s for a dead remote"
  outage up
fi
cmp "$WORK/mA/data/r2.bin" "$WORK/mB/data/r2.bin" || fail "lazy read after the outage differs"
b umount "$WORK/mB"

# Keys of the remote, read and written behind LayerFS's back (an admin, a broken writer).
s3_curl() {
  curl -sf --max-time 60 -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$@"
}
s3_bucket() { local b=${URL#s3://}; echo "$LAYERFS_TEST_S3_ENDPOINT/${b%%\?*}"; }
get_key() {  # get_key KEY FILE
  case $REMOTE_KIND in
    file) cp "${URL#file://}/$(sed 's#/#+/#g' <<<"$1")" "$2" ;;
    rados) rados -c "$CEPH_CONF" -p "$LAYERFS_TEST_RADOS_POOL" -N "${URL#rados://*/}" get "$1" "$2" ;;
    s3) s3_curl -o "$2" "$(s3_bucket)/$1" ;;
  esac
}
put_key() {  # put_key KEY FILE
  case $REMOTE_KIND in
    file) cp "$2" "${URL#file://}/$(sed 's#/#+/#g' <<<"$1")" ;;
    rados) rados -c "$CEPH_CONF" -p "$LAYERFS_TEST_RADOS_POOL" -N "${URL#rados://*/}" put "$1" "$2" ;;
    s3) s3_curl -T "$2" "$(s3_bucket)/$1" >/dev/null ;;
  esac
}
first_pack_key() {  # the oldest pack that is part of the remote (has its index; not an orphan of the cut push)
  local keys
  case $REMOTE_KIND in
    file) keys=$(cd "${URL#file://}" && { find pack+ -type f -size +1M; find index+ -type f; } | sed 's#+/#/#') ;;
    rados) keys=$(rados -c "$CEPH_CONF" -p "$LAYERFS_TEST_RADOS_POOL" -N "${URL#rados://*/}" ls) ;;
    s3) keys=$(s3_curl "$(s3_bucket)?list-type=2" | grep -o '<Key>[^<]*</Key>' | sed 's/<[^>]*>//g') ;;
  esac
  sort <<<"$keys" | awk -F/ '$1 == "index" { idx[$2] = 1 } $1 == "pack" { p[$2] = 1 }
    END { n = 0; for (k in p) if (k in idx) { if (n == 0 || k < best) best = k; n++ } if (n) print "pack/" best }'
}
tip() { LAYERFS_STORE=$1 lfs log -n 1 "$2" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])'; }

# The remote's main moves underneath A (C pushes first): A's push is refused with one line and
# changes nothing; then A forces its own history over C's, and C, fetching, sees the move as a
# forced update, keeps its own main, is refused in turn, pulls (a merge) and pushes: nothing lost.
c_mnt=$WORK/mC
LAYERFS_STORE=$C mnt main "$c_mnt" >/dev/null
printf 'from C\n' >"$c_mnt/c.txt"
c_commit=$(c commit "$c_mnt" -m "C moves main")
c push origin main >/dev/null
printf 'from A\n' >"$WORK/mA/a.txt"
a_commit=$(a commit "$WORK/mA" -m "A, unaware")
LAYERFS_STORE=$A expect_fail push origin main
one_line_error "$WORK/stderr" "push onto a moved ref"
grep -q "rejected main -> origin/main: fetch first" "$WORK/stderr" || fail "moved ref: $(cat "$WORK/stderr")"
[ "$(tip "$A" main)" = "$a_commit" ] || fail "a refused push moved A's main"
[ "$(c fetch origin --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["refs"][0]["status"])')" = unchanged ] ||
  fail "a refused push moved the remote"
a push origin main --force >/dev/null
c fetch origin --json >"$WORK/fetch-forced.json"
python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['refs'][0]; assert r['status']=='forced' and r['new']==sys.argv[2], r" \
  "$WORK/fetch-forced.json" "$a_commit" || fail "C's fetch of a forced ref: $(cat "$WORK/fetch-forced.json")"
[ "$(tip "$C" main)" = "$c_commit" ] || fail "C's main moved with the remote's"
LAYERFS_STORE=$C expect_fail push origin main
one_line_error "$WORK/stderr" "C's push after the forced move"
c pull origin main >/dev/null
c push origin main >/dev/null
[ "$(cat "$c_mnt/a.txt")" = "from A" ] && [ "$(cat "$c_mnt/c.txt")" = "from C" ] || fail "C's mount lacks a side"
a pull origin main >/dev/null
[ "$(cat "$WORK/mA/c.txt")" = "from C" ] || fail "A's mount lacks C's file after the pull"
c umount "$c_mnt"

# A damaged ref: a fetch fails with one line and changes nothing; repaired, it works again.
a fork topic main >/dev/null
a push origin topic >/dev/null
get_key refs/heads/topic "$WORK/ref.good"
printf 'not a commit id\n' >"$WORK/ref.bad"
put_key refs/heads/topic "$WORK/ref.bad"
before=$(c remote -v)
LAYERFS_STORE=$C expect_fail fetch origin
one_line_error "$WORK/stderr" "fetch of a damaged ref"
grep -q "damaged ref" "$WORK/stderr" || fail "damaged ref: $(cat "$WORK/stderr")"
[ "$(c remote -v)" = "$before" ] || fail "a failed fetch moved remote-tracking refs"
put_key refs/heads/topic "$WORK/ref.good"
c fetch origin >/dev/null
[ "$(tip "$C" origin/topic)" = "$(tip "$A" topic)" ] || fail "fetch after the ref was repaired"

# A damaged pack on the remote: a lazy read of it is EIO, a clone of it fails whole.
damage_pack() {
  local key
  key=$(first_pack_key)
  [ -n "$key" ] || fail "no pack on the remote to damage"
  get_key "$key" "$WORK/pack"
  python3 -c "
import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[len(b)//2]^=0x5a; open(p,'wb').write(b)" "$WORK/pack"
  put_key "$key" "$WORK/pack"
}
damage_pack
D=$WORK/D
LAYERFS_STORE=$D lfs clone --lazy "$URL" "$D" >/dev/null
LAYERFS_STORE=$D mnt main "$WORK/mD" >/dev/null
bad=0
for f in "$WORK"/mA/data/*.bin; do
  n=$(basename "$f")
  if cat "$WORK/mD/data/$n" >"$WORK/read" 2>"$WORK/cat.err"; then
    cmp -s "$f" "$WORK/read" || fail "wrong bytes from a damaged remote: $n"
  else
    grep -q "Input/output error" "$WORK/cat.err" || fail "damaged read: $(cat "$WORK/cat.err")"
    bad=$((bad + 1))
  fi
done
[ $bad -gt 0 ] || fail "no read noticed the damaged pack"
LAYERFS_STORE=$D lfs umount "$WORK/mD"
stop_daemon_of "$D"
LAYERFS_STORE=$WORK/E expect_fail clone "$URL" "$WORK/E"
grep -q "damaged" "$WORK/stderr" || fail "clone of a damaged remote: $(cat "$WORK/stderr")"
[ ! -e "$WORK/E" ] || fail "a failed clone left its Store"
# The Store that pushed it still has everything: a new remote gets it whole. No outage is tested
# here: A's daemon (started with the short timeout above) goes, and the CLI pushes with the
# default one, since a loaded single-OSD radosgw can take more than 5 s to create a bucket.
a umount "$WORK/mA"
wait_daemon_gone 60
a remote add second "$(new_remote_url second)"
LAYERFS_REMOTE_TIMEOUT=60 a push second main >/dev/null
LAYERFS_STORE=$WORK/F LAYERFS_REMOTE_TIMEOUT=60 lfs clone "$(a remote -v | awk '$1 == "second" { print $2 }')" "$WORK/F" >/dev/null
[ "$(tip "$WORK/F" main)" = "$(tip "$A" main)" ] || fail "the second remote's main"
LAYERFS_STORE=$WORK/F lfs verify >/dev/null || fail "the second remote is not whole"
echo "remote faults ok ($REMOTE_KIND)"
