// MergeTrees: the three-way walk of base, ours and theirs.
//
// Per name, with B, O, T the entries (or none) on each side and "same" meaning same type,
// content and attributes (mtime and link groups are not compared, as in Diff):
//   O same as T -> O;  B same as O -> T;  B same as T -> O  (a subtree is taken whole, unopened)
//   otherwise both changed: directories merge below (opened only now); files merge content and
//   attributes separately; anything else is a conflict of its kind (merge/merge.h).
#include <algorithm>
#include <map>
#include <set>

#include "history/file_content.h"
#include "merge/file_merge.h"
#include "merge/merge.h"
#include "merge/renames.h"
#include "objects/tree.h"

namespace layerfs::merge {

const char* ConflictKindName(ConflictKind k) {
  switch (k) {
    case ConflictKind::kContent: return "content";
    case ConflictKind::kBinary: return "binary";
    case ConflictKind::kModifyDelete: return "modify/delete";
    case ConflictKind::kAddAdd: return "add/add";
    case ConflictKind::kType: return "type";
    case ConflictKind::kAttributes: return "attributes";
    case ConflictKind::kSymlink: return "symlink";
    case ConflictKind::kRenameDelete: return "rename/delete";
    case ConflictKind::kRenameRename: return "rename/rename";
  }
  return "?";
}

namespace {

using Opt = std::optional<TreeEntry>;

bool SameContent(const TreeEntry& a, const TreeEntry& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case EntryType::kFile: return a.id == b.id && a.size == b.size && a.chunked == b.chunked;
    case EntryType::kDir: return a.id == b.id;
    case EntryType::kSymlink: return a.target == b.target;
    case EntryType::kChar:
    case EntryType::kBlock: return a.rdev == b.rdev;
    default: return true;
  }
}

bool SameAttrs(const TreeEntry& a, const TreeEntry& b) {
  return a.mode == b.mode && a.uid == b.uid && a.gid == b.gid && a.xattrs == b.xattrs;
}

bool Same(const Opt& a, const Opt& b) {
  if (!a || !b) return !a && !b;
  return SameContent(*a, *b) && SameAttrs(*a, *b);
}

bool IsDir(const Opt& e) { return e && e->type == EntryType::kDir; }

// One attribute merged three ways; false when both sides changed it differently (ours is kept).
template <typename T>
bool Merge3(const T* base, const T& ours, const T& theirs, T* out) {
  if (ours == theirs) *out = ours;
  else if (base && *base == ours) *out = theirs;
  else if (base && *base == theirs) *out = ours;
  else {
    *out = ours;
    return false;
  }
  return true;
}

struct Sums {
  uint64_t bytes = 0, entries = 0;
  TreeEntry summary;  // the merged tree's summary (objects::SummarizeDir), for its entry
};

// The merged tree's sums into its entry.
void SetSums(const Sums& s, TreeEntry* r) {
  r->size = s.bytes;
  r->subtree_entries = s.entries;
  r->summary = s.summary.summary;
  r->subdirs = s.summary.subdirs;
  r->links_below = s.summary.links_below;
}

// What the renames of both sides ask of the walk (see PlanRenames).
struct RenamePlan {
  enum Kind { kMove, kBoth, kRenameDelete, kRenameRename };
  struct At {
    Kind kind = kMove;
    bool by_ours = true;  // kMove, kRenameDelete: the side that renamed
    Opt base;             // the base's entry at the old path (named as the new one)
    Opt other;            // kMove: the other side's entry at the old path (named as the new one)
  };
  std::set<std::string> moved_from;  // old paths whose other side's entry moved with the rename
  std::map<std::string, Opt> split_from;  // old paths renamed to different new paths on the two sides
  std::map<std::string, At> at;      // new paths
  std::set<std::string> dirs;        // directories holding a new path: always opened
  bool empty() const { return at.empty() && split_from.empty(); }
};

class Merger {
 public:
  Merger(Store& st, const TreeMergeOptions& o, objects::Txn* txn) : st_(st), o_(o), txn_(txn) {}

  RenamePlan plan;

  // Merges directories (a missing side is an empty directory). Returns the tree id.
  Result<ObjectId> MergeDir(const std::string& prefix, const Opt& b, const Opt& o, const Opt& t, Sums* sums);

