#!/usr/bin/env bash
# merge into a mounted branch: the mount changes in place (a process holding a file open reads
# the merged bytes, new names appear, negative entries go), uncommitted changes the merge would
# touch make it refuse, conflicts stay in the mount (markers, side files, `status`), --abort
# restores every byte, --continue commits two parents, the merge record survives a daemon kill;
# then eight forks of one Commit merged back into main one after another; a rename in a fork
# carries main's edit to the new path; `verify` clean.
source "$(dirname "$0")/lib.bash" "$1"
M=$WORK/m
lfs init "$LAYERFS_STORE" >/dev/null
mnt main "$M" >/dev/null
mkdir -p "$M/src" "$M/docs"
for i in $(seq 1 20); do printf 'line %s\n' $(seq 1 40) | sed "s/^/f$i /" >"$M/src/f$i.txt"; done
printf 'bin\0base' >"$M/data.bin"
printf 'readme\n' >"$M/docs/README"
base=$(lfs commit "$M" -m base)
lfs fork feat main >/dev/null
F=$WORK/feat
mnt feat "$F" >/dev/null

# feat: edits the end of f1, adds files and a directory, chmods, deletes.
sed -i 's/^f1 line 40$/f1 line 40 (feat)/' "$F/src/f1.txt"
printf 'added\n' >"$F/src/new.txt"
mkdir -p "$F/gen/deep"
printf 'deep\n' >"$F/gen/deep/x"
chmod 755 "$F/src/f2.txt"
rm "$F/docs/README"
lfs commit "$F" -m "feat work" >/dev/null
# main: edits the start of f1 (a clean line merge) and writes something unrelated, uncommitted.
sed -i 's/^f1 line 1$/f1 line 1 (main)/' "$M/src/f1.txt"
lfs commit "$M" -m "main work" >/dev/null
printf 'scratch\n' >"$M/scratch.txt"

# Another process holds src/f1.txt open and has looked up names the merge creates.
exec 7<"$M/src/f1.txt"
[ -e "$M/src/new.txt" ] && fail "new.txt exists before the merge"
stat "$M/src/f2.txt" >/dev/null
out=$(lfs merge feat --into "$M" --json) || fail "clean merge into the mount failed: $out"
commit=$(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); assert not j["fast_forward"] and not j["conflicts"]; print(j["commit"])' "$out")
grep -q '^f1 line 1 (main)$' "$M/src/f1.txt" && grep -q '^f1 line 40 (feat)$' "$M/src/f1.txt" || fail "merged f1: $(head -2 "$M/src/f1.txt")"
# The open descriptor reads the merged file (it changed in place, same inode).
held=$(cat <&7)
grep -q '^f1 line 40 (feat)$' <<<"$held" || fail "the open file still reads the old bytes"
exec 7<&-
[ "$(cat "$M/src/new.txt")" = added ] || fail "new file not visible"
[ "$(cat "$M/gen/deep/x")" = deep ] || fail "new directory not visible"
[ "$(stat -c %a "$M/src/f2.txt")" = 755 ] || fail "mode change not visible (cached attributes?)"
[ ! -e "$M/docs/README" ] || fail "deleted file still visible"
[ "$(cat "$M/scratch.txt")" = scratch ] || fail "uncommitted file lost"
[ "$(lfs status "$M")" = "$(printf 'A\tscratch.txt')" ] || fail "status after merge: $(lfs status "$M")"
lfs log -n1 --json main | python3 -c '
import json, sys
c = json.load(sys.stdin)[0]
assert c["id"] == sys.argv[1] and len(c["parents"]) == 2, c' "$commit"
lfs cat main:scratch.txt >/dev/null 2>&1 && fail "the merge committed an unrelated uncommitted file"
touch "$M/gen/deep/y" && rm "$M/gen/deep/y" || fail "a merged-in directory is not writable"
lfs commit "$M" -m "scratch" >/dev/null

