// Merge: three-way merge of Commits on LayerFS's own objects (docs/design.md, "Merge").
//
// Three pieces over history, each usable alone:
// - MergeBases: the best common ancestors of two sets of Commits, as Git's merge-base computes
//   them (a walk newest-first by commit time, painting each commit with the sides that reach it,
//   until only commits below a common one are left; then candidates that reach another are dropped).
// - MergeTrees: walks base, ours and theirs together and opens a directory only when it differs
//   on both sides from the base (never when it is identical on both sides or unchanged on one),
//   so the cost follows the change, not the tree. Files renamed on one side (merge/renames.h)
//   take the other side's changes to them at their new path. Text files changed on both sides are merged
//   line by line by libgit2 (git_merge_file); everything else is decided per entry. Results and
//   conflict files are staged in a caller's Txn; nothing is written.
// - MergeCommits: bases, a virtual base for criss-cross histories (the bases merged pairwise,
//   recursively, as Git's recursive/ort strategies do), then the tree merge.
// Applying a result to a Branch (its Store ref, a live Workspace, conflicts in a mount) is
// merge/merge_into.h. Thread-safe as the Store is; a Txn has one owner.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "layerfs/store.h"
#include "objects/object_store.h"

namespace layerfs::merge {

// FORMAT: persisted in the merge record of a Workspace (docs/format.md); never renumber.
enum class ConflictKind : uint8_t {
  kContent = 1,       // a text file changed on both sides in overlapping lines: markers in PATH
  kBinary = 2,        // a binary file changed on both sides: PATH is ours, sides PATH~ours/~theirs
  kModifyDelete = 3,  // changed on one side, deleted on the other: PATH holds the changed one
  kAddAdd = 4,        // added on both sides with different content: markers, or sides if binary
  kType = 5,          // the two sides made different kinds of entry: sides, or the dir at PATH
  kAttributes = 6,    // both sides changed one attribute (mode, owner, an xattr) differently
  kSymlink = 7,       // a symlink (or device) retargeted differently on both sides: sides
  kRenameDelete = 8,  // renamed on one side, deleted on the other: the renamed file at its new path
  kRenameRename = 9,  // renamed to different paths on the two sides: both new paths (one conflict each)
};
const char* ConflictKindName(ConflictKind k);

struct Conflict {
  std::string path;
  ConflictKind kind = ConflictKind::kContent;
  std::optional<TreeEntry> base, ours, theirs;
  std::vector<std::string> sides;  // side files written beside PATH (paths from the root)
};

// How a conflict of any kind is settled without a human (-X ours|theirs): content conflicts
// take that side's hunks; every other kind takes that side's entry.
enum class Favor : uint8_t { kNone = 0, kOurs = 1, kTheirs = 2 };

struct TreeMergeOptions {
  Favor favor = Favor::kNone;
  std::string our_label = "ours", their_label = "theirs";
  // Merging bases into a virtual base: conflicts are resolved in place (text keeps its markers,
  // anything else takes the base's or ours' version) and never reported.
  bool virtual_base = false;
};

struct TreeMergeResult {
  ObjectId root;
  uint64_t bytes = 0, entries = 0;  // file bytes and entries in the merged tree
  std::vector<Conflict> conflicts;  // sorted by path
};

// Merges `theirs` into `ours` against `base` (tree ids; a zero id is the empty tree). The merged
// tree, its new file contents and conflict files are staged in `txn`.
Result<TreeMergeResult> MergeTrees(Store& store, const ObjectId& base, const ObjectId& ours, const ObjectId& theirs,
                                   const TreeMergeOptions& opts, objects::Txn* txn);

// The best common ancestors of `one` and `two` (Commit ids), newest first; empty if their
// histories never meet.
Result<std::vector<ObjectId>> MergeBases(Store& store, const std::vector<ObjectId>& one,
                                         const std::vector<ObjectId>& two);
// True if `ancestor` is `commit` or reachable from it through parents.
Result<bool> IsAncestor(Store& store, const ObjectId& ancestor, const ObjectId& commit);

struct CommitMerge {
  std::vector<ObjectId> bases;  // best common ancestors, newest first
  ObjectId base_tree;           // of the one base, or the virtual base of several
  TreeMergeResult tree;
};
// The three-way merge of two Commits' trees (criss-cross histories through a virtual base).
// ENOENT-coded error if they have no common ancestor.
Result<CommitMerge> MergeCommits(Store& store, const ObjectId& ours, const ObjectId& theirs,
                                 const TreeMergeOptions& opts, objects::Txn* txn);

// The id of the empty tree in `store` (staged in `txn` if new).
Result<ObjectId> EmptyTree(Store& store, objects::Txn* txn);

}  // namespace layerfs::merge
