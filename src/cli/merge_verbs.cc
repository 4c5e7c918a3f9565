// The merge verb: `layerfs merge SOURCE [--into BRANCH|MOUNTPOINT] ...`, --continue, --abort.
// The library call (merge/merge_into.h) returns a typed outcome; text and --json are both
// rendered from it here. Exit 0 when merged (or up to date), 1 when stopped on conflicts or on
// an error.
#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "merge/merge_into.h"

namespace layerfs::cli {

using nlohmann::json;

namespace {

json IdOrNull(const std::optional<ObjectId>& id) { return id ? json(id->Hex()) : json(nullptr); }

json SideId(const std::optional<TreeEntry>& e) {
  if (!e) return nullptr;
  if (e->type == EntryType::kSymlink) return e->target;
  return e->id.Hex();
}

json OutcomeJson(const merge::MergeOutcome& o) {
  json conflicts = json::array();
  for (const auto& c : o.conflicts) {
    json sides = json::array();
    for (const auto& s : c.sides) sides.push_back(s);
    conflicts.push_back({{"path", c.path},
                         {"kind", merge::ConflictKindName(c.kind)},
                         {"base", SideId(c.base)},
                         {"ours", SideId(c.ours)},
                         {"theirs", SideId(c.theirs)},
                         {"sides", sides}});
  }
  json bases = json::array();
  for (const auto& b : o.bases) bases.push_back(b.Hex());
  return {{"commit", IdOrNull(o.commit)},
          {"fast_forward", o.fast_forward},
          {"up_to_date", o.up_to_date},
          {"base", o.bases.empty() ? json(nullptr) : json(o.bases[0].Hex())},
          {"bases", bases},
          {"ours", o.ours.Hex()},
          {"theirs", o.theirs.Hex()},
          {"stopped", o.stopped},
          {"conflicts", conflicts}};
}

Status SyncMountAt(const std::string& mp) {
  int fd = open(mp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::Errorf(errno, "open {}: {}", mp, strerror(errno));
  int rc = syncfs(fd);
  int e = errno;
  close(fd);
  if (rc != 0) return Status::Errorf(e, "sync {}: {}", mp, strerror(e));
  return Status::Ok();
}

struct MergeArgs {
  std::string op = "merge";  // or cherry-pick, revert
  std::string source, into, message, strategy, favor;
  bool ff_only = false, no_ff = false, cont = false, abort = false, as_json = false;
};

Status RunMerge(Context& ctx, const MergeArgs& a) {
  if (a.cont + a.abort + !a.source.empty() != 1)
    return Status::Invalid(fmt::format("{} takes {}, or --continue, or --abort", a.op, a.op == "merge" ? "SOURCE" : "COMMIT"));
  if (a.ff_only && a.no_ff) return Status::Invalid("--ff-only and --no-ff exclude each other");
  LFS_ASSIGN(Store * st, ctx.GetStore());
  std::string mp;
  auto branch_r = ctx.BranchOfTarget(a.into, &mp);
  if (!branch_r.ok()) {
    if (a.into.empty())
      return Status::Invalid("the working directory is not in a layerfs mount; name the branch with --into");
    return branch_r.status();
  }
  const std::string branch = *branch_r;
  LFS_ASSIGN(auto head, st->BranchHead(branch));
  if (!head) return Status::NotFound(fmt::format("no branch '{}'", branch));
  if (mp.empty() && ctx.mounts) {
    if (auto m = ctx.mounts->MountpointOf(branch)) mp = *m;
  }
  if (!mp.empty()) LFS_TRY(SyncMountAt(mp));
  LFS_ASSIGN(auto* reg, ctx.Workspaces());
  LFS_ASSIGN(auto ws, reg->Get(branch));
  merge::MergeOutcome out;
  bool released = false;
  auto release = [&] {
    if (mp.empty() && !released) {
      released = true;
      ws.reset();
      reg->Release(branch);
    }
  };
  if (a.cont || a.abort) {
    if (a.abort) {
      LFS_TRY(merge::AbortMerge(*st, *ws));
      if (a.as_json) ctx.Printf("%s\n", json({{"aborted", true}, {"branch", branch}}).dump(2).c_str());
      else ctx.Printf("%s into %s aborted\n", a.op.c_str(), branch.c_str());
      return Status::Ok();
    }
    LFS_ASSIGN(out, merge::ContinueMerge(*st, *ws, a.message));
  } else if (a.op != "merge") {
    merge::PickOptions o;
    LFS_ASSIGN(o.commit, st->Resolve(a.source));
    o.label = a.source;
    o.branch = branch;
    o.revert = a.op == "revert";
    if (a.favor == "ours") o.favor = merge::Favor::kOurs;
    else if (a.favor == "theirs") o.favor = merge::Favor::kTheirs;
    else if (!a.favor.empty()) return Status::Invalid(fmt::format("unknown -X option '{}' (ours, theirs)", a.favor));
    bool live = !mp.empty();
    if (!live) {
      LFS_ASSIGN(auto merging, merge::ReadMergeState(*ws));
      LFS_ASSIGN(auto changes, ws->Changes());
      live = merging.has_value() || !changes.empty();
    }
    o.ws = live ? ws.get() : nullptr;
    o.keep_conflicts = !mp.empty();
    LFS_ASSIGN(out, merge::Pick(*st, o));
    if (!live && out.commit) LFS_TRY(ws->Reset(std::nullopt));
  } else {
    merge::MergeIntoOptions o;
    LFS_ASSIGN(o.source, st->Resolve(a.source));
    o.source_label = a.source;
    o.branch = branch;
    o.message = a.message;
    o.ff = a.ff_only ? merge::FastForward::kOnly : a.no_ff ? merge::FastForward::kNever : merge::FastForward::kAllow;
    if (a.strategy == "ours") o.strategy = merge::Strategy::kOurs;
    else if (a.strategy == "theirs") o.strategy = merge::Strategy::kTheirs;
    else if (!a.strategy.empty() && a.strategy != "ort" && a.strategy != "recursive")
      return Status::Invalid(fmt::format("unknown strategy '{}' (ours, theirs)", a.strategy));
    if (a.favor == "ours") o.favor = merge::Favor::kOurs;
    else if (a.favor == "theirs") o.favor = merge::Favor::kTheirs;
    else if (!a.favor.empty()) return Status::Invalid(fmt::format("unknown -X option '{}' (ours, theirs)", a.favor));
    // A mounted branch, or one whose Workspace holds uncommitted changes, merges through its
    // Workspace; otherwise in the Store alone, and a Workspace left behind follows the branch.
    bool live = !mp.empty();
    if (!live) {
      LFS_ASSIGN(auto merging, merge::ReadMergeState(*ws));
      LFS_ASSIGN(auto changes, ws->Changes());
      live = merging.has_value() || !changes.empty();
    }
    o.ws = live ? ws.get() : nullptr;
    o.keep_conflicts = !mp.empty();
    LFS_ASSIGN(out, merge::MergeInto(*st, o));
    if (!live && out.commit && !out.up_to_date) {
      LFS_TRY(ws->Reset(std::nullopt));
    }
  }
  release();
  if (a.as_json) {
    json j = OutcomeJson(out);
    j["branch"] = branch;
    if (!mp.empty()) j["mountpoint"] = mp;
    ctx.Printf("%s\n", j.dump(2).c_str());
  } else if (out.up_to_date) {
    ctx.Printf("already up to date\n");
  } else if (out.commit) {
    ctx.Printf("%s %s\n", out.fast_forward ? "fast-forward" : a.op == "merge" ? "merged" : "committed",
               out.commit->Hex().c_str());
  }
  if (out.conflicts.empty()) return Status::Ok();
  if (!a.as_json)
    for (const auto& c : out.conflicts) {
      ctx.Printf("CONFLICT (%s): %s", merge::ConflictKindName(c.kind), c.path.c_str());
      for (const auto& s : c.sides) ctx.Printf(" [%s]", s.c_str());
      ctx.Printf("\n");
    }
  if (out.stopped)
    return Status::Errorf(kConflict, "{} stopped on {} conflict(s): resolve them in {}, then `layerfs {} --continue` (or --abort)",
                          a.op, out.conflicts.size(), mp, a.op);
  return Status::Errorf(kConflict, "{} of {} into {} has {} conflict(s); nothing was changed", a.op, a.source, branch,
                        out.conflicts.size());
}

}  // namespace

void AddPickVerb(CLI::App& app, Context& ctx, const char* name, const char* help) {
  auto* c = app.add_subcommand(name, help);
  auto a = std::make_shared<MergeArgs>();
  a->op = name;
  c->add_option("COMMIT", a->source, "The Commit (any REF)");
  c->add_option("--into", a->into, "Branch or mountpoint (default: the mount holding the working directory)");
  c->add_option("-X,--strategy-option", a->favor, "ours or theirs: conflicts take that side");
  c->add_flag("--continue", a->cont, "Commit once the conflicts are resolved");
  c->add_flag("--abort", a->abort, "Put the Workspace back as it was");
  c->add_flag("--json", a->as_json, "Print one JSON object");
  c->callback([&ctx, a] { ctx.run = [&ctx, a]() { return RunMerge(ctx, *a); }; });
}

void AddMergeVerbs(CLI::App& app, Context& ctx) {
  AddPickVerb(app, ctx, "cherry-pick", "Apply the change a Commit made onto a branch, as a new Commit");
  AddPickVerb(app, ctx, "revert", "Undo the change a Commit made, as a new Commit on a branch");
  auto* c = app.add_subcommand("merge", "Merge SOURCE into a branch (a mount's live Workspace, or the Store)");
  auto a = std::make_shared<MergeArgs>();
  c->add_option("SOURCE", a->source, "Branch, commit, prefix, REF~N or REF^N to merge in");
  c->add_option("--into", a->into, "Branch or mountpoint to merge into (default: the mount holding the working directory)");
  c->add_option("-m,--message", a->message, "Message of the merge Commit");
  c->add_flag("--ff-only", a->ff_only, "Refuse unless the branch can fast-forward");
  c->add_flag("--no-ff", a->no_ff, "Make a merge Commit even when a fast-forward is possible");
  c->add_option("-s,--strategy", a->strategy, "ours or theirs: that side's whole tree is the merge's");
  c->add_option("-X,--strategy-option", a->favor, "ours or theirs: conflicts take that side");
  c->add_flag("--continue", a->cont, "Commit a stopped merge once its conflicts are resolved");
  c->add_flag("--abort", a->abort, "Put the Workspace back as it was before a stopped merge");
  c->add_flag("--json", a->as_json, "Print one JSON object");
  c->callback([&ctx, a] { ctx.run = [&ctx, a]() { return RunMerge(ctx, *a); }; });
}

}  // namespace layerfs::cli