  std::vector<Conflict> conflicts;

 private:
  struct Side {
    size_t conflict;     // index in conflicts
    TreeEntry entry;     // named as wanted; renamed if the name is taken
  };
  Result<std::vector<TreeEntry>> List(const Opt& dir) {
    if (!IsDir(dir)) return std::vector<TreeEntry>();
    return st_.ReadTree(dir->id, txn_);
  }
  // One name: what the rename plan asks at this path, else MergeEntries.
  Status MergeName(const std::string& prefix, const Opt& b, const Opt& o, const Opt& t,
                   std::vector<TreeEntry>* out, std::vector<Side>* sides);
  Status MergeRenamed(const std::string& path, const RenamePlan::At& at, const Opt& b, const Opt& o, const Opt& t,
                      std::vector<TreeEntry>* out, std::vector<Side>* sides);
  Status MergeEntries(const std::string& prefix, const Opt& b, const Opt& o, const Opt& t,
                      std::vector<TreeEntry>* out, std::vector<Side>* sides);
  Status MergeFiles(const std::string& path, const Opt& b, const TreeEntry& o, const TreeEntry& t,
                    std::vector<TreeEntry>* out, std::vector<Side>* sides);
  // Attributes of `o` merged with `t`'s against `b`; false if one conflicted.
  bool MergeAttrs(const Opt& b, const TreeEntry& o, const TreeEntry& t, TreeEntry* out);
  size_t AddConflict(const std::string& path, ConflictKind kind, const Opt& b, const Opt& o, const Opt& t) {
    conflicts.push_back({path, kind, b, o, t, {}});
    return conflicts.size() - 1;
  }
  void AddSides(size_t c, const TreeEntry& o, const TreeEntry& t, std::vector<Side>* sides) {
    for (auto [e, suffix] : {std::pair{&o, "~ours"}, std::pair{&t, "~theirs"}}) {
      if (e->type == EntryType::kDir) continue;
      TreeEntry s = *e;
      s.name += suffix;
      s.link_group = 0;
      sides->push_back({c, std::move(s)});
    }
  }
  Result<std::string> Content(const TreeEntry& e) {
    return history::ReadContent(st_.objects(), e.id, e.chunked, txn_);
  }

