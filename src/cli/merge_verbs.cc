// The merge verbs: `layerfs merge SOURCE [--into BRANCH|MOUNTPOINT] ...`, cherry-pick, revert,
// each with --continue and --abort. The library call (merge/merge_into.h) returns a typed
// outcome; the result (the protocol's, and --json) and the text are both made from it here.
// Conflicts are a CONFLICT failure that carries the result (the conflicts): exit 1 in the CLI.
#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/json_shapes.h"
#include "merge/merge_into.h"

namespace layerfs::cli {

using nlohmann::json;

namespace {

json OutcomeJson(const merge::MergeOutcome& o) {
  json conflicts = json::array();
  for (const auto& c : o.conflicts) conflicts.push_back(ConflictJson(c));
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

Result<merge::Favor> ParseFavor(const std::string& favor) {
  if (favor.empty()) return merge::Favor::kNone;
  if (favor == "ours") return merge::Favor::kOurs;
  if (favor == "theirs") return merge::Favor::kTheirs;
  return Status::Invalid(fmt::format("unknown -X option '{}' (ours, theirs)", favor));
}

// A mounted branch, or one whose Workspace holds uncommitted changes or a stopped merge, merges
// through its Workspace; otherwise in the Store alone, and a Workspace left behind follows the
// branch.
Result<bool> MergesThroughWorkspace(workspace::Workspace& ws, const std::string& mountpoint) {
  if (!mountpoint.empty()) return true;
  LFS_ASSIGN(auto merging, merge::ReadMergeState(ws));
  if (merging) return true;
  LFS_ASSIGN(auto changes, ws.Changes());
  return !changes.empty();
}

struct MergeArgs {
  std::string op = "merge";  // or cherry-pick, revert
  std::string source, into, message, strategy, favor;
  bool ff_only = false, no_ff = false, cont = false, abort = false;
};

MergeArgs FromArgs(const std::string& op, const Args& in) {
  MergeArgs a;
  a.op = op;
  a.source = in.Str(op == "merge" ? "source" : "commit");
  a.into = in.Str("into");
  a.message = in.Str("message");
  a.strategy = in.Str("strategy");
  a.favor = in.Str("strategy_option");
  a.ff_only = in.Bool("ff_only");
  a.no_ff = in.Bool("no_ff");
  a.cont = in.Bool("continue");
  a.abort = in.Bool("abort");
  return a;
}

Status RunMerge(Context& ctx, const MergeArgs& a, json* result) {
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
  LFS_TRY(SettleMount(ctx, branch, mp));
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
      *result = {{"aborted", true}, {"branch", branch}, {"op", a.op}};
      return Status::Ok();
    }
    LFS_ASSIGN(out, merge::ContinueMerge(*st, *ws, a.message));
  } else if (a.op != "merge") {
    merge::PickOptions o;
    LFS_ASSIGN(o.commit, st->Resolve(a.source));
    o.label = a.source;
    o.branch = branch;
    o.revert = a.op == "revert";
    LFS_ASSIGN(o.favor, ParseFavor(a.favor));
    LFS_ASSIGN(bool live, MergesThroughWorkspace(*ws, mp));
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
    LFS_ASSIGN(o.favor, ParseFavor(a.favor));
    LFS_ASSIGN(bool live, MergesThroughWorkspace(*ws, mp));
    o.ws = live ? ws.get() : nullptr;
    o.keep_conflicts = !mp.empty();
    LFS_ASSIGN(out, merge::MergeInto(*st, o));
    if (!live && out.commit && !out.up_to_date) {
      LFS_TRY(ws->Reset(std::nullopt));
    }
  }
  release();
  json j = OutcomeJson(out);
  j["branch"] = branch;
  j["op"] = a.op;
  if (!mp.empty()) j["mountpoint"] = mp;
  *result = std::move(j);
  if (out.conflicts.empty()) return Status::Ok();
  if (out.stopped)
    return Status::Errorf(kConflict, "{} stopped on {} conflict(s): resolve them in {}, then `layerfs {} --continue` (or --abort)",
                          a.op, out.conflicts.size(), mp, a.op);
  return Status::Errorf(kConflict, "{} of {} into {} has {} conflict(s); nothing was changed", a.op, a.source, branch,
                        out.conflicts.size());
}

void MergeText(const Args&, const json& r, Output& o) {
  const std::string op = r.value("op", "merge");
  if (r.value("aborted", false)) {
    o.Outf("{} into {} aborted\n", op, r["branch"].get<std::string>());
    return;
  }
  if (r["up_to_date"].get<bool>()) {
    o.Out("already up to date\n");
  } else if (!r["commit"].is_null()) {
    o.Outf("{} {}\n", r["fast_forward"].get<bool>() ? "fast-forward" : op == "merge" ? "merged" : "committed",
           r["commit"].get<std::string>());
  }
  for (const auto& c : r["conflicts"]) {
    o.Outf("CONFLICT ({}): {}", c["kind"].get<std::string>(), c["path"].get<std::string>());
    for (const auto& s : c["sides"]) o.Outf(" [{}]", s.get<std::string>());
    o.Out("\n");
  }
}

const ArgSpec kInto = {"into", ArgType::kString, "--into",
                       "Branch or mountpoint (default: the mount holding the working directory)"};
const ArgSpec kFavor = {"strategy_option", ArgType::kString, "-X,--strategy-option",
                        "ours or theirs: conflicts take that side"};

Verb Pick(const char* name, const char* cli, const char* help) {
  Verb v;
  v.name = name;
  v.cli = cli;
  v.ref_args = {"commit"};
  v.help = help;
  v.args = {{"commit", ArgType::kString, "COMMIT", "The Commit (any REF)"},
            kInto,
            kFavor,
            {"continue", ArgType::kBool, "--continue", "Commit once the conflicts are resolved"},
            {"abort", ArgType::kBool, "--abort", "Put the Workspace back as it was"}};
  const std::string op = cli;
  v.run = [op](Context& ctx, const Args& a, json* result) { return RunMerge(ctx, FromArgs(op, a), result); };
  v.text = MergeText;
  return v;
}

Verb Merge() {
  Verb v;
  v.name = v.cli = "merge";
  v.ref_args = {"source"};
  v.help = "Merge SOURCE into a branch (a mount's live Workspace, or the Store)";
  v.args = {{"source", ArgType::kString, "SOURCE", "Branch, commit, prefix, REF~N or REF^N to merge in"},
            kInto,
            {"message", ArgType::kString, "-m,--message", "Message of the merge Commit"},
            {"ff_only", ArgType::kBool, "--ff-only", "Refuse unless the branch can fast-forward"},
            {"no_ff", ArgType::kBool, "--no-ff", "Make a merge Commit even when a fast-forward is possible"},
            {"strategy", ArgType::kString, "-s,--strategy", "ours or theirs: that side's whole tree is the merge's"},
            kFavor,
            {"continue", ArgType::kBool, "--continue", "Commit a stopped merge once its conflicts are resolved"},
            {"abort", ArgType::kBool, "--abort", "Put the Workspace back as it was before a stopped merge"}};
  v.run = [](Context& ctx, const Args& a, json* result) { return RunMerge(ctx, FromArgs("merge", a), result); };
  v.text = MergeText;
  return v;
}

}  // namespace

void AddMergeVerbs(std::vector<Verb>* out) {
  out->push_back(Merge());
  out->push_back(Pick("cherry_pick", "cherry-pick", "Apply the change a Commit made onto a branch, as a new Commit"));
  out->push_back(Pick("revert", "revert", "Undo the change a Commit made, as a new Commit on a branch"));
}

}  // namespace layerfs::cli