# Refused: an uncommitted change to a path the merge touches; nothing changes.
sed -i 's/^f3 line 5$/f3 line 5 (feat)/' "$F/src/f3.txt"
lfs commit "$F" -m "feat f3" >/dev/null
printf 'mine\n' >>"$M/src/f3.txt"
before=$(lfs log -n1 --json main)
expect_fail merge feat --into "$M"
[ "$(lfs log -n1 --json main)" = "$before" ] || fail "a refused merge moved main"
tail -1 "$M/src/f3.txt" | grep -q '^mine$' || fail "a refused merge touched the file"
lfs reset "$M" >/dev/null

# Conflicts: same lines on both sides, a binary changed on both.
sed -i 's/^f4 line 7$/f4 line 7 (feat)/' "$F/src/f4.txt"
printf 'bin\0feat' >"$F/data.bin"
lfs commit "$F" -m "feat conflicts" >/dev/null
sed -i 's/^f4 line 7$/f4 line 7 (main)/' "$M/src/f4.txt"
printf 'bin\0main' >"$M/data.bin"
lfs commit "$M" -m "main conflicts" >/dev/null
snapshot() { (cd "$M" && find . -type f -print0 | sort -z | xargs -0 sha256sum; find . | sort; stat -c '%n %a %s' $(find . | sort)); }
snapshot >"$WORK/before.txt"
head_before=$(lfs log -n1 --json main)
exec 8<"$M/src/f4.txt"
rc=0
lfs merge feat --into "$M" >"$WORK/merge.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "conflicted merge exited $rc: $(cat "$WORK/merge.out")"
grep -q '^<<<<<<< main$' "$M/src/f4.txt" && grep -q '^>>>>>>> feat$' "$M/src/f4.txt" || fail "no conflict markers: $(grep -n f4 "$M/src/f4.txt" | head)"
grep -q '^<<<<<<< main$' <&8 || fail "the open file does not read the conflict"
exec 8<&-
[ "$(tail -c 4 "$M/data.bin~theirs")" = feat ] && [ "$(tail -c 4 "$M/data.bin~ours")" = main ] || fail "binary sides"
[ "$(tail -c 4 "$M/data.bin")" = main ] || fail "the binary at its path should be ours"
[ "$(lfs log -n1 --json main)" = "$head_before" ] || fail "a stopped merge moved main"
lfs status "$M" >"$WORK/status"
grep -q "^C	src/f4.txt	content$" "$WORK/status" && grep -q "^C	data.bin	binary$" "$WORK/status" || fail "status: $(cat "$WORK/status")"
expect_fail commit "$M" -m "in the middle"
expect_fail merge feat --into "$M"
expect_fail merge --continue --into "$M"

# --abort: every byte, name and mode back.
lfs merge --abort --into "$M" >/dev/null
snapshot >"$WORK/after.txt"
diff "$WORK/before.txt" "$WORK/after.txt" >&2 || fail "abort did not restore the mount"
[ -z "$(lfs status "$M")" ] || fail "status after abort: $(lfs status "$M")"

# Again; the merge record survives a daemon killed mid-merge; then resolve and continue.
lfs merge feat --into "$M" >/dev/null 2>&1 && fail "the second conflicted merge exited 0"
kill -9 "$(daemon_pid)"
for _ in $(seq 50); do [ -e "$LAYERFS_STORE/control.sock" ] || break; sleep 0.1; done
force_unmount "$M"
force_unmount "$F"
grep -q "^C	src/f4.txt	content$" <(lfs status main) || fail "merge record lost with the daemon: $(lfs status main)"
mnt main "$M" >/dev/null
mnt feat "$F" >/dev/null
sed -i -e '/^<<<<<<< main$/d' -e '/^=======$/d' -e '/^>>>>>>> feat$/d' -e '/^f4 line 7 (main)$/d' "$M/src/f4.txt"
expect_fail merge --continue --into "$M"   # the side files are still there
rm "$M/data.bin~ours" "$M/data.bin~theirs"
out=$(lfs merge --continue --into "$M" --json) || fail "continue failed: $out"
lfs log -n1 --json main | python3 -c '
import json, sys
c = json.load(sys.stdin)[0]
assert len(c["parents"]) == 2, c'
[ -z "$(lfs status "$M")" ] || fail "status after continue: $(lfs status "$M")"
grep -q '^f4 line 7 (feat)$' "$M/src/f4.txt" || fail "resolution lost"
lfs umount "$F" >/dev/null