  Store& st_;
  const TreeMergeOptions& o_;
  objects::Txn* txn_;
};

bool Merger::MergeAttrs(const Opt& b, const TreeEntry& o, const TreeEntry& t, TreeEntry* out) {
  bool ok = true;
  ok &= Merge3(b ? &b->mode : nullptr, o.mode, t.mode, &out->mode);
  ok &= Merge3(b ? &b->uid : nullptr, o.uid, t.uid, &out->uid);
  ok &= Merge3(b ? &b->gid : nullptr, o.gid, t.gid, &out->gid);
  // Extended attributes one name at a time.
  std::map<std::string, std::string> bx, ox(o.xattrs.begin(), o.xattrs.end()), tx(t.xattrs.begin(), t.xattrs.end());
  if (b) bx.insert(b->xattrs.begin(), b->xattrs.end());
  std::set<std::string> names;
  for (auto* m : {&bx, &ox, &tx})
    for (const auto& [k, v] : *m) names.insert(k);
  out->xattrs.clear();
  for (const auto& k : names) {
    auto get = [&](const std::map<std::string, std::string>& m) {
      auto it = m.find(k);
      return it == m.end() ? std::optional<std::string>() : std::optional<std::string>(it->second);
    };
    std::optional<std::string> bv = get(bx), v;
    ok &= Merge3(b ? &bv : nullptr, get(ox), get(tx), &v);
    if (v) out->xattrs.emplace_back(k, *v);
  }
  if (!ok && o_.favor == Favor::kTheirs) {
    out->mode = t.mode;
    out->uid = t.uid;
    out->gid = t.gid;
    out->xattrs = t.xattrs;
  }
  return ok || o_.favor != Favor::kNone || o_.virtual_base;
}

Status Merger::MergeFiles(const std::string& path, const Opt& b, const TreeEntry& o, const TreeEntry& t,
                          std::vector<TreeEntry>* out, std::vector<Side>* sides) {
  TreeEntry r = o;
  r.link_group = 0;
  const bool attrs_ok = MergeAttrs(b, o, t, &r);
  const TreeEntry* content = nullptr;  // a side whose content is the result
  if (SameContent(o, t)) content = &o;
  else if (b && SameContent(*b, o)) content = &t;
  else if (b && SameContent(*b, t)) content = &o;
  std::optional<ConflictKind> conflict;
  if (!content) {
    const ConflictKind kind = b ? ConflictKind::kContent : ConflictKind::kAddAdd;
    std::string bb;
    if (b) {
      LFS_ASSIGN(bb, Content(*b));
    }
    LFS_ASSIGN(std::string ob, Content(o));
    LFS_ASSIGN(std::string tb, Content(t));
    FileMergeInput in{bb, ob, tb, o_.our_label, o_.their_label, static_cast<int>(o_.favor), o_.virtual_base};
    auto m = MergeText(in);
    if (!m.ok() && m.status().code() != EINVAL) return m.status();
    if (!m.ok()) {
      // Binary: never merged by lines. Settled by the favoured side, or in a virtual base by the
      // base's version; otherwise ours stays at PATH and both sides go beside it.
      if (o_.favor == Favor::kTheirs) content = &t;
      else if (o_.favor == Favor::kOurs) content = &o;
      else if (o_.virtual_base) content = b ? &*b : &o;
      else {
        content = &o;
        size_t c = AddConflict(path, b ? ConflictKind::kBinary : ConflictKind::kAddAdd, b, o, t);
        AddSides(c, o, t, sides);
        conflict = conflicts[c].kind;
      }
    } else {
      LFS_ASSIGN(auto stored, history::WriteContent(st_.objects(), m->content, &o, txn_));
      r.id = stored.id;
      r.chunked = stored.chunked;
      r.size = m->content.size();
      if (std::tie(t.mtime_sec, t.mtime_nsec) > std::tie(r.mtime_sec, r.mtime_nsec)) {
        r.mtime_sec = t.mtime_sec;
        r.mtime_nsec = t.mtime_nsec;
      }
      if (!m->clean && !o_.virtual_base) {
        AddConflict(path, kind, b, o, t);
        conflict = kind;
      }
    }
  }
  if (content) {
    r.id = content->id;
    r.chunked = content->chunked;
    r.size = content->size;
    r.mtime_sec = content->mtime_sec;
    r.mtime_nsec = content->mtime_nsec;
  }
  if (!attrs_ok && !conflict) AddConflict(path, ConflictKind::kAttributes, b, o, t);
  out->push_back(std::move(r));
  return Status::Ok();
}

Status Merger::MergeName(const std::string& prefix, const Opt& b, const Opt& o, const Opt& t,
                         std::vector<TreeEntry>* out, std::vector<Side>* sides) {
  if (!plan.empty()) {
    const std::string path = prefix + (o ? o->name : t ? t->name : b->name);
    if (plan.moved_from.count(path)) return Status::Ok();  // went with the rename
    if (auto it = plan.split_from.find(path); it != plan.split_from.end()) {
      // Renamed apart: nothing stays at the old path, reported as Git does (with both new paths).
      if (o || t) return MergeEntries(prefix, b, o, t, out, sides);
      if (o_.favor == Favor::kNone && !o_.virtual_base) AddConflict(path, ConflictKind::kRenameRename, it->second, o, t);
      return Status::Ok();
    }
    if (auto it = plan.at.find(path); it != plan.at.end()) return MergeRenamed(path, it->second, b, o, t, out, sides);
    const bool dirs_only = (!b || IsDir(b)) && (!o || IsDir(o)) && (!t || IsDir(t));
    if (plan.dirs.count(path) && dirs_only && (o || t)) {
      // A directory on the way to a new path: opened even when one side left it alone.
      TreeEntry r = o ? *o : *t;
      bool attrs_ok = o && t ? MergeAttrs(b, *o, *t, &r) : true;
      Sums s;
      LFS_ASSIGN(r.id, MergeDir(path + "/", b, o, t, &s));
      if (s.entries == 0 && !(o && t) && b) return Status::Ok();  // deleted on one side, nothing left
      SetSums(s, &r);
      if (!attrs_ok) AddConflict(path, ConflictKind::kAttributes, b, o, t);
      out->push_back(std::move(r));
      return Status::Ok();
    }
  }
  return MergeEntries(prefix, b, o, t, out, sides);
}

Status Merger::MergeRenamed(const std::string& path, const RenamePlan::At& at, const Opt& b, const Opt& o,
                            const Opt& t, std::vector<TreeEntry>* out, std::vector<Side>* sides) {
  const std::string prefix = path.substr(0, path.size() - (o ? o->name : t ? t->name : b->name).size());
  switch (at.kind) {
    case RenamePlan::kMove:
      // The renaming side's file against the base's and the other side's at the old path.
      return at.by_ours ? MergeEntries(prefix, at.base, o, at.other, out, sides)
                        : MergeEntries(prefix, at.base, at.other, t, out, sides);
    case RenamePlan::kBoth:
      return MergeEntries(prefix, at.base, o, t, out, sides);
    case RenamePlan::kRenameDelete:
    case RenamePlan::kRenameRename: {
      // Renamed on one side and deleted (or renamed elsewhere) on the other: the renamed file
      // stays at its new path, a conflict unless a side is favoured.
      const Opt& kept = o ? o : t;
      if (!kept) return Status::Ok();
      const bool ours_kept = o.has_value();
      if (o_.favor != Favor::kNone && !o_.virtual_base) {
        if ((o_.favor == Favor::kOurs) == ours_kept) out->push_back(*kept);
        return Status::Ok();
      }
      out->push_back(*kept);
      if (!o_.virtual_base) {
        AddConflict(path, at.kind == RenamePlan::kRenameDelete ? ConflictKind::kRenameDelete : ConflictKind::kRenameRename,
                    at.base, o, t);
      }
      return Status::Ok();
    }
  }
  return Status::Ok();
}

Status Merger::MergeEntries(const std::string& prefix, const Opt& b, const Opt& o, const Opt& t,
                            std::vector<TreeEntry>* out, std::vector<Side>* sides) {
  if (Same(o, t)) {
    if (o) out->push_back(*o);
    return Status::Ok();
  }
  if (Same(b, o)) {
    if (t) out->push_back(*t);
    return Status::Ok();
  }
  if (Same(b, t)) {
    if (o) out->push_back(*o);
    return Status::Ok();
  }
  const std::string path = prefix + (o ? o->name : t ? t->name : b->name);
  if (o && t) {
    if (IsDir(o) && IsDir(t)) {
      TreeEntry r = *o;
      bool attrs_ok = MergeAttrs(IsDir(b) ? b : Opt(), *o, *t, &r);
      if (o->id == t->id || (IsDir(b) && b->id == t->id)) {
        // Contents as ours: r keeps ours' id and sums.
      } else if (IsDir(b) && b->id == o->id) {
        r.id = t->id;
        r.size = t->size;
        r.subtree_entries = t->subtree_entries;
        r.summary = t->summary;
        r.subdirs = t->subdirs;
        r.links_below = t->links_below;
      } else {
        Sums s;
        LFS_ASSIGN(r.id, MergeDir(path + "/", IsDir(b) ? b : Opt(), o, t, &s));
        SetSums(s, &r);
      }
      if (!attrs_ok) AddConflict(path, ConflictKind::kAttributes, b, o, t);
      out->push_back(std::move(r));
      return Status::Ok();
    }
    if (!IsDir(o) && !IsDir(t) && o->type == t->type) {
      const Opt base = b && b->type == o->type ? b : Opt();
      if (o->type == EntryType::kFile) return MergeFiles(path, base, *o, *t, out, sides);
      // Symlinks and devices: the target (or device number) is their content.
      TreeEntry r = *o;
      bool attrs_ok = MergeAttrs(base, *o, *t, &r);
      const TreeEntry* content = nullptr;
      if (SameContent(*o, *t) || (base && SameContent(*base, *t))) content = &*o;
      else if (base && SameContent(*base, *o)) content = &*t;
      else if (o_.favor == Favor::kTheirs) content = &*t;
      else if (o_.favor == Favor::kOurs || o_.virtual_base) content = &*o;
      r.target = (content ? content : &*o)->target;
      r.rdev = (content ? content : &*o)->rdev;
      r.size = (content ? content : &*o)->size;
      if (!content) AddSides(AddConflict(path, base ? ConflictKind::kSymlink : ConflictKind::kAddAdd, b, o, t), *o, *t, sides);
      else if (!attrs_ok) AddConflict(path, ConflictKind::kAttributes, b, o, t);
      out->push_back(std::move(r));
      return Status::Ok();
    }
    // Different kinds of entry.
    if (o_.favor != Favor::kNone || o_.virtual_base) {
      out->push_back(o_.favor == Favor::kTheirs ? *t : *o);
      return Status::Ok();
    }
    size_t c = AddConflict(path, ConflictKind::kType, b, o, t);
    if (IsDir(o) || IsDir(t)) {
      // The directory stays at PATH; the other entry goes beside it.
      const TreeEntry& dir = IsDir(o) ? *o : *t;
      const TreeEntry& other = IsDir(o) ? *t : *o;
      out->push_back(dir);
      TreeEntry s = other;
      s.name += IsDir(o) ? "~theirs" : "~ours";
      s.link_group = 0;
      sides->push_back({c, std::move(s)});
    } else {
      out->push_back(*o);
      AddSides(c, *o, *t, sides);
    }
    return Status::Ok();
  }
  // One side deleted what the other changed.
  const bool ours_kept = o.has_value();
  const TreeEntry& kept = ours_kept ? *o : *t;
  if (IsDir(b) && kept.type == EntryType::kDir) {
    // A directory deleted on one side and changed inside on the other: merged below, with the
    // deleted side empty, so unchanged entries go and changed ones conflict one by one.
    Sums s;
    TreeEntry r = kept;
    LFS_ASSIGN(r.id, MergeDir(path + "/", b, ours_kept ? o : Opt(), ours_kept ? Opt() : t, &s));
    if (s.entries == 0) return Status::Ok();
    SetSums(s, &r);
    out->push_back(std::move(r));
    return Status::Ok();
  }
  if (o_.favor != Favor::kNone) {
    const Opt& pick = o_.favor == Favor::kOurs ? o : t;
    if (pick) out->push_back(*pick);
    return Status::Ok();
  }
  out->push_back(kept);
  if (!o_.virtual_base) AddConflict(path, ConflictKind::kModifyDelete, b, o, t);
  return Status::Ok();
}

Result<ObjectId> Merger::MergeDir(const std::string& prefix, const Opt& b, const Opt& o, const Opt& t, Sums* sums) {
  if (static_cast<size_t>(std::count(prefix.begin(), prefix.end(), '/')) > objects::kMaxTreeDepth)
    return Status::Corrupt(fmt::format("{}: directories nested deeper than {}", prefix, objects::kMaxTreeDepth));
  LFS_ASSIGN(auto bl, List(b));
  LFS_ASSIGN(auto ol, List(o));
  LFS_ASSIGN(auto tl, List(t));
  std::vector<TreeEntry> out;
  std::vector<Side> sides;
  size_t i = 0, j = 0, k = 0;
  while (i < bl.size() || j < ol.size() || k < tl.size()) {
    const std::string* name = nullptr;
    for (auto* e : {i < bl.size() ? &bl[i].name : nullptr, j < ol.size() ? &ol[j].name : nullptr,
                    k < tl.size() ? &tl[k].name : nullptr})
      if (e && (!name || *e < *name)) name = e;
    const std::string n = *name;
    Opt eb, eo, et;
    if (i < bl.size() && bl[i].name == n) eb = std::move(bl[i++]);
    if (j < ol.size() && ol[j].name == n) eo = std::move(ol[j++]);
    if (k < tl.size() && tl[k].name == n) et = std::move(tl[k++]);
    LFS_TRY(MergeName(prefix, eb, eo, et, &out, &sides));
  }
  // Side files take their wanted name, or that name with ~N when it is taken.
  std::set<std::string> taken;
  for (const auto& e : out) taken.insert(e.name);
  for (auto& s : sides) {
    std::string name = s.entry.name;
    for (int n = 1; taken.count(name) || !objects::ValidName(name); n++) {
      name = s.entry.name.substr(0, 240) + "~" + std::to_string(n);
    }
    taken.insert(name);
    s.entry.name = name;
    conflicts[s.conflict].sides.push_back(prefix + name);
    out.push_back(std::move(s.entry));
  }
  std::sort(out.begin(), out.end(), [](const TreeEntry& x, const TreeEntry& y) { return x.name < y.name; });
  for (const auto& e : out) {
    sums->entries += 1 + (e.type == EntryType::kDir ? e.subtree_entries : 0);
    if (e.type == EntryType::kFile || e.type == EntryType::kDir) sums->bytes += e.size;
  }
  objects::SummarizeDir(out, &sums->summary);
  std::optional<ObjectId> delta_base;
  if (IsDir(o)) delta_base = o->id;
  LFS_ASSIGN(auto put, st_.objects().Put(objects::Kind::kTree, objects::EncodeTree(out), delta_base, txn_));
  return put.id;
}

std::string BaseNameOf(const std::string& path) {
  auto s = path.rfind('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

// The entry at `path` below tree `root`, or none.
Result<Opt> EntryAt(Store& st, const ObjectId& root, const std::string& path, objects::Txn* txn) {
  ObjectId dir = root;
  size_t pos = 0;
  while (true) {
    const size_t slash = path.find('/', pos);
    const std::string name = path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    LFS_ASSIGN(auto entries, st.ReadTree(dir, txn));
    auto it = std::lower_bound(entries.begin(), entries.end(), name,
                               [](const TreeEntry& e, const std::string& n) { return e.name < n; });
    if (it == entries.end() || it->name != name) return Opt();
    if (slash == std::string::npos) return Opt(std::move(*it));
    if (it->type != EntryType::kDir) return Opt();
    dir = it->id;
    pos = slash + 1;
  }
}

// Files of the base deleted on one side (or replaced by something else) and changed or deleted on
// the other: the only sources whose renames change the merge. Walks only directories that differ
// from the base on both sides, as the merge does.
Status RelevantSources(Store& st, const std::string& prefix, const Opt& b, const Opt& o, const Opt& t,
                       objects::Txn* txn, std::set<std::string>* from_ours, std::set<std::string>* from_theirs) {
  auto list = [&](const Opt& d) -> Result<std::vector<TreeEntry>> {
    if (!IsDir(d)) return std::vector<TreeEntry>();
    return st.ReadTree(d->id, txn);
  };
  LFS_ASSIGN(auto bl, list(b));
  LFS_ASSIGN(auto ol, list(o));
  LFS_ASSIGN(auto tl, list(t));
  auto find = [](const std::vector<TreeEntry>& l, const std::string& n) {
    auto it = std::lower_bound(l.begin(), l.end(), n, [](const TreeEntry& e, const std::string& x) { return e.name < x; });
    return it != l.end() && it->name == n ? Opt(*it) : Opt();
  };
  for (const auto& be : bl) {
    const Opt eb(be), eo = find(ol, be.name), et = find(tl, be.name);
    if (Same(eb, eo) || Same(eb, et)) continue;
    const std::string path = prefix + be.name;
    if (be.type == EntryType::kDir) {
      LFS_TRY(RelevantSources(st, path + "/", eb, eo, et, txn, from_ours, from_theirs));
    } else if (be.type == EntryType::kFile) {
      if (!eo || eo->type != EntryType::kFile) from_ours->insert(path);
      if (!et || et->type != EntryType::kFile) from_theirs->insert(path);
    }
  }
  return Status::Ok();
}

// What the renames of each side ask of the walk. A file renamed on one side from P to Q:
// - the other side changed P (content or attributes) and has nothing at Q: the merge happens at
//   Q between the base's P, the renaming side's Q and the other side's P, and P goes;
// - the other side deleted P: rename/delete at Q; renamed it to Q too: merged at Q against the
//   base's P; renamed it elsewhere: rename/rename at both new paths;
// - the other side left P alone, or has its own Q: nothing to do (by path is already right).
Status PlanRenames(Store& st, const ObjectId& ours, const ObjectId& theirs, const std::vector<Rename>& ro,
                   const std::vector<Rename>& rt, objects::Txn* txn, RenamePlan* plan) {
  auto named = [](TreeEntry e, const std::string& path) {
    e.name = BaseNameOf(path);
    e.link_group = 0;
    return Opt(std::move(e));
  };
  auto add_dirs = [&](const std::string& path) {
    for (size_t p = path.find('/'); p != std::string::npos; p = path.find('/', p + 1)) plan->dirs.insert(path.substr(0, p));
  };
  auto add = [&](const std::string& to, RenamePlan::At at) {
    add_dirs(to);
    plan->at[to] = std::move(at);
  };
  for (const bool by_ours : {true, false}) {
    const auto& mine = by_ours ? ro : rt;
    const auto& others = by_ours ? rt : ro;
    const ObjectId& other_tree = by_ours ? theirs : ours;
    std::map<std::string, const Rename*> other_from;
    for (const auto& r : others) other_from[r.from] = &r;
    for (const auto& r : mine) {
      if (auto it = other_from.find(r.from); it != other_from.end()) {
        if (it->second->to == r.to) {
          if (by_ours) add(r.to, {RenamePlan::kBoth, true, named(r.before, r.to), Opt()});
        } else {
          add(r.to, {RenamePlan::kRenameRename, by_ours, named(r.before, r.to), Opt()});
          plan->split_from[r.from] = Opt(r.before);
          add_dirs(r.from);
        }
        continue;
      }
      LFS_ASSIGN(Opt at_from, EntryAt(st, other_tree, r.from, txn));
      if (!at_from) {
        add(r.to, {RenamePlan::kRenameDelete, by_ours, named(r.before, r.to), Opt()});
        continue;
      }
      if (at_from->type != EntryType::kFile || Same(at_from, Opt(r.before))) continue;
      LFS_ASSIGN(Opt at_to, EntryAt(st, other_tree, r.to, txn));
      if (at_to) continue;
      plan->moved_from.insert(r.from);
      add(r.to, {RenamePlan::kMove, by_ours, named(r.before, r.to), named(*at_from, r.to)});
    }
  }
  return Status::Ok();
}

}  // namespace

Result<TreeMergeResult> MergeTrees(Store& store, const ObjectId& base, const ObjectId& ours, const ObjectId& theirs,
                                   const TreeMergeOptions& opts, objects::Txn* txn) {
  auto root = [](const ObjectId& id) {
    TreeEntry e;
    e.type = EntryType::kDir;
    e.id = id;
    return id.IsZero() ? Opt() : Opt(e);
  };
  Merger m(store, opts, txn);
  TreeMergeResult out;
  Sums s;
  const bool whole = ours == theirs || base == theirs || base == ours;
  if (ours == theirs || base == theirs) {
    out.root = ours;
  } else if (base == ours) {
    out.root = theirs;
  } else {
    if (!base.IsZero()) {
      std::set<std::string> from_ours, from_theirs;
      LFS_TRY(RelevantSources(store, "", root(base), root(ours), root(theirs), txn, &from_ours, &from_theirs));
      std::vector<Rename> ro, rt;
      if (!from_ours.empty()) {
        LFS_ASSIGN(ro, FindRenames(store, base, ours, txn, &from_ours));
      }
      if (!from_theirs.empty()) {
        LFS_ASSIGN(rt, FindRenames(store, base, theirs, txn, &from_theirs));
      }
      if (!ro.empty() || !rt.empty()) LFS_TRY(PlanRenames(store, ours, theirs, ro, rt, txn, &m.plan));
    }
    LFS_ASSIGN(out.root, m.MergeDir("", root(base), root(ours), root(theirs), &s));
  }
  if (whole) {
    // A tree taken whole: its entries carry their subtrees' sums.
    LFS_ASSIGN(auto entries, store.ReadTree(out.root, txn));
    for (const auto& e : entries) {
      s.entries += 1 + (e.type == EntryType::kDir ? e.subtree_entries : 0);
      if (e.type == EntryType::kFile || e.type == EntryType::kDir) s.bytes += e.size;
    }
  }
  out.bytes = s.bytes;
  out.entries = s.entries;
  out.conflicts = std::move(m.conflicts);
  std::sort(out.conflicts.begin(), out.conflicts.end(),
            [](const Conflict& a, const Conflict& b) { return a.path < b.path; });
  return out;
}

}  // namespace layerfs::merge
