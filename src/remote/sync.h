// Push, fetch, pull and clone: the library calls behind the remote verbs (docs/design.md,
// "Remotes"). Each returns a typed result the verbs render as text and as JSON (their --json and
// the daemon protocol's result). Long transfers report through `progress`. Thread-safe as the
// Store is: several may run at once (in the daemon, beside live mounts).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "layerfs/progress.h"
#include "layerfs/store.h"
#include "merge/merge.h"

namespace layerfs::workspace {
class WorkspaceRegistry;
}

namespace layerfs::remote {

// One branch's outcome. Push: "created", "fast-forward", "forced", "up-to-date", "rejected".
// Fetch: "new", "updated", "forced", "deleted", "unchanged".
struct RefUpdate {
  std::string branch;
  std::optional<ObjectId> old_id, new_id;
  std::string status;
  std::string reason;  // why a branch was rejected
  bool lost_race = false;  // rejected because the remote branch moved during the push (ESTALE)
};

struct TransferStats {
  uint64_t objects = 0, bytes = 0, packs = 0, indexes = 0;
  double seconds = 0;
};

struct PushOptions {
  std::vector<std::string> branches;  // at least one
  bool force = false;
  ProgressFn progress;
};
struct PushResult {
  std::string remote, url;
  std::vector<RefUpdate> refs;
  TransferStats sent;
  bool all_ok() const;
};
// Sends what the remote lacks for `branches` and moves each remote branch by compare-and-swap.
// Fails only when nothing could be attempted (no such remote or branch, remote unreachable,
// another history); a refused branch is in the result (status "rejected").
Result<PushResult> Push(Store& store, const std::string& remote, const PushOptions& opts);

struct FetchOptions {
  ProgressFn progress;
};
struct FetchResult {
  std::string remote, url;
  bool lazy = false;  // refs and indexes only; objects come on first read
  std::vector<RefUpdate> refs;
  TransferStats received;
};
Result<FetchResult> Fetch(Store& store, const std::string& remote, const FetchOptions& opts);

// How pull reaches a branch's Workspace and its mount (the daemon's, or the CLI's own).
struct WorkspaceAccess {
  workspace::WorkspaceRegistry* registry = nullptr;
  // The branch's mountpoint once what the kernel holds for it is flushed; "" when not mounted.
  std::function<Result<std::string>(const std::string& branch)> mounted;
};
struct PullResult {
  FetchResult fetch;
  std::string branch;
  std::optional<ObjectId> old_id;
  ObjectId new_id;
  // "created", "fast-forward", "merged", "up-to-date", "ahead" (the branch already has it all),
  // "conflicts" (the merge was not made; with `stopped`, left in the mount to resolve).
  std::string status;
  bool through_workspace = false;  // moved through its Workspace (mounted or with changes)
  std::vector<merge::Conflict> conflicts;
  bool stopped = false;
};
// Fetches, then brings REMOTE/BRANCH into `branch` as `layerfs merge` does: a fast-forward, or a
// merge of diverged histories, through the Workspace when it is mounted or has uncommitted
// changes (refused with EBUSY, nothing changed, if the update touches a path changed there).
Result<PullResult> Pull(Store& store, const WorkspaceAccess& ws, const std::string& remote,
                        const std::string& branch, const FetchOptions& opts);

struct CloneOptions {
  bool lazy = false;
  std::string remote_name = "origin";
  ProgressFn progress;
};
struct CloneResult {
  std::string store, url;
  bool lazy = false;
  bool empty_remote = false;  // the remote had no history: the Store starts its own
  std::vector<std::pair<std::string, ObjectId>> branches;
  FetchResult fetch;
};
// Creates the Store at `path` (absent or empty) from the remote at `url`; removes what it made
// if it fails.
Result<CloneResult> Clone(const std::string& url, const std::string& path, const CloneOptions& opts);

// Tests: packs close at `bytes` instead of kPackTarget (0 restores it).
void SetPackTargetForTesting(size_t bytes);

// True if `ancestor` is `descendant` or reachable from it through parents.
Result<bool> IsAncestor(Store& store, const ObjectId& ancestor, const ObjectId& descendant);

}  // namespace layerfs::remote