# The agent pattern: eight forks of one Commit, each mounted and worked on, merged back into the
# mounted main one after another (each a clean merge), verify clean.
start=$(lfs commit "$M" -m "before forks" 2>/dev/null || lfs log -n1 --json main | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
for i in $(seq 1 8); do
  lfs fork "agent$i" main >/dev/null
  mnt "agent$i" "$WORK/a$i" >/dev/null
  printf 'agent %s\n' "$i" >"$WORK/a$i/src/agent$i.txt"
  sed -i "s/^f$((i + 8)) line 20\$/f$((i + 8)) line 20 (agent $i)/" "$WORK/a$i/src/f$((i + 8)).txt"
  sed -i "s/^f5 line $((i * 4 + 1))\$/f5 line $((i * 4 + 1)) (agent $i)/" "$WORK/a$i/src/f5.txt"
  lfs commit "$WORK/a$i" -m "agent $i" >/dev/null
  lfs umount "$WORK/a$i" >/dev/null
done
for i in $(seq 1 8); do
  lfs merge "agent$i" --into "$M" >/dev/null || fail "merging agent$i failed"
done
for i in $(seq 1 8); do
  [ "$(cat "$M/src/agent$i.txt")" = "agent $i" ] || fail "agent$i's file missing"
  grep -q "^f$((i + 8)) line 20 (agent $i)\$" "$M/src/f$((i + 8)).txt" || fail "agent$i's edit missing"
  grep -q "^f5 line $((i * 4 + 1)) (agent $i)\$" "$M/src/f5.txt" || fail "agent$i's f5 edit missing"
done
[ "$(lfs log --graph --json main | python3 -c 'import json,sys; print(sum(len(c["parents"]) == 2 for c in json.load(sys.stdin)))')" -eq 9 ] || fail "merge commits missing from history (the first agent fast-forwards; 7 more and 2 earlier)"

# A fork moves a file into a new directory (and edits it); main edits the old path in the mount,
# with the file held open. The merge carries main's edit to the new path; the old name goes.
lfs fork mover main >/dev/null
mnt mover "$WORK/mover" >/dev/null
mkdir -p "$WORK/mover/lib/moved"
sed 's/^f3 line 40$/f3 line 40 (mover)/' "$WORK/mover/src/f3.txt" >"$WORK/mover/lib/moved/f3.txt"
rm "$WORK/mover/src/f3.txt"
lfs commit "$WORK/mover" -m "move f3" >/dev/null
lfs umount "$WORK/mover" >/dev/null
exec 8<"$M/src/f3.txt"
sed -i 's/^f3 line 2$/f3 line 2 (main)/' "$M/src/f3.txt"
lfs commit "$M" -m "edit f3" >/dev/null
out=$(lfs merge mover --into "$M" --json) || fail "merging a rename failed: $out"
[ ! -e "$M/src/f3.txt" ] || fail "src/f3.txt still there after its rename was merged"
grep -q '^f3 line 2 (main)$' "$M/lib/moved/f3.txt" && grep -q '^f3 line 40 (mover)$' "$M/lib/moved/f3.txt" ||
  fail "the renamed file lacks an edit: $(grep -c . "$M/lib/moved/f3.txt") lines"
exec 8<&-

lfs export main "$WORK/export" >/dev/null
diff -r "$WORK/export" "$M" >&2 || fail "the mount differs from its head commit"
lfs verify >/dev/null || fail "verify after the merges"
echo "merge e2e OK"
