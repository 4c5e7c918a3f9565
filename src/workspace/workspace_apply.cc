// Workspace::Apply: a merge's changes made in place, in one batch (docs/design.md, "Merge").
//
// Three passes under commit_mu_ and mu_: materialise the directories on the changed paths (its
// own writes, which change nothing visible); check that every path is still as in the base
// Commit (unless forced); then build one batch: entries replaced, removed or placed, files of the
// same kind updated in place (same inode, new origin: an open file reads the new bytes), new
// directories placed unmaterialised over the target's subtree (counter-numbered), and, for a
// committed target, the directories on the paths given the target's subtrees as origins. Users
// are told (InvalidationSink) once the locks are gone.
#include <algorithm>
#include <map>
#include <set>

#include "history/keys.h"
#include "workspace/workspace.h"
#include "workspace/workspace_impl.h"

namespace layerfs::workspace {

namespace {

std::vector<std::string> Split(std::string_view path) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    if (end > pos) out.emplace_back(path.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

std::string Parent(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

std::string Base(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool SameAttrs(const Inode& n, const TreeEntry& e) {
  return n.type == e.type && n.perm == (e.mode & 07777) && n.uid == e.uid && n.gid == e.gid && n.xattrs == e.xattrs;
}

// The inode holds exactly the entry (attributes and content; mtime and link groups aside).
bool Holds(const Inode& n, const TreeEntry& e) {
  if (!SameAttrs(n, e)) return false;
  switch (e.type) {
    case EntryType::kFile:
      return !n.has_blocks && n.size == e.size &&
             (e.size == 0 || (n.has_origin && n.origin == e.id && n.valid_len >= e.size));
    case EntryType::kSymlink: return n.target == e.target;
    case EntryType::kChar:
    case EntryType::kBlock: return n.rdev == e.rdev;
    default: return true;
  }
}

struct Notice {
  bool entry;
  Ino ino;
  std::string name;
};

class Applier {
 public:
  Applier(Workspace::Impl* im, const ApplyRequest& req) : im_(im), req_(req) {}

  Status Run(std::vector<Notice>* notices);

 private:
  enum class Action { kRemove, kPlace, kUpdate, kDirAttrs };
  static Action ActionOf(const DiffEntry& d) {
    if (!d.after) return Action::kRemove;
    if (!d.before || d.before->type != d.after->type) return Action::kPlace;
    return d.after->type == EntryType::kDir ? Action::kDirAttrs : Action::kUpdate;
  }
  // The diff entries to act on: those below a directory removed or placed whole are covered.
  std::vector<const DiffEntry*> Acting() const {
    std::vector<const DiffEntry*> out;
    std::string skip;
    for (const auto& d : req_.diff) {
      if (!skip.empty() && d.path.compare(0, skip.size(), skip) == 0) continue;
      skip.clear();
      out.push_back(&d);
      Action a = ActionOf(d);
      const bool dir = (d.before && d.before->type == EntryType::kDir) || (d.after && d.after->type == EntryType::kDir);
      if ((a == Action::kRemove || a == Action::kPlace) && dir) skip = d.path + "/";
    }
    return out;
  }
  Result<Inode*> Get(Ino ino) {
    auto it = inodes_.find(ino);
    if (it != inodes_.end()) return &it->second;
    LFS_ASSIGN(Inode n, im_->Load(ino));
    return &inodes_.emplace(ino, std::move(n)).first->second;
  }
  // The directory at `path`, or 0 if a component is missing or not a directory. `materialize`:
  // materialise each on the way (pass one); otherwise they must be already.
  Result<Ino> Dir(const std::string& path, bool materialize);
  // The target tree's entry at `path` (the root is a directory entry of the target root).
  Result<std::optional<TreeEntry>> Target(const std::string& path);
  // Every entry below `ino` (a directory) is as in `tree`.
  Result<bool> CleanBelow(Ino ino, const ObjectId& tree);
  Status Check(const DiffEntry& d);
  Status Remove(Inode* parent, const std::string& name, Ino child);
  Status Place(Inode* parent, const std::string& name, const TreeEntry& e);
  void Update(Inode* n, const TreeEntry& e);
  void Changed(Inode* n) {
    notices_.push_back({false, n->ino, {}});
    if (!req_.new_base) im_->MarkDirty(&b_, n->ino);
  }
  void EntryChanged(Inode* parent, const std::string& name) {
    notices_.push_back({true, parent->ino, name});
    parent->mtime = parent->ctime = now_;
    Changed(parent);
  }

  Workspace::Impl* im_;
  const ApplyRequest& req_;
  kv::Batch b_;
  std::map<Ino, Inode> inodes_;  // loaded and changed; written at the end
  // Entries removed so far: the Kv, read until the batch is written, still holds them.
  std::set<std::pair<Ino, std::string>> removed_;
  std::map<std::string, Ino> dirs_;  // resolved directories by path
  std::map<std::string, std::vector<TreeEntry>> target_dirs_;
  ObjectId target_root_;
  std::vector<Notice> notices_;
  timespec now_ = Now();
};
}  // namespace

Result<Ino> Applier::Dir(const std::string& path, bool materialize) {
  if (auto it = dirs_.find(path); it != dirs_.end()) return it->second;
  Ino cur = kRootIno;
  std::string at;
  for (const auto& name : Split(path)) {
    LFS_ASSIGN(Inode* d, Get(cur));
    if (!d->materialized) {
      if (!materialize) return Status::Corrupt("workspace: directory not materialised during a merge");
      LFS_TRY(im_->Materialize(d));
    }
    LFS_ASSIGN(auto e, im_->GetEntry(cur, name));
    if (!e || e->second != EntryType::kDir) return Ino(0);
    cur = e->first;
    at += (at.empty() ? "" : "/") + name;
  }
  LFS_ASSIGN(Inode* d, Get(cur));
  if (!d->materialized) {
    if (!materialize) return Status::Corrupt("workspace: directory not materialised during a merge");
    LFS_TRY(im_->Materialize(d));
  }
  dirs_[path] = cur;
  return cur;
}

Result<std::optional<TreeEntry>> Applier::Target(const std::string& path) {
  using R = std::optional<TreeEntry>;
  TreeEntry cur;
  cur.type = EntryType::kDir;
  cur.id = target_root_;
  std::string at;
  for (const auto& name : Split(path)) {
    if (cur.type != EntryType::kDir) return R();
    auto it = target_dirs_.find(at);
    if (it == target_dirs_.end()) {
      LFS_ASSIGN(auto list, im_->store_.ReadTree(cur.id));
      it = target_dirs_.emplace(at, std::move(list)).first;
    }
    auto e = std::lower_bound(it->second.begin(), it->second.end(), name,
                              [](const TreeEntry& x, const std::string& n) { return x.name < n; });
    if (e == it->second.end() || e->name != name) return R();
    cur = *e;
    at += (at.empty() ? "" : "/") + name;
  }
  return R(cur);
}

Result<bool> Applier::CleanBelow(Ino ino, const ObjectId& tree) {
  LFS_ASSIGN(Inode* d, Get(ino));
  if (!d->materialized) return d->has_origin && d->origin == tree;
  LFS_ASSIGN(auto entries, im_->ListEntries(ino));
  LFS_ASSIGN(auto want, im_->store_.ReadTree(tree));
  if (entries.size() != want.size()) return false;
  for (size_t i = 0; i < want.size(); i++) {
    if (entries[i].first != want[i].name) return false;
    LFS_ASSIGN(Inode* n, Get(entries[i].second.first));
    if (!Holds(*n, want[i])) return false;
    if (n->is_dir()) {
      LFS_ASSIGN(bool clean, CleanBelow(n->ino, want[i].id));
      if (!clean) return false;
    }
  }
  return true;
}

Status Applier::Check(const DiffEntry& d) {
  auto busy = [&] {
    return Status::Errorf(EBUSY, "uncommitted change to {} would be overwritten by the merge; commit or reset it first",
                          d.path);
  };
  LFS_ASSIGN(Ino parent, Dir(Parent(d.path), false));
  std::optional<std::pair<Ino, EntryType>> cur;
  if (parent) {
    LFS_ASSIGN(cur, im_->GetEntry(parent, Base(d.path)));
  }
  if (!d.before) return cur ? busy() : Status::Ok();
  if (!cur) return busy();
  LFS_ASSIGN(Inode* n, Get(cur->first));
  if (!Holds(*n, *d.before)) return busy();
  if (n->is_dir() && ActionOf(d) != Action::kDirAttrs) {
    LFS_ASSIGN(bool clean, CleanBelow(n->ino, d.before->id));
    if (!clean) return busy();
  }
  return Status::Ok();
}

Status Applier::Remove(Inode* parent, const std::string& name, Ino child) {
  LFS_ASSIGN(Inode* c, Get(child));
  if (c->is_dir()) {
    if (c->materialized) {
      LFS_ASSIGN(auto entries, im_->ListEntries(c->ino));
      for (const auto& [n, e] : entries) LFS_TRY(Remove(c, n, e.first));
    }
    im_->DeleteInode(&b_, *c);
    parent->nlink--;
  } else {
    LFS_TRY(im_->DropLink(&b_, c, parent->ino));
  }
  b_.Delete(kv::Cf::kWorkspace, im_->keys_.Entry(parent->ino, name));
  removed_.insert({parent->ino, name});
  // A file with another name left (a hard link) stays loaded, its link count dropped: a later
  // removal of that name starts from it, not from the Kv's count.
  if (c->is_dir() || c->nlink == 0) inodes_.erase(child);
  EntryChanged(parent, name);
  return Status::Ok();
}

Status Applier::Place(Inode* parent, const std::string& name, const TreeEntry& e) {
  Inode n;
  n.ino = im_->next_ino_++;
  n.type = e.type;
  n.parents = {parent->ino};
  n.atime = now_;
  n.ctime = now_;
  Update(&n, e);
  if (e.type == EntryType::kDir) {
    // Unmaterialised over the target's subtree; its entries are numbered from the counter when
    // first listed (their base-Commit numbers belong to other inodes).
    n.has_origin = true;
    n.origin = e.id;
    n.counter_numbered = true;
    LFS_ASSIGN(auto sub, im_->store_.ReadTree(e.id));
    n.nlink = 2;
    for (const auto& s : sub) n.nlink += s.type == EntryType::kDir;
    parent->nlink++;
  }
  b_.Put(kv::Cf::kWorkspace, im_->keys_.Entry(parent->ino, name),
         [&] {
           std::string v;
           base::PutVarint(&v, n.ino);
           base::PutU8(&v, static_cast<uint8_t>(n.type));
           return v;
         }());
  Ino ino = n.ino;
  inodes_[ino] = std::move(n);
  if (!req_.new_base) im_->MarkDirty(&b_, ino);
  EntryChanged(parent, name);
  return Status::Ok();
}

void Applier::Update(Inode* n, const TreeEntry& e) {
  n->perm = e.mode & 07777;
  n->uid = e.uid;
  n->gid = e.gid;
  n->xattrs = e.xattrs;
  n->mtime = {e.mtime_sec, static_cast<long>(e.mtime_nsec)};
  n->ctime = now_;
  if (e.type == EntryType::kFile) {
    if (n->has_blocks) im_->DeleteBlocks(&b_, *n, 0, n->size);
    n->has_blocks = n->has_refs = n->has_overlays = false;
    n->size = e.size;
    n->has_origin = !e.id.IsZero();
    n->origin = e.id;
    n->origin_chunked = e.chunked;
    n->valid_len = n->origin_size = e.size;
  } else if (e.type == EntryType::kSymlink) {
    n->target = e.target;
    n->size = e.target.size();
  } else if (e.type == EntryType::kChar || e.type == EntryType::kBlock) {
    n->rdev = e.rdev;
  }
}

Status Applier::Run(std::vector<Notice>* notices) {
  if (im_->base_ != req_.expected_base)
    return Status::Errorf(EAGAIN, "the workspace moved to {} meanwhile", im_->base_.Hex().substr(0, 12));
  {
    LFS_ASSIGN(auto c, im_->store_.GetCommit(req_.source ? *req_.source : req_.new_base ? *req_.new_base : im_->base_));
    target_root_ = c.root;
  }
  const auto acting = Acting();
  // Pass one: materialise the directories the paths go through (invisible; its own writes).
  for (const auto* d : acting) LFS_TRY(Dir(Parent(d->path), true).status());
  // Pass two: nothing changes unless every path is as the base Commit has it.
  if (!req_.force)
    for (const auto* d : acting) LFS_TRY(Check(*d));
  // Pass three: the batch.
  const uint64_t saved_next = im_->next_ino_;
  const auto saved_dirty = im_->dirty_;
  const bool saved_pristine = im_->pristine_;
  std::set<std::string> dirs_on_paths;
  for (const auto* d : acting) {
    const std::string parent_path = Parent(d->path), name = Base(d->path);
    LFS_ASSIGN(Ino parent, Dir(parent_path, false));
    if (!parent) {
      // Forced, and the user removed a directory on the way: put back the target's topmost
      // missing one whole (the paths below it are then as the target has them).
      if (!req_.force) return Status::Corrupt(fmt::format("workspace: no directory for {}", d->path));
      std::string at;
      for (const auto& comp : Split(parent_path)) {
        std::string next = at.empty() ? comp : at + "/" + comp;
        LFS_ASSIGN(Ino up, Dir(at, false));
        LFS_ASSIGN(auto e, im_->GetEntry(up, comp));
        if (!e || e->second != EntryType::kDir) {
          LFS_ASSIGN(auto te, Target(next));
          if (!te) return Status::Corrupt(fmt::format("workspace: {} is not in the target tree", next));
          LFS_ASSIGN(Inode* upn, Get(up));
          if (e) LFS_TRY(Remove(upn, comp, e->first));
          LFS_TRY(Place(upn, comp, *te));
          for (std::string p = at;; p = Parent(p)) {
            dirs_on_paths.insert(p);
            if (p.empty()) break;
          }
          break;
        }
        at = next;
      }
      continue;
    }
    for (std::string p = parent_path;; p = Parent(p)) {
      dirs_on_paths.insert(p);
      if (p.empty()) break;
    }
    LFS_ASSIGN(Inode* dir, Get(parent));
    LFS_ASSIGN(auto cur, im_->GetEntry(parent, name));
    if (cur && removed_.count({parent, name})) cur.reset();
    const Action a = ActionOf(*d);
    if (!d->after) {
      if (cur) LFS_TRY(Remove(dir, name, cur->first));
      continue;
    }
    const TreeEntry& e = *d->after;
    if (cur && cur->second == e.type && (a == Action::kUpdate || a == Action::kDirAttrs || req_.force)) {
      LFS_ASSIGN(Inode* n, Get(cur->first));
      if (e.type == EntryType::kDir) {
        if (a == Action::kDirAttrs) {
          n->perm = e.mode & 07777;
          n->uid = e.uid;
          n->gid = e.gid;
          n->xattrs = e.xattrs;
          n->ctime = now_;
          Changed(n);
          dirs_on_paths.insert(d->path);
          continue;
        }
        // Forced over a directory the target places whole: replaced below.
      } else if (n->nlink <= 1) {
        Update(n, e);
        Changed(n);
        continue;
      }
    }
    if (cur) LFS_TRY(Remove(dir, name, cur->first));
    LFS_TRY(Place(dir, name, e));
  }
  if (req_.new_base) {
    // Committed: each directory on a path takes the target's subtree as its origin, so a commit
    // that does not rebuild it names the target's tree.
    for (const auto& p : dirs_on_paths) {
      LFS_ASSIGN(Ino ino, Dir(p, false));
      if (!ino) continue;
      LFS_ASSIGN(auto te, Target(p));
      if (!te || te->type != EntryType::kDir) return Status::Corrupt(fmt::format("workspace: {} is not a directory of the target", p));
      LFS_ASSIGN(Inode* n, Get(ino));
      n->has_origin = true;
      n->origin = te->id;
      n->count_known = false;
    }
  }
  for (const auto& [ino, n] : inodes_) im_->Put(&b_, n);
  const ObjectId saved_base = im_->base_;
  if (req_.new_base) {
    im_->base_ = *req_.new_base;
    im_->pristine_ = false;
  }
  im_->PutState(&b_);
  if (req_.merge_record) {
    if (req_.merge_record->empty()) b_.Delete(kv::Cf::kWorkspace, im_->keys_.Merge());
    else b_.Put(kv::Cf::kWorkspace, im_->keys_.Merge(), *req_.merge_record);
  }
  Status s = req_.publish ? req_.publish(&b_) : im_->kv_.Write(b_, true);
  im_->SettleMarks(s.ok());
  if (!s.ok()) {
    im_->base_ = saved_base;
    im_->next_ino_ = saved_next;
    im_->dirty_ = saved_dirty;
    im_->pristine_ = saved_pristine;
    return s;
  }
  if (req_.new_base) {
    // Marks of inodes the apply replaced with committed state are gone with them; the mirror
    // keeps marks of removed inodes until the next commit drops them (workspace_impl.h).
  }
  *notices = std::move(notices_);
  return Status::Ok();
}

Status Workspace::Apply(const ApplyRequest& req) {
  if (opts_.read_only || impl_->scratch_) return Status::Error(EROFS, "read-only workspace");
  auto* im = impl_.get();
  std::vector<Notice> notices;
  {
    std::lock_guard cl(im->commit_mu_);
    auto pin = im->log_.PinSegments();
    std::lock_guard l(im->mu_);
    Applier a(im, req);
    LFS_TRY(a.Run(&notices));
  }
  im->CollectIfWanted();
  std::lock_guard sl(im->sink_mu_);
  if (im->sink_) {
    for (const auto& n : notices) {
      if (n.entry) im->sink_->EntryChanged(n.ino, n.name);
      else im->sink_->InodeChanged(n.ino);
    }
  }
  return Status::Ok();
}

void Workspace::Notify(const std::vector<Ino>& inodes, const std::vector<std::pair<Ino, std::string>>& entries) {
  std::lock_guard sl(impl_->sink_mu_);
  if (!impl_->sink_) return;
  for (const auto& [parent, name] : entries) impl_->sink_->EntryChanged(parent, name);
  for (Ino ino : inodes) impl_->sink_->InodeChanged(ino);
}

void Workspace::SetInvalidationSink(InvalidationSink* sink) {
  std::lock_guard sl(impl_->sink_mu_);
  impl_->sink_ = sink;
}

namespace {
// Path order of a tree walk: a directory, then everything below it, then its next sibling
// ("w", "w/a", "w-b"): '/' sorts before every byte a name may hold.
bool WalkOrder(const std::string& a, const std::string& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; i++) {
    const unsigned char x = a[i] == '/' ? 0 : static_cast<unsigned char>(a[i]);
    const unsigned char y = b[i] == '/' ? 0 : static_cast<unsigned char>(b[i]);
    if (x != y) return x < y;
  }
  return a.size() < b.size();
}
}  // namespace

Status Workspace::ResetInPlace(const std::optional<ObjectId>& to) {
  if (opts_.read_only || impl_->scratch_) return Status::Error(EROFS, "read-only workspace");
  Store& store = impl_->store_;
  const ObjectId base = base_commit();
  const ObjectId target = to ? *to : base;
  // What is here now at every path that may differ from the target: the uncommitted changes,
  // and, when the branch moves, the paths where the target differs from the base.
  std::map<std::string, DiffEntry, decltype(&WalkOrder)> paths(&WalkOrder);
  LFS_ASSIGN(auto changes, Changes());
  for (auto& c : changes) paths[c.path] = DiffEntry{c.path, c.change, std::move(c.after), std::nullopt};
  if (target != base) {
    LFS_ASSIGN(auto b, store.GetCommit(base));
    LFS_ASSIGN(auto t, store.GetCommit(target));
    LFS_ASSIGN(auto moved, store.DiffTrees(b.root, t.root));
    for (auto& d : moved)
      if (!paths.count(d.path)) paths[d.path] = DiffEntry{d.path, d.change, std::move(d.before), std::nullopt};
  }
  ApplyRequest req;
  for (auto& [path, d] : paths) {
    auto e = store.Lookup(target, path);
    if (e.ok()) d.after = std::move(*e);
    else if (e.status().code() != ENOENT && e.status().code() != ENOTDIR) return e.status();
    req.diff.push_back(std::move(d));
  }
  LFS_ASSIGN(auto record, MergeRecord());
  if (req.diff.empty() && !record && target == base) return Status::Ok();
  req.expected_base = base;
  req.force = true;
  req.new_base = target;
  req.merge_record = std::string();
  // Outside the `if`: the publish hook runs later, inside Apply, and reads it.
  LFS_ASSIGN(const std::optional<ObjectId> head, store.BranchHead(opts_.branch));
  if (to) req.publish = [&](kv::Batch* b) { return store.UpdateBranch(opts_.branch, head, target, b); };
  return Apply(req);
}

Result<std::vector<DiffEntry>> Workspace::Restore(const ObjectId& source, const std::vector<std::string>& under) {
  if (opts_.read_only || impl_->scratch_) return Status::Error(EROFS, "read-only workspace");
  Store& store = impl_->store_;
  for (const auto& u : under) {
    if (u.empty()) continue;  // the root
    auto e = store.Lookup(source, u);
    if (e.ok()) continue;
    if (e.status().code() != ENOENT && e.status().code() != ENOTDIR) return e.status();
    return Status::NotFound(fmt::format("{}: not in {}", u, source.Hex().substr(0, 12)));
  }
  auto selected = [&](const std::string& path) {
    for (const auto& u : under)
      if (u.empty() || path == u || (path.size() > u.size() && path.compare(0, u.size(), u) == 0 && path[u.size()] == '/'))
        return true;
    return false;
  };
  const ObjectId base = base_commit();
  // From source's tree to the Workspace's: each path's `before` is what source has.
  LFS_ASSIGN(auto changes, Changes(source));
  std::map<std::string, DiffEntry, decltype(&WalkOrder)> paths(&WalkOrder);
  for (auto& c : changes)
    if (c.before && selected(c.path)) paths[c.path] = DiffEntry{c.path, c.change, std::move(c.after), std::move(c.before)};
  std::vector<DiffEntry> restored;
  if (paths.empty()) return restored;
  ApplyRequest req;
  for (auto& [path, d] : paths) req.diff.push_back(d);
  req.expected_base = base;
  req.force = true;
  if (source == base) req.new_base = base;  // back to committed state
  else req.source = source;
  LFS_TRY(Apply(req));
  for (auto& [path, d] : paths) restored.push_back(std::move(d));
  return restored;
}

Result<std::optional<std::string>> Workspace::MergeRecord() {
  std::lock_guard l(impl_->mu_);
  return impl_->kv_.Get(kv::Cf::kWorkspace, impl_->keys_.Merge());
}

Result<Attr> Workspace::LookupPath(std::string_view path) {
  std::lock_guard l(impl_->mu_);
  Ino cur = kRootIno;
  for (const auto& name : Split(path)) {
    LFS_ASSIGN(Inode dir, impl_->LoadDir(cur));
    LFS_ASSIGN(auto e, impl_->GetEntry(cur, name));
    if (!e) return Status::NotFound(fmt::format("{}: no such file or directory", path));
    cur = e->first;
  }
  LFS_ASSIGN(Inode n, impl_->Load(cur));
  return n.ToAttr();
}

Result<std::vector<ObjectId>> MergeRoots(Store& store) {
  std::vector<ObjectId> out;
  const std::string prefix = "ws/";
  std::vector<uint64_t> ids;
  LFS_TRY(store.kv().Scan(kv::Cf::kMeta, prefix, history::PrefixEnd(prefix), [&](auto, auto v) {
    if (v.size() == 8) ids.push_back(base::GetBigEndian64(v.data()));
    return true;
  }));
  for (uint64_t id : ids) {
    LFS_ASSIGN(auto rec, store.kv().Get(kv::Cf::kWorkspace, Keys(id).Merge()));
    // FORMAT: u8 version, 16-byte pending merge Commit, then the merge's own fields.
    if (rec && rec->size() >= 1 + ObjectId::kSize) out.push_back(ObjectId::FromKey(rec->substr(1, ObjectId::kSize)));
  }
  return out;
}

}  // namespace layerfs::workspace
