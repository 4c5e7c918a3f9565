// Verbs on live Workspaces: mount, umount, mounts, commit, status, reset.
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>

#include "cli/cli.h"
#include "cli/json_shapes.h"
#include "merge/merge_into.h"
#include "merge/patch.h"
#include "workspace/files.h"

namespace layerfs::cli {

namespace {

Status NeedDaemon(const char* verb) {
  return Status::Errorf(ENOTCONN, "{} needs the layerfsd of this store, and none is running", verb);
}

std::string MountText(const json& m) {
  std::string what = m.contains("branch") ? m["branch"].get<std::string>() : m["ref"].get<std::string>() + " (read-only)";
  return fmt::format("{} {} {}", m["mountpoint"].get<std::string>(), what, m["transport"].get<std::string>());
}

Verb Mount() {
  Verb v;
  v.name = v.cli = "mount";
  v.ref_args = {"ref"};
  v.help = "Mount a branch (writable) or a commit (read-only) at MOUNTPOINT";
  v.args = {{"ref", ArgType::kString, "REF", "Branch, commit, prefix or REF~N", true},
            {"mountpoint", ArgType::kString, "MOUNTPOINT", "Directory to mount on", true},
            {"read_only", ArgType::kBool, "--read-only", "Mount read-only (a branch's head commit)"},
            {"allow_other", ArgType::kBool, "--allow-other", "Let other users see the mount"},
            {"single_threaded", ArgType::kBool, "--single-threaded", "Serve the mount with one thread (default: a thread pool)"},
            {"threads", ArgType::kBool, "--threads", "Serve the mount with a thread pool (the default)"},
            {"no_follow_cpu", ArgType::kBool, "--no-follow-cpu", "Do not move the serving thread to its caller's CPU"},
            {"foreground", ArgType::kBool, "-f,--foreground", "Keep layerfsd in the foreground", false, true}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    if (!ctx.mounts) return NeedDaemon("mount");
    MountService::Request r;
    r.ref = a.Str("ref");
    r.mountpoint = ctx.Abs(a.Str("mountpoint"));
    r.read_only = a.Bool("read_only");
    r.allow_other = a.Bool("allow_other");
    r.multithreaded = !a.Bool("single_threaded");
    r.no_follow_cpu = a.Bool("no_follow_cpu");
    LFS_ASSIGN(MountInfo m, ctx.mounts->Mount(r));
    *result = MountJson(m);
    return Status::Ok();
  };
  v.text = [](const Args& a, const json& m, Output& o) {
    o.Outf("{} mounted at {}{}\n", a.Str("ref"), m["mountpoint"].get<std::string>(),
           m.contains("branch") ? "" : " (read-only)");
  };
  return v;
}

Verb Umount() {
  Verb v;
  v.name = v.cli = "umount";
  v.help = "Flush and unmount MOUNTPOINT";
  v.args = {{"mountpoint", ArgType::kString, "MOUNTPOINT", "Mounted directory", true}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    if (!ctx.mounts) return NeedDaemon("umount");
    const std::string mp = ctx.Abs(a.Str("mountpoint"));
    char real[PATH_MAX];
    std::string shown = realpath(mp.c_str(), real) ? real : mp;
    LFS_TRY(ctx.mounts->Unmount(mp));
    *result = {{"mountpoint", shown}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json&, Output&) {};
  return v;
}

Verb Mounts() {
  Verb v;
  v.name = v.cli = "mounts";
  v.help = "List the mounts of the running daemon";
  v.read_only = true;
  v.run = [](Context& ctx, const Args&, json* result) -> Status {
    json arr = json::array();
    if (ctx.mounts)
      for (const auto& m : ctx.mounts->List()) arr.push_back(MountJson(m));
    *result = std::move(arr);
    return Status::Ok();
  };
  v.text = [](const Args&, const json& r, Output& o) {
    for (const auto& m : r) o.Outf("{}\n", MountText(m));
  };
  return v;
}

const ArgSpec kTarget = {"target", ArgType::kString, "TARGET",
                         "Mountpoint or branch (default: the mount holding the working directory)"};

Verb Commit() {
  Verb v;
  v.name = v.cli = "commit";
  v.help = "Commit what was written to a mounted (or unmounted) branch";
  v.args = {kTarget, {"message", ArgType::kString, "-m,--message", "Commit message", true},
            {"amend", ArgType::kBool, "--amend",
             "Replace the head Commit (as Git's commit --amend): its parents, its tree with what was written since"},
            // Git's `commit -a` / `-am MSG` out of habit: every change is committed anyway.
            {"all", ArgType::kBool, "-a,--all", "Accepted as in Git; every change is committed anyway", false, true}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    // As Git: a message of nothing but white space aborts the commit.
    if (a.Str("message").find_first_not_of(" \t\r\n") == std::string::npos)
      return Status::Invalid("empty commit message: a Commit needs a message saying what changed");
    std::string mp;
    LFS_ASSIGN(std::string branch, ctx.BranchOfTarget(a.Str("target"), &mp));
    LFS_TRY(SettleMount(ctx, branch, mp));
    LFS_ASSIGN(Store * st, ctx.GetStore());
    LFS_ASSIGN(auto* reg, ctx.Workspaces());
    LFS_ASSIGN(auto ws, reg->Get(branch));
    LFS_ASSIGN(auto merging, merge::ReadMergeState(*ws));
    if (merging)
      return Status::Errorf(EBUSY, "a merge of {} is in progress in {}: `layerfs merge --continue` commits it, `--abort` ends it",
                            merging->source_label, branch);
    LFS_ASSIGN(ObjectId id, a.Bool("amend") ? ws->Amend(a.Str("message")) : ws->Commit(a.Str("message")));
    LFS_ASSIGN(auto c, st->GetCommit(id));
    json parents = json::array();
    for (const auto& p : c.parents) parents.push_back(p.Hex());
    *result = {{"commit", id.Hex()}, {"branch", branch}, {"parents", parents}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json& r, Output& o) { o.Outf("{}\n", r["commit"].get<std::string>()); };
  return v;
}

Verb StatusVerb() {
  Verb v;
  v.name = v.cli = "status";
  v.help = "Uncommitted changes of a Workspace";
  v.read_only = true;
  v.args = {kTarget,
            {"patch", ArgType::kBool, "-p,--patch",
             "Each change as Git's unified diff against the head Commit (\"patch\" in its JSON)"},
            {"short", ArgType::kBool, "-s,--short,--porcelain", "Accepted as in Git: the listing is always short", false, true},
            kRenames, kPaths};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    std::string mp;
    LFS_ASSIGN(std::string branch, ctx.BranchOfTarget(a.Str("target"), &mp));
    LFS_TRY(SettleMount(ctx, branch, mp));
    // On a full disk the Store opens read-only, and its Workspace writes nothing.
    LFS_ASSIGN(Store * st, ctx.GetStore(/*read_only_ok=*/true));
    LFS_ASSIGN(auto* reg, ctx.Workspaces());
    LFS_ASSIGN(auto ws, reg->Get(branch));
    LFS_ASSIGN(auto merging, merge::ReadMergeState(*ws));
    LFS_ASSIGN(auto changes, ws->Changes());
    LFS_TRY(KeepPaths(ctx, a, &changes));
    LFS_TRY(FindRenamesIf(a, &changes, WorkingTreeReader(*st, *ws)));
    json conflicts = json::array();
    json r = {{"branch", branch}, {"changes", ChangesJson(changes)}};
    if (a.Bool("patch")) {
      // The committed side from history, the live side read from the Workspace.
      LFS_TRY(AddPatches(changes, WorkingTreeReader(*st, *ws), &r["changes"]));
    }
    if (merging) {
      LFS_ASSIGN(auto unresolved, merge::UnresolvedPaths(*ws, *merging));
      for (const auto& c : merging->conflicts) {
        bool open = false;
        for (const auto& u : unresolved)
          open |= u.path == c.path || std::find(c.sides.begin(), c.sides.end(), u.path) != c.sides.end();
        json cj = ConflictJson(c);
        cj["resolved"] = !open;
        conflicts.push_back(std::move(cj));
      }
      r["merging"] = {{"source", merging->source_label}, {"theirs", merging->theirs.Hex()},
                      {"unresolved", unresolved.size()}};
    }
    r["conflicts"] = std::move(conflicts);
    *result = std::move(r);
    return Status::Ok();
  };
  v.text = [](const Args& a, const json& r, Output& o) {
    if (a.Bool("patch")) {  // as `git diff HEAD`
      PrintPatches(r["changes"], o);
      return;
    }
    if (r.contains("merging")) {
      // Conflicts first, as `git status` shows unmerged paths: C, the kind, the path.
      const json& m = r["merging"];
      o.Outf("# merging {} ({}) into {}: {} conflict(s), {} unresolved; "
             "`layerfs merge --continue` once resolved, or --abort\n",
             m["source"].get<std::string>(), m["theirs"].get<std::string>().substr(0, 12),
             r["branch"].get<std::string>(), r["conflicts"].size(), m["unresolved"].get<uint64_t>());
      for (const auto& c : r["conflicts"])
        o.Outf("C\t{}\t{}{}\n", merge::GitQuote(c["path"].get<std::string>()), c["kind"].get<std::string>(),
               c["resolved"].get<bool>() ? " (resolved)" : "");
    }
    PrintChanges(r["changes"], false, o);
  };
  return v;
}

Verb Reset() {
  Verb v;
  v.name = v.cli = "reset";
  v.ref_args = {"hard"};
  v.destructive = true;
  v.help = "Discard uncommitted changes; with --hard REF, also move the branch to REF";
  v.args = {kTarget, {"hard", ArgType::kString, "--hard", "Move the branch to this commit"}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    std::string mp;
    LFS_ASSIGN(std::string branch, ctx.BranchOfTarget(a.Str("target"), &mp));
    LFS_ASSIGN(Store * st, ctx.GetStore());
    std::optional<ObjectId> to;
    if (!a.Str("hard").empty()) {
      LFS_ASSIGN(to, st->Resolve(a.Str("hard")));
    }
    LFS_ASSIGN(auto* reg, ctx.Workspaces());
    LFS_ASSIGN(auto ws, reg->Get(branch));
    std::optional<std::string> mounted = ctx.mounts ? ctx.mounts->MountpointOf(branch) : std::nullopt;
    if (mounted) {
      // In place: the mount stays, with the files processes hold open and their working
      // directories (a remount left those on a detached mount). Writes the kernel still holds
      // land first, so they are discarded with the rest rather than after it.
      LFS_TRY(SettleMount(ctx, branch, *mounted));
      LFS_TRY(ws->ResetInPlace(to));
    } else {
      LFS_TRY(ws->Reset(to));
    }
    *result = {{"branch", branch}, {"commit", ws->base_commit().Hex()}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json& r, Output& o) {
    o.Outf("{} {}\n", r["branch"].get<std::string>(), r["commit"].get<std::string>());
  };
  return v;
}

// Git's `restore [--source REF] PATH...`: those paths of the working tree back as a Commit has them.
Verb Restore() {
  Verb v;
  v.name = v.cli = "restore";
  v.ref_args = {"source"};
  v.destructive = true;
  v.help = "Bring PATHs of a Workspace back as a Commit (default: its head) has them; new files stay";
  v.args = {{"paths", ArgType::kStrings, "PATH,--path",
             "Files or directories (relative to the working directory in a mount, as Git reads them)", true},
            {"source", ArgType::kString, "-s,--source", "The Commit to take them from (default: the head)"},
            {"target", ArgType::kString, "--target", "Branch, or a mountpoint of one (default: the mount here)"}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    std::string mp;
    LFS_ASSIGN(std::string branch, ctx.BranchOfTarget(a.Str("target"), &mp));
    LFS_TRY(SettleMount(ctx, branch, mp));
    LFS_ASSIGN(Store * st, ctx.GetStore());
    LFS_ASSIGN(auto paths, ctx.TreePaths(a.Strings("paths")));
    LFS_ASSIGN(auto* reg, ctx.Workspaces());
    LFS_ASSIGN(auto ws, reg->Get(branch));
    ObjectId source = ws->base_commit();
    if (a.Has("source")) {
      LFS_ASSIGN(source, st->Resolve(a.Str("source")));
    }
    LFS_ASSIGN(auto restored, ws->Restore(source, paths));
    *result = {{"branch", branch}, {"source", source.Hex()}, {"restored", ChangesJson(restored)}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json&, Output&) {};  // as git restore: nothing on success
  return v;
}

}  // namespace

void AddWorkspaceVerbs(std::vector<Verb>* out) {
  for (auto& v : {Mount(), Umount(), Mounts(), Commit(), StatusVerb(), Reset(), Restore()}) out->push_back(v);
}

}  // namespace layerfs::cli
