// Pull: fetch, then bring REMOTE/BRANCH into the local branch with the merge machinery
// (merge/merge_into.h): a fast-forward when the branch is behind, a merge when they diverged,
// through the branch's Workspace when it is mounted or holds uncommitted changes.
#include "history/keys.h"
#include "history/store_impl.h"
#include "merge/merge_into.h"
#include "remote/sync.h"
#include "workspace/registry.h"
#include "workspace/workspace.h"

namespace layerfs::remote {

Result<PullResult> Pull(Store& store, const WorkspaceAccess& wsa, const std::string& remote_name,
                        const std::string& branch, const FetchOptions& opts) {
  if (!history::ValidBranchName(branch)) return Status::Invalid(fmt::format("invalid branch name '{}'", branch));
  PullResult res;
  res.branch = branch;
  LFS_ASSIGN(res.fetch, Fetch(store, remote_name, opts));
  LFS_ASSIGN(auto theirs_v, store.kv().Get(kv::Cf::kMeta, history::RemoteRefKey(remote_name, branch)));
  if (!theirs_v || theirs_v->size() != ObjectId::kSize)
    return Status::NotFound(fmt::format("remote '{}' has no branch '{}'", remote_name, branch));
  const ObjectId theirs = ObjectId::FromKey(*theirs_v);
  res.new_id = theirs;
  LFS_ASSIGN(res.old_id, store.BranchHead(branch));
  if (!res.old_id) {
    LFS_TRY(store.CasBranch(branch, std::nullopt, theirs));
    res.status = "created";
    return res;
  }
  // A mounted branch, or one whose Workspace holds uncommitted changes (or a stopped merge),
  // takes the update through its Workspace; otherwise the Store alone, and a Workspace left
  // behind follows the branch.
  std::string mountpoint;
  if (wsa.mounted) {
    LFS_ASSIGN(mountpoint, wsa.mounted(branch));
  }
  std::shared_ptr<workspace::Workspace> ws;
  bool live = !mountpoint.empty();
  if (wsa.registry) {
    LFS_ASSIGN(bool has_ws, workspace::HasWorkspace(store, branch));
    if (has_ws || live) {
      LFS_ASSIGN(ws, wsa.registry->Get(branch));
      if (!live) {
        LFS_ASSIGN(auto merging, merge::ReadMergeState(*ws));
        LFS_ASSIGN(auto changes, ws->Changes());
        live = merging.has_value() || !changes.empty();
      }
    }
  }
  merge::MergeIntoOptions mo;
  mo.source = theirs;
  mo.source_label = remote_name + "/" + branch;
  mo.branch = branch;
  mo.ws = live ? ws.get() : nullptr;
  mo.keep_conflicts = !mountpoint.empty();
  LFS_ASSIGN(auto out, merge::MergeInto(store, mo));
  if (!live && ws && out.commit && !out.up_to_date) LFS_TRY(ws->Reset(std::nullopt));
  if (ws && mountpoint.empty()) {
    ws.reset();
    wsa.registry->Release(branch);
  }
  res.through_workspace = live;
  res.conflicts = std::move(out.conflicts);
  res.stopped = out.stopped;
  if (out.up_to_date) {
    res.new_id = *res.old_id;
    res.status = *res.old_id == theirs ? "up-to-date" : "ahead";
  } else if (out.fast_forward) {
    res.status = "fast-forward";
  } else if (out.commit) {
    res.status = "merged";
    res.new_id = *out.commit;
  } else {
    res.status = "conflicts";
  }
  return res;
}

}  // namespace layerfs::remote
