// Pull: fetch, then fast-forward a local branch to its remote-tracking ref, through its
// Workspace when it has one; uncommitted changes the update does not touch are carried over.
#include <array>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "history/keys.h"
#include "history/store_impl.h"
#include "objects/object_store.h"
#include "objects/tree.h"
#include "remote/sync.h"
#include "workspace/registry.h"
#include "workspace/workspace.h"

namespace layerfs::remote {

using objects::Kind;

namespace {

bool SameEntry(const TreeEntry& a, const TreeEntry& b) {
  return a.name == b.name && a.type == b.type && a.mode == b.mode && a.uid == b.uid && a.gid == b.gid &&
         a.size == b.size && a.subtree_entries == b.subtree_entries && a.mtime_sec == b.mtime_sec &&
         a.mtime_nsec == b.mtime_nsec && a.rdev == b.rdev && a.link_group == b.link_group &&
         a.chunked == b.chunked && a.id == b.id && a.target == b.target && a.xattrs == b.xattrs;
}

bool SameAttrs(const TreeEntry& a, const TreeEntry& b) {
  return a.mode == b.mode && a.uid == b.uid && a.gid == b.gid && a.mtime_sec == b.mtime_sec &&
         a.mtime_nsec == b.mtime_nsec && a.xattrs == b.xattrs;
}

// Merges changes made on two sides of `base` that touch different paths (the uncommitted
// changes of a Workspace and the update a pull brings). A path changed on both sides is a
// conflict: EBUSY naming it. This is not a merge: anything but disjoint changes is refused.
class DisjointMerge {
 public:
  explicit DisjointMerge(Store& store) : store_(store) {}

  // Trees by id (zero id: no tree). Returns the merged tree and its sums.
  Result<ObjectId> Merge(const ObjectId& base, const ObjectId& ours, const ObjectId& theirs, const std::string& path,
                         int depth, uint64_t* bytes, uint64_t* entries) {
    if (depth > history::kMaxTreeDepth) return Status::Corrupt("trees nested too deep");
    LFS_ASSIGN(auto b, Read(base));
    LFS_ASSIGN(auto o, Read(ours));
    LFS_ASSIGN(auto t, Read(theirs));
    std::map<std::string, std::array<const TreeEntry*, 3>> names;
    for (const auto& e : b) names[e.name][0] = &e;
    for (const auto& e : o) names[e.name][1] = &e;
    for (const auto& e : t) names[e.name][2] = &e;
    std::vector<TreeEntry> out;
    *bytes = *entries = 0;
    for (auto& [name, es] : names) {
      const TreeEntry *eb = es[0], *eo = es[1], *et = es[2];
      auto same = [](const TreeEntry* x, const TreeEntry* y) { return (!x && !y) || (x && y && SameEntry(*x, *y)); };
      std::string p = path.empty() ? name : path + "/" + name;
      const TreeEntry* pick = nullptr;
      bool take = true;
      if (same(eo, eb)) pick = et;        // only theirs changed (or nobody)
      else if (same(et, eb)) pick = eo;   // only ours changed
      else if (same(eo, et)) pick = eo;   // both made the same change
      else if (eo && et && eo->type == EntryType::kDir && et->type == EntryType::kDir &&
               (!eb || eb->type == EntryType::kDir)) {
        // Both changed inside: merge below, attributes from the side that changed them.
        TreeEntry e = *eo;
        if (eb && SameAttrs(*eo, *eb)) e = *et;
        else if (eb && !SameAttrs(*et, *eb) && !SameAttrs(*eo, *et)) return Conflict(p);
        LFS_ASSIGN(e.id, Merge(eb ? eb->id : ObjectId{}, eo->id, et->id, p, depth + 1, &e.size, &e.subtree_entries));
        out.push_back(std::move(e));
        take = false;
      } else {
        return Conflict(p);
      }
      if (take) {
        if (!pick) continue;  // removed
        // Hard-link groups are numbered per tree; mixing two trees' numbers could join files.
        if (pick->link_group && !same(eo, et)) return Conflict(p);
        out.push_back(*pick);
      }
    }
    for (const auto& e : out) {
      *entries += 1 + (e.type == EntryType::kDir ? e.subtree_entries : 0);
      *bytes += e.type == EntryType::kSymlink ? 0 : e.size;
    }
    LFS_ASSIGN(auto put, store_.objects().Put(Kind::kTree, objects::EncodeTree(out), std::nullopt, &txn_));
    return put.id;
  }

  Status Write() {
    kv::Batch b;
    store_.objects().TakeBatch(&b, &txn_);
    return store_.kv().Write(b, false);
  }

 private:
  Result<std::vector<TreeEntry>> Read(const ObjectId& tree) {
    if (tree.IsZero()) return std::vector<TreeEntry>();
    return store_.ReadTree(tree, &txn_);
  }
  static Status Conflict(const std::string& path) {
    return Status::Errorf(EBUSY, "uncommitted changes to '{}' would be overwritten by the update; commit or reset them first",
                          path);
  }

  Store& store_;
  objects::Txn txn_;
};

}  // namespace

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
  const ObjectId ours = *res.old_id;
  if (ours == theirs) {
    res.status = "up-to-date";
    return res;
  }
  LFS_ASSIGN(bool behind, IsAncestor(store, ours, theirs));
  if (!behind) {
    LFS_ASSIGN(bool ahead, IsAncestor(store, theirs, ours));
    if (ahead) {
      res.new_id = ours;
      res.status = "ahead";
      return res;
    }
    return Status::Error(kNotFastForward, fmt::format("branch '{}' and {}/{} have diverged; pull only fast-forwards "
                                                      "(merge them, or reset --hard {}/{})",
                                                      branch, remote_name, branch, remote_name, branch));
  }
  res.status = "fast-forward";
  LFS_ASSIGN(bool has_ws, workspace::HasWorkspace(store, branch));
  if (!has_ws || !wsa.registry) {
    LFS_TRY(store.CasBranch(branch, ours, theirs));
    if (wsa.registry) wsa.registry->Drop(branch);
    return res;
  }
  LFS_ASSIGN(auto ws, wsa.registry->Get(branch));
  if (ws->base_commit() != ours)
    return Status::Errorf(EBUSY, "branch '{}': its workspace is based on another commit; commit or reset it first", branch);
  auto run = [&](const std::function<Status()>& fn) {
    return wsa.with_unmounted ? wsa.with_unmounted(branch, fn) : fn();
  };
  LFS_ASSIGN(auto changes, ws->Changes());
  if (changes.empty()) {
    LFS_TRY(run([&] { return ws->Reset(theirs); }));
    res.workspace = "reset";
    return res;
  }
  // Uncommitted changes: carried if the update touches none of their paths.
  std::shared_lock gc_pin(store.gc_mutex());  // the stored tree is unreferenced until Rebase
  LFS_ASSIGN(ObjectId mine, ws->StoreTree());
  LFS_ASSIGN(auto c_ours, store.GetCommit(ours));
  LFS_ASSIGN(auto c_theirs, store.GetCommit(theirs));
  DisjointMerge merge(store);
  uint64_t bytes = 0, entries = 0;
  LFS_ASSIGN(ObjectId merged, merge.Merge(c_ours.root, mine, c_theirs.root, "", 0, &bytes, &entries));
  LFS_TRY(merge.Write());
  LFS_TRY(run([&] { return ws->Rebase(ours, theirs, merged); }));
  res.workspace = "carried";
  res.carried = changes.size();
  return res;
}

}  // namespace layerfs::remote
