// MergeBases, IsAncestor and MergeCommits (criss-cross histories through a virtual base).
//
// The walk is Git's paint_down_to_common: commits come off a queue newest first; each carries the
// sides (one, two) that reach it; a commit reached from both is a candidate, and everything below
// it is stale. The walk stops when only stale commits are queued. Commit times order the walk, so
// a clock far out of step can make it stop early, exactly as in Git without generation numbers.
#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "merge/merge.h"
#include "objects/tree.h"

namespace layerfs::merge {

namespace {

constexpr uint8_t kOne = 1, kTwo = 2, kStale = 4, kResult = 8;
constexpr int kMaxVirtualDepth = 16;

struct Walker {
  Store& store;
  std::unordered_map<ObjectId, CommitInfo, ObjectIdHash> commits;
  std::unordered_map<ObjectId, uint8_t, ObjectIdHash> flags;

  Result<const CommitInfo*> Get(const ObjectId& id) {
    auto it = commits.find(id);
    if (it != commits.end()) return &it->second;
    LFS_ASSIGN(auto c, store.GetCommit(id));
    return &commits.emplace(id, std::move(c)).first->second;
  }

  // Candidates reached from both sides, newest first (some may be ancestors of others).
  Result<std::vector<ObjectId>> Paint(const std::vector<ObjectId>& one, const std::vector<ObjectId>& two) {
    using Item = std::tuple<int64_t, uint32_t, ObjectId>;
    std::vector<Item> heap;  // max-heap: newest first
    auto push = [&](const ObjectId& id) -> Status {
      LFS_ASSIGN(const CommitInfo* c, Get(id));
      heap.emplace_back(c->time_sec, c->time_nsec, id);
      std::push_heap(heap.begin(), heap.end());
      return Status::Ok();
    };
    // Git's interesting(): some queued commit is not yet below a common one. The queue is the
    // walk's frontier, a few commits wide in the usual shapes.
    auto interesting = [&] {
      for (const auto& it : heap)
        if (!(flags[std::get<2>(it)] & kStale)) return true;
      return false;
    };
    for (const auto& id : one) {
      flags[id] |= kOne;
      LFS_TRY(push(id));
    }
    for (const auto& id : two) {
      flags[id] |= kTwo;
      LFS_TRY(push(id));
    }
    std::vector<ObjectId> result;
    while (!heap.empty() && interesting()) {
      std::pop_heap(heap.begin(), heap.end());
      ObjectId id = std::get<2>(heap.back());
      heap.pop_back();
      uint8_t f = flags[id] & (kOne | kTwo | kStale);
      if (f == (kOne | kTwo)) {
        if (!(flags[id] & kResult)) {
          flags[id] |= kResult;
          result.push_back(id);
        }
        f |= kStale;
      }
      LFS_ASSIGN(const CommitInfo* c, Get(id));
      std::vector<ObjectId> parents = c->parents;
      for (const auto& p : parents) {
        if ((flags[p] & f) == f) continue;
        flags[p] |= f;
        LFS_TRY(push(p));
      }
    }
    std::vector<ObjectId> out;
    for (const auto& id : result)
      if (!(flags[id] & kStale)) out.push_back(id);
    return out;
  }
};

}  // namespace

Result<std::vector<ObjectId>> MergeBases(Store& store, const std::vector<ObjectId>& one,
                                         const std::vector<ObjectId>& two) {
  for (const auto& a : one)
    for (const auto& b : two)
      if (a == b) return std::vector<ObjectId>{a};
  Walker w{store, {}, {}};
  LFS_ASSIGN(auto cands, w.Paint(one, two));
  if (cands.size() <= 1) return cands;
  // Drop a candidate that is an ancestor of another (Git's remove_redundant).
  std::vector<bool> redundant(cands.size());
  for (size_t i = 0; i < cands.size(); i++) {
    for (size_t j = 0; j < cands.size(); j++) {
      if (i == j || redundant[i] || redundant[j]) continue;
      LFS_ASSIGN(bool anc, IsAncestor(store, cands[i], cands[j]));
      if (anc) redundant[i] = true;
    }
  }
  std::vector<ObjectId> out;
  for (size_t i = 0; i < cands.size(); i++)
    if (!redundant[i]) out.push_back(cands[i]);
  return out;
}

Result<bool> IsAncestor(Store& store, const ObjectId& ancestor, const ObjectId& commit) {
  if (ancestor == commit) return true;
  Walker w{store, {}, {}};
  LFS_ASSIGN(auto cands, w.Paint({ancestor}, {commit}));
  return std::find(cands.begin(), cands.end(), ancestor) != cands.end();
}

Result<ObjectId> EmptyTree(Store& store, objects::Txn* txn) {
  LFS_ASSIGN(auto put, store.objects().Put(objects::Kind::kTree, objects::EncodeTree({}), std::nullopt, txn));
  return put.id;
}

namespace {

// The tree of the (virtual) base of `bases`: one base's own tree, or the bases merged pairwise
// oldest first, each pair against the virtual base of their own bases.
Result<ObjectId> BaseTree(Store& store, std::vector<ObjectId> bases, objects::Txn* txn, int depth) {
  if (bases.empty()) return EmptyTree(store, txn);
  if (bases.size() == 1) {
    LFS_ASSIGN(auto c, store.GetCommit(bases[0]));
    return c.root;
  }
  if (depth > kMaxVirtualDepth)
    return Status::Error(ELOOP, "criss-cross history too deep to build a virtual merge base");
  std::reverse(bases.begin(), bases.end());  // oldest first, as Git merges them
  LFS_ASSIGN(auto first, store.GetCommit(bases[0]));
  ObjectId tree = first.root;
  std::vector<ObjectId> merged = {bases[0]};
  TreeMergeOptions o;
  o.virtual_base = true;
  o.our_label = "Temporary merge branch 1";
  o.their_label = "Temporary merge branch 2";
  for (size_t i = 1; i < bases.size(); i++) {
    LFS_ASSIGN(auto inner, MergeBases(store, merged, {bases[i]}));
    LFS_ASSIGN(ObjectId inner_tree, BaseTree(store, inner, txn, depth + 1));
    LFS_ASSIGN(auto next, store.GetCommit(bases[i]));
    LFS_ASSIGN(auto m, MergeTrees(store, inner_tree, tree, next.root, o, txn));
    tree = m.root;
    merged.push_back(bases[i]);
  }
  return tree;
}

}  // namespace

Result<CommitMerge> MergeCommits(Store& store, const ObjectId& ours, const ObjectId& theirs,
                                 const TreeMergeOptions& opts, objects::Txn* txn) {
  CommitMerge out;
  LFS_ASSIGN(out.bases, MergeBases(store, {ours}, {theirs}));
  if (out.bases.empty())
    return Status::NotFound(fmt::format("commits {} and {} have no common ancestor", ours.Hex().substr(0, 12),
                                        theirs.Hex().substr(0, 12)));
  LFS_ASSIGN(out.base_tree, BaseTree(store, out.bases, txn, 0));
  LFS_ASSIGN(auto o, store.GetCommit(ours));
  LFS_ASSIGN(auto t, store.GetCommit(theirs));
  LFS_ASSIGN(out.tree, MergeTrees(store, out.base_tree, o.root, t.root, opts, txn));
  return out;
}

}  // namespace layerfs::merge
