// Store::Diff: compares two Commits' trees, skipping subtrees whose ids are equal.
#include <algorithm>
#include <functional>

#include "history/keys.h"
#include "layerfs/store.h"
#include "objects/tree.h"

namespace layerfs {

namespace {

bool SameContent(const TreeEntry& a, const TreeEntry& b) {
  if (a.type == EntryType::kSymlink) return a.target == b.target;
  if (a.type == EntryType::kFile) return a.id == b.id && a.size == b.size && a.chunked == b.chunked;
  if (a.type == EntryType::kChar || a.type == EntryType::kBlock) return a.rdev == b.rdev;
  return true;
}

bool SameAttrs(const TreeEntry& a, const TreeEntry& b) {
  return a.mode == b.mode && a.uid == b.uid && a.gid == b.gid && a.xattrs == b.xattrs;
}

}  // namespace

Result<std::vector<DiffEntry>> Store::Diff(const ObjectId& a, const ObjectId& b) {
  LFS_ASSIGN(auto ca, GetCommit(a));
  LFS_ASSIGN(auto cb, GetCommit(b));
  return DiffTrees(ca.root, cb.root);
}

Result<std::vector<DiffEntry>> Store::DiffParent(const CommitInfo& c) {
  if (c.parents.empty()) return DiffTrees(std::nullopt, c.root);
  LFS_ASSIGN(auto parent, GetCommit(c.parents[0]));
  return DiffTrees(parent.root, c.root);
}

Result<std::vector<DiffEntry>> Store::DiffTrees(const std::optional<ObjectId>& root_a, const ObjectId& root_b,
                                                objects::Txn* txn) {
  std::vector<DiffEntry> out;
  // Emits every path below a directory that exists on one side only.
  auto too_deep = [](const std::string& prefix) {
    return static_cast<size_t>(std::count(prefix.begin(), prefix.end(), '/')) > objects::kMaxTreeDepth
               ? Status::Corrupt(fmt::format("{}: directories nested deeper than {}", prefix, objects::kMaxTreeDepth))
               : Status::Ok();
  };
  std::function<Status(const std::string&, const ObjectId&, char, bool)> one_side =
      [&](const std::string& prefix, const ObjectId& tree, char change, bool before) -> Status {
    LFS_TRY(too_deep(prefix));
    LFS_ASSIGN(auto entries, ReadTree(tree, txn));
    for (auto& e : entries) {
      std::string p = prefix + e.name;
      DiffEntry d{p, change, std::nullopt, std::nullopt};
      (before ? d.before : d.after) = e;
      out.push_back(std::move(d));
      if (e.type == EntryType::kDir) LFS_TRY(one_side(p + "/", e.id, change, before));
    }
    return Status::Ok();
  };
  std::function<Status(const std::string&, const ObjectId&, const ObjectId&)> walk =
      [&](const std::string& prefix, const ObjectId& ta, const ObjectId& tb) -> Status {
    if (ta == tb) return Status::Ok();
    LFS_TRY(too_deep(prefix));
    LFS_ASSIGN(auto ea, ReadTree(ta, txn));
    LFS_ASSIGN(auto eb, ReadTree(tb, txn));
    size_t i = 0, j = 0;
    while (i < ea.size() || j < eb.size()) {
      int cmp = i == ea.size() ? 1 : j == eb.size() ? -1 : ea[i].name.compare(eb[j].name);
      if (cmp < 0) {
        std::string p = prefix + ea[i].name;
        out.push_back({p, 'D', ea[i], std::nullopt});
        if (ea[i].type == EntryType::kDir) LFS_TRY(one_side(p + "/", ea[i].id, 'D', true));
        i++;
      } else if (cmp > 0) {
        std::string p = prefix + eb[j].name;
        out.push_back({p, 'A', std::nullopt, eb[j]});
        if (eb[j].type == EntryType::kDir) LFS_TRY(one_side(p + "/", eb[j].id, 'A', false));
        j++;
      } else {
        const TreeEntry &x = ea[i], &y = eb[j];
        std::string p = prefix + x.name;
        if (x.type != y.type) {
          out.push_back({p, 'T', x, y});
          if (x.type == EntryType::kDir) LFS_TRY(one_side(p + "/", x.id, 'D', true));
          if (y.type == EntryType::kDir) LFS_TRY(one_side(p + "/", y.id, 'A', false));
        } else if (x.type == EntryType::kDir) {
          if (!SameAttrs(x, y)) out.push_back({p, 'P', x, y});
          LFS_TRY(walk(p + "/", x.id, y.id));
        } else if (!SameContent(x, y)) {
          out.push_back({p, 'M', x, y});
        } else if (!SameAttrs(x, y)) {
          out.push_back({p, 'P', x, y});
        }
        i++;
        j++;
      }
    }
    return Status::Ok();
  };
  if (root_a) LFS_TRY(walk("", *root_a, root_b));
  else LFS_TRY(one_side("", root_b, 'A', false));
  return out;
}

}  // namespace layerfs
