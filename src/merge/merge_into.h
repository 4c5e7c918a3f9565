// MergeInto: a merge brought onto a Branch (docs/design.md, "Merge"), the library call behind
// `layerfs merge`: a typed outcome the CLI renders as text or JSON.
//
// - Into the Store only (no live Workspace): the branch moves to the merge Commit (or
//   fast-forwards) in one synced batch; on conflicts nothing changes and they are reported.
// - Into a live Workspace (a mounted branch, or one with uncommitted changes): the Workspace
//   changes in place through Workspace::Apply, refused with nothing changed if a path the merge
//   touches has an uncommitted change. A clean merge is committed with the ref move in the same
//   batch (uncommitted changes elsewhere stay uncommitted). On conflicts, only a mounted
//   Workspace takes the result as uncommitted changes with conflict files and keeps a merge
//   record; ContinueMerge commits it with two parents once resolved, AbortMerge puts every
//   touched path back.
// Thread-safe as Store and Workspace are.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "merge/merge.h"
#include "workspace/workspace.h"

namespace layerfs::merge {

enum class FastForward { kAllow, kOnly, kNever };
// Whole-tree strategies: three-way (default), or one side's tree as the merge's (-s ours|theirs).
enum class Strategy { kThreeWay, kOurs, kTheirs };

struct MergeIntoOptions {
  ObjectId source;          // the Commit merged in
  std::string source_label; // how the user named it (messages, conflict markers)
  std::string branch;
  std::string message;      // empty: "merge SOURCE into BRANCH"
  FastForward ff = FastForward::kAllow;
  Strategy strategy = Strategy::kThreeWay;
  Favor favor = Favor::kNone;
  // The branch's live Workspace, or null to merge in the Store alone.
  workspace::Workspace* ws = nullptr;
  // Conflicts stay in `ws` for resolution (a mount); otherwise nothing changes on conflicts.
  bool keep_conflicts = false;
};

struct MergeOutcome {
  std::optional<ObjectId> commit;  // the branch's new head (or its head when up to date)
  bool fast_forward = false, up_to_date = false;
  bool stopped = false;            // conflicts left in the Workspace for resolution
  ObjectId ours, theirs;
  std::vector<ObjectId> bases;
  std::vector<Conflict> conflicts;
};

Result<MergeOutcome> MergeInto(Store& store, const MergeIntoOptions& opts);

// Cherry-pick: the change `commit` made (against its parent) applied onto the branch as a new
// Commit with one parent and `commit`'s message; revert: the inverse change. Both are tree merges
// (base: the parent, theirs: the commit; reversed for a revert) brought onto the branch as
// MergeInto does, stopping on conflicts the same way. A merge Commit is refused.
struct PickOptions {
  ObjectId commit;
  std::string label;   // how the user named it
  std::string branch;
  bool revert = false;
  Favor favor = Favor::kNone;
  workspace::Workspace* ws = nullptr;
  bool keep_conflicts = false;
};
Result<MergeOutcome> Pick(Store& store, const PickOptions& opts);

// FORMAT: the operation a merge record belongs to; never renumber.
enum class MergeOp : uint8_t { kMerge = 0, kCherryPick = 1, kRevert = 2 };

// The merge a Workspace is in the middle of (stopped on conflicts).
struct MergeState {
  MergeOp op = MergeOp::kMerge;
  ObjectId pending;  // a Commit (root: the merged tree with conflict files; parents: ours, theirs)
  ObjectId ours, theirs;
  std::string source_label, message;
  std::vector<ObjectId> bases;
  std::vector<Conflict> conflicts;
};
Result<std::optional<MergeState>> ReadMergeState(workspace::Workspace& ws);
std::string EncodeMergeState(const MergeState& s);
Result<MergeState> DecodeMergeState(std::string_view rec);

// A path of a stopped merge that is not resolved yet, and why.
struct Unresolved {
  std::string path, why;
};
Result<std::vector<Unresolved>> UnresolvedPaths(workspace::Workspace& ws, const MergeState& s);

// Commits the resolved merge with parents ours and theirs (EBUSY naming what is unresolved:
// a file still holding conflict markers, a side file still there).
Result<MergeOutcome> ContinueMerge(Store& store, workspace::Workspace& ws, const std::string& message);
// Puts every path the merge touched back as it was before it, and forgets the merge.
Status AbortMerge(Store& store, workspace::Workspace& ws);

}  // namespace layerfs::merge
