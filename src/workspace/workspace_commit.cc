// Workspace::Commit, Changes and Reset.
//
// A commit reads a database snapshot: the dirty marks (inode -> generation), the inodes they
// name and those inodes' ancestors are the only directories rebuilt; every other subtree keeps
// its committed tree id. Objects are staged in a Txn; publishing (the Commit, the ref, folding
// committed blocks back into origins, clearing marks whose generation did not move) is one
// synced batch under the workspace lock, so a write lands wholly in this Commit or the next.
#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <thread>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "history/keys.h"
#include "history/similar_files.h"
#include "objects/object_source.h"
#include "objects/tree.h"
#include "workspace/workspace.h"
#include "workspace/workspace_impl.h"

namespace layerfs::workspace {

using objects::Kind;

Result<std::map<Ino, std::pair<ObjectId, bool>>> Workspace::Impl::StoreContents(std::vector<Inode> files,
                                                                                const kv::Snapshot* snap,
                                                                                objects::Txn* txn) {
  std::map<Ino, std::pair<ObjectId, bool>> out;
  auto store_one = [&](const Inode& n, objects::Txn* t) -> Result<history::StoredContent> {
    TreeEntry prev;
    prev.type = EntryType::kFile;
    prev.id = n.origin;
    prev.chunked = n.origin_chunked;
    auto read = [&](uint64_t off, size_t len) { return ReadRange(n, off, len, snap); };
    return history::WriteContentFrom(store_.objects(), n.size, read, n.has_origin ? &prev : nullptr, t);
  };
  // Files without a previous version of their own (new paths, files replaced by a new inode)
  // are stored after the others, one by one, each with a look-alike as its delta base.
  std::vector<Inode> fresh;
  std::erase_if(files, [&](Inode& n) {
    if (n.has_origin || n.parents.empty()) return false;
    fresh.push_back(std::move(n));
    return true;
  });
  LFS_TRY(StoreFreshContents(std::move(fresh), snap, txn, &out));
  uint64_t total = 0;
  for (const auto& n : files) total += n.size;
  size_t workers = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), files.size());
  if (files.empty()) return out;
  if (workers <= 1 || total < kParallelContentBytes) {
    for (const auto& n : files) {
      LFS_ASSIGN(auto c, store_one(n, txn));
      out[n.ino] = {c.id, c.chunked};
    }
    return out;
  }
  // Largest first, so the long encodings start early and the small ones fill in around them.
  std::sort(files.begin(), files.end(), [](const Inode& a, const Inode& b) { return a.size > b.size; });
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<objects::Txn> txns;
  for (size_t w = 0; w < workers; w++) txns.emplace_back(txn->dry(), txn->deferred());
  std::vector<Status> errors(workers);
  std::vector<std::vector<std::pair<Ino, history::StoredContent>>> got(workers);
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; w++) {
    threads.emplace_back([&, w] {
      for (size_t i; !failed && (i = next++) < files.size();) {
        auto c = store_one(files[i], &txns[w]);
        if (!c.ok()) {
          errors[w] = c.status();
          failed = true;
          return;
        }
        got[w].emplace_back(files[i].ino, *c);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) LFS_TRY(e);
  for (size_t w = 0; w < workers; w++) {
    store_.objects().Absorb(txn, &txns[w]);
    for (const auto& [ino, c] : got[w]) out[ino] = {c.id, c.chunked};
  }
  return out;
}

Status Workspace::Impl::StoreFreshContents(std::vector<Inode> files, const kv::Snapshot* snap, objects::Txn* txn,
                                           std::map<Ino, std::pair<ObjectId, bool>>* out) {
  if (files.empty()) return Status::Ok();
  // Each file's name in its (first) directory, and the directories' committed listings as the
  // first candidates: a name the directory held before is the path's previous version.
  history::SimilarFiles similar;
  std::vector<TreeEntry> known;  // the candidates, by SimilarFiles handle
  auto add = [&](Ino dir, const std::string& name, const TreeEntry& e) {
    if (e.type != EntryType::kFile || e.id.IsZero()) return;
    similar.Add(dir, name, e.size, e.chunked, known.size());
    known.push_back(e);
  };
  std::map<Ino, std::unordered_map<Ino, std::string>> names;  // dir -> (ino -> name)
  for (const auto& n : files) names.try_emplace(n.parents[0]);
  for (auto& [dir_ino, by_ino] : names) {
    LFS_ASSIGN(auto entries, ListEntries(dir_ino, snap));
    for (auto& [name, ref] : entries) by_ino.try_emplace(ref.first, std::move(name));
    auto dir = Load(dir_ino, snap);
    if (!dir.ok() || !dir->is_dir() || !dir->has_origin) continue;
    LFS_ASSIGN(auto old, store_.ReadTree(dir->origin, txn));
    for (const auto& e : old) add(dir_ino, e.name, e);
  }
  // In path order (directory, name), each file may take one stored before it as its base.
  std::vector<std::pair<const std::string*, Inode*>> order;
  static const std::string kUnnamed;
  for (auto& n : files) {
    const auto& by_ino = names[n.parents[0]];
    auto it = by_ino.find(n.ino);
    order.emplace_back(it == by_ino.end() ? &kUnnamed : &it->second, &n);
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->parents[0] != b.second->parents[0] ? a.second->parents[0] < b.second->parents[0]
                                                        : *a.first < *b.first;
  });
  // Hops from each content stored here to a base from before this Commit: a deferred record's
  // hint may be another pending record, finalized first, and those chains stay short.
  constexpr uint32_t kMaxHops = 64;
  std::unordered_map<ObjectId, uint32_t, ObjectIdHash> hops;
  for (const auto& entry : order) {
    const std::string* name = entry.first;
    const Inode* n = entry.second;  // not a structured binding: lambdas below capture it
    const Ino dir = n->parents[0];
    std::optional<TreeEntry> base;
    if (auto h = similar.Find(dir, *name, n->size, n->size >= history::kChunkThreshold)) base = known[*h];
    uint32_t hop = 0;
    if (base) {
      auto it = hops.find(base->id);
      hop = it == hops.end() ? 0 : it->second + 1;
      if (hop > kMaxHops) {
        base.reset();
        hop = 0;
      }
    }
    auto read = [&](uint64_t off, size_t len) { return ReadRange(*n, off, len, snap); };
    LFS_ASSIGN(auto c, history::WriteContentFrom(store_.objects(), n->size, read, base ? &*base : nullptr, txn));
    (*out)[n->ino] = {c.id, c.chunked};
    if (c.objects_added > 0 && !c.chunked) hops.try_emplace(c.id, hop);
    TreeEntry stored;
    stored.size = n->size;
    stored.id = c.id;
    stored.chunked = c.chunked;
    add(dir, *name, stored);
  }
  return Status::Ok();
}

Result<Workspace::Impl::Built> Workspace::Impl::BuildTrees(const kv::Snapshot* snap,
                                                           const std::map<Ino, uint64_t>& dirty,
                                                           objects::Txn* txn) {
  Built out;
  out.dirty = dirty;
  // Directories to rebuild: dirty directories, parents of dirty inodes, and their ancestors.
  std::set<Ino> rebuild;
  std::function<Status(Ino)> up = [&](Ino dir) -> Status {
    while (rebuild.insert(dir).second && dir != kRootIno) {
      auto n = Load(dir, snap);
      if (!n.ok() || n->parents.empty()) break;
      dir = n->parents[0];
    }
    return Status::Ok();
  };
  std::vector<Inode> changed_files;  // whose content must be stored
  for (const auto& [ino, gen] : out.dirty) {
    auto n = Load(ino, snap);
    if (!n.ok()) continue;  // removed since
    if (n->is_dir()) LFS_TRY(up(ino));
    for (Ino p : n->parents) LFS_TRY(up(p));
    if (n->type == EntryType::kFile && n->nlink > 0 &&
        (n->has_blocks || !n->has_origin || n->valid_len != n->size || n->origin_size != n->size))
      changed_files.push_back(std::move(*n));
  }
  LFS_ASSIGN(auto stored, StoreContents(std::move(changed_files), snap, txn));
  // Hard links of the base: their directories are rebuilt too, so every link group of the
  // new tree is named by a current inode (an unchanged subtree would keep the base's group
  // numbers, which another workspace's inodes may reuse).
  std::string lp = keys_.prefix() + kTagLink;
  std::vector<Ino> linked;
  LFS_TRY(kv_.Scan(kv::Cf::kWorkspace, lp, history::PrefixEnd(lp), [&](auto, auto v) {
    base::Reader r(v);
    uint64_t ino = 0;
    if (r.Varint(&ino)) linked.push_back(ino);
    return true;
  }, snap));
  for (Ino ino : linked) {
    auto n = Load(ino, snap);
    if (!n.ok() || n->is_dir()) continue;
    for (Ino p : n->parents) LFS_TRY(up(p));
  }
  std::map<Ino, std::pair<ObjectId, bool>> files_done;  // hard links: content stored once
  struct Sums {
    uint64_t bytes = 0, entries = 0;
    TreeEntry summary;  // the built tree's summary (objects::SummarizeDir), for its entry
  };
  // The directories being built, from the root down: one met again below itself is a cycle in
  // damaged records, refused at once rather than followed to kMaxTreeDepth (whose 2,048 frames
  // overflowed the stack of an ASan build: fuzz.workspace).
  std::unordered_set<Ino> on_path;
  history::SimilarTrees similar_trees;
  // `before`: for a directory without a committed listing of its own (made again after an
  // `rm -rf`, as `npm ci` does with node_modules), the listing its path had in the parent's
  // previous listing, if any: its delta base, and where its own subdirectories find theirs.
  std::function<Result<ObjectId>(const Inode&, Sums*, size_t, const std::optional<ObjectId>&)> build =
      [&](const Inode& dir, Sums* sums, size_t depth, const std::optional<ObjectId>& before) -> Result<ObjectId> {
    if (depth > objects::kMaxTreeDepth)
      return Status::Errorf(ELOOP, "directories nested deeper than {} cannot be committed", objects::kMaxTreeDepth);
    if (!on_path.insert(dir.ino).second)
      return Status::Corrupt(fmt::format("workspace: directory {} lies inside itself", dir.ino));
    struct Leave {
      std::unordered_set<Ino>& path;
      Ino ino;
      ~Leave() { path.erase(ino); }
    } leave{on_path, dir.ino};
    LFS_ASSIGN(auto entries, ListEntries(dir.ino, snap));
    std::unordered_map<ObjectId, TreeEntry, ObjectIdHash> old_sums;
    std::unordered_map<std::string, ObjectId> old_dirs;  // name -> the previous listing there
    if (dir.has_origin) {
      LFS_ASSIGN(auto old_tree, store_.ReadTree(dir.origin, txn));
      for (auto& o : old_tree) {
        if (o.type != EntryType::kDir) continue;
        old_dirs.emplace(o.name, o.id);
        old_sums[o.id] = std::move(o);
      }
    }
    // The path's previous listing is only a hint: in a lazy Store it may never have been
    // fetched, and a commit does not wait on a remote for a delta base.
    std::optional<ObjectId> path_before;
    if (!dir.has_origin && before) {
      objects::LocalOnly local;
      if (auto old_tree = store_.ReadTree(*before, txn); old_tree.ok()) {
        path_before = before;
        for (auto& o : *old_tree)
          if (o.type == EntryType::kDir) old_dirs.emplace(o.name, o.id);
      }
    }
    std::vector<TreeEntry> tree;
    tree.reserve(entries.size());
    for (const auto& [name, ref] : entries) {
      if (!objects::ValidName(name))
        return Status::Corrupt(fmt::format("workspace: directory {} holds an invalid name", dir.ino));
      LFS_ASSIGN(Inode n, Load(ref.first, snap));
      TreeEntry e;
      e.name = name;
      e.type = n.type;
      e.mode = n.perm;
      e.uid = n.uid;
      e.gid = n.gid;
      e.mtime_sec = n.mtime.tv_sec;
      e.mtime_nsec = static_cast<uint32_t>(n.mtime.tv_nsec);
      e.xattrs = n.xattrs;
      e.rdev = (n.type == EntryType::kChar || n.type == EntryType::kBlock) ? n.rdev : 0;
      e.link_group = (!n.is_dir() && n.nlink > 1) ? n.ino : 0;
      sums->entries++;
      if (n.is_dir()) {
        if (rebuild.count(n.ino) && n.materialized) {
          Sums sub;
          std::optional<ObjectId> sub_before;
          if (!n.has_origin)
            if (auto it = old_dirs.find(name); it != old_dirs.end()) sub_before = it->second;
          LFS_ASSIGN(e.id, build(n, &sub, depth + 1, sub_before));
          e.size = sub.bytes;
          e.subtree_entries = sub.entries;
          e.summary = sub.summary.summary;
          e.subdirs = sub.summary.subdirs;
          e.links_below = sub.summary.links_below;
        } else {
          // Unchanged: the sums are in the entry for that tree in the parent's committed
          // listing (found by id, so a moved directory matches too); only a directory that came
          // from elsewhere needs its own listing read.
          e.id = n.origin;
          if (auto it = old_sums.find(n.origin); it != old_sums.end()) {
            e.size = it->second.size;
            e.subtree_entries = it->second.subtree_entries;
            e.summary = it->second.summary;
            e.subdirs = it->second.subdirs;
            e.links_below = it->second.links_below;
          } else {
            LFS_ASSIGN(auto sub_tree, store_.ReadTree(n.origin, txn));
            for (const auto& s : sub_tree) {
              e.subtree_entries += 1 + (s.type == EntryType::kDir ? s.subtree_entries : 0);
              e.size += s.type == EntryType::kSymlink ? 0 : s.size;
            }
            objects::SummarizeDir(sub_tree, &e);
          }
        }
        sums->bytes += e.size;
        sums->entries += e.subtree_entries;
      } else if (n.type == EntryType::kFile) {
        e.size = n.size;
        sums->bytes += n.size;
        if (auto it = files_done.find(n.ino); it != files_done.end()) {
          e.id = it->second.first;
          e.chunked = it->second.second;
        } else if (auto it = stored.find(n.ino); it != stored.end()) {
          e.id = it->second.first;
          e.chunked = it->second.second;
          out.new_origins[n.ino] = it->second;
        } else {
          e.id = n.has_origin ? n.origin : ObjectId{};
          e.chunked = n.origin_chunked;
        }
        files_done[n.ino] = {e.id, e.chunked};
      } else if (n.type == EntryType::kSymlink) {
        e.target = n.target;
        e.size = n.target.size();
      }
      tree.push_back(std::move(e));
    }
    objects::SummarizeDir(tree, &sums->summary);
    // The directory's previous listing, else its path's, else a look-alike stored before it in
    // this Commit.
    std::optional<ObjectId> base;
    if (dir.has_origin) base = dir.origin;
    else if (path_before) base = path_before;
    else base = similar_trees.Find(tree);
    LFS_ASSIGN(auto put, store_.objects().Put(Kind::kTree, objects::EncodeTree(tree), base, txn));
    similar_trees.Add(tree, put.id, base);
    out.new_origins[dir.ino] = {put.id, false};
    return put.id;
  };
  LFS_ASSIGN(Inode root, Load(kRootIno, snap));
  if (!rebuild.count(kRootIno) || !root.materialized) {
    out.root = root.origin;
    LFS_ASSIGN(auto c, store_.GetCommit(base_));
    out.bytes = c.logical_bytes;
    out.entries = c.files;
    return out;
  }
  Sums sums;
  LFS_ASSIGN(out.root, build(root, &sums, 0, std::nullopt));
  out.bytes = sums.bytes;
  out.entries = sums.entries;
  return out;
}

Result<ObjectId> Workspace::Commit(const std::string& message, const std::vector<ObjectId>& more_parents,
                                   bool end_merge) {
  return Record(message, more_parents, end_merge, /*amend=*/false);
}

Result<ObjectId> Workspace::Amend(const std::string& message) { return Record(message, {}, false, /*amend=*/true); }

Result<ObjectId> Workspace::Record(const std::string& message, const std::vector<ObjectId>& more_parents,
                                   bool end_merge, bool amend) {
  if (opts_.read_only || impl_->scratch_) return Status::Error(EROFS, "read-only workspace");
  auto* im = impl_.get();
  Result<ObjectId> r = CommitLocked(message, more_parents, end_merge, amend);
  im->AskAgainForDroppedRefs();
  // Blocks this commit folded into history are gone from the data log's records (DeleteBlocks
  // asked for a collection): the daemon's collector frees their segments after the commit
  // returns (workspace/collector.h); without one, it is done here.
  if (r.ok() && im->log_.collect_wanted() && !im->log_.WakeCollector()) {
    Status s = CollectDataLog(im->store_);
    if (!s.ok()) spdlog::warn("data log: {}", s.message());
  }
  return r;
}

Result<ObjectId> Workspace::CommitLocked(const std::string& message, const std::vector<ObjectId>& more_parents,
                                         bool end_merge, bool amend) {
  auto* im = impl_.get();
  std::lock_guard cl(im->commit_mu_);
  std::shared_ptr<const kv::Snapshot> snap;
  std::map<Ino, uint64_t> dirty;
  ObjectId base;
  // With a background encoder running, content is stored raw and encoded after the commit
  // returns (docs/design.md, "Commits in the background").
  objects::Txn txn(/*dry=*/false, /*deferred=*/im->store_.objects().deferring());
  Impl::Built built;
  {
    // Pinned from before the snapshot until its blocks are read: no data-log segment it refers
    // to is freed meanwhile.
    auto pin = im->log_.PinSegments();
    {
      std::lock_guard l(im->mu_);
      snap = im->kv_.GetSnapshot();
      dirty = im->dirty_;
      base = im->base_;
    }
    // Reads of the snapshot do not need the lock: nothing in it changes.
    LFS_ASSIGN(built, im->BuildTrees(snap.get(), dirty, &txn));
  }
  std::lock_guard l(im->mu_);
  kv::Batch extra;
  // Fold committed state back: an inode whose generation did not move since the snapshot now
  // has the new content as its origin and no blocks; one that moved stays dirty on its old origin.
  // The marks' current generations are the mirror's (under mu_, as the marks are written).
  auto mark_now = [&](Ino ino) -> std::optional<uint64_t> {
    auto it = im->dirty_.find(ino);
    return it == im->dirty_.end() ? std::nullopt : std::optional<uint64_t>(it->second);
  };
  for (const auto& [ino, origin] : built.new_origins) {
    auto cur = im->Load(ino);
    if (!cur.ok()) continue;
    auto mark = mark_now(ino);
    auto snap_gen = built.dirty.find(ino);
    bool unchanged = mark ? (snap_gen != built.dirty.end() && snap_gen->second == *mark) : true;
    if (cur->is_dir()) {
      // A directory's origin must be its newest tree whenever it is not rebuilt next time, and it
      // is rebuilt next time whenever it changed since.
      cur->has_origin = true;
      cur->origin = origin.first;
      cur->count_known = false;  // materialised: its numbering is done
      im->Put(&extra, *cur);
      if (mark && unchanged) extra.Delete(kv::Cf::kWorkspace, im->keys_.Dirty(ino));
    } else if (unchanged) {
      cur->has_origin = !origin.first.IsZero();
      cur->origin = origin.first;
      cur->origin_chunked = origin.second;
      cur->valid_len = cur->origin_size = cur->size;
      if (cur->has_blocks)
        im->DeleteBlocks(&extra, *cur, 0, cur->size);
      cur->has_blocks = cur->has_refs = cur->has_overlays = false;
      im->Put(&extra, *cur);
      if (mark) extra.Delete(kv::Cf::kWorkspace, im->keys_.Dirty(ino));
    }
  }
  // Marks on inodes whose content did not need storing (attribute changes, removed inodes).
  for (const auto& [ino, gen] : built.dirty) {
    if (built.new_origins.count(ino)) continue;
    if (mark_now(ino) == gen) extra.Delete(kv::Cf::kWorkspace, im->keys_.Dirty(ino));
  }
  if (!more_parents.empty() || end_merge) extra.Delete(kv::Cf::kWorkspace, im->keys_.Merge());
  std::vector<ObjectId> parents{base};
  if (amend) {  // the head's place: its parents
    LFS_ASSIGN(auto head, im->store_.GetCommit(base));
    parents = head.parents;
  }
  parents.insert(parents.end(), more_parents.begin(), more_parents.end());
  LFS_ASSIGN(ObjectId id, im->store_.StageCommit(built.root, parents, message, built.bytes, built.entries, &txn));
  // The Workspace's new base goes into the Commit's own synced batch: one sync per commit, no
  // crash can leave the branch moved with the Workspace still on its old base, and a Commit that
  // fails (a full disk) leaves the branch head and the Workspace as they were.
  im->PutState(&extra, id);
  LFS_TRY(im->store_.UpdateBranch(opts_.branch, base, id, &extra, &txn));
  im->base_ = id;
  // The marks this commit deleted: those whose generation did not move since the snapshot.
  for (const auto& [ino, gen] : built.dirty)
    if (auto it = im->dirty_.find(ino); it != im->dirty_.end() && it->second == gen) {
      im->dirty_.erase(it);
      im->marked_.erase(ino);
    }
  return id;
}

Result<std::vector<DiffEntry>> Workspace::Changes(const std::optional<ObjectId>& from) {
  auto* im = impl_.get();
  std::shared_ptr<const kv::Snapshot> snap;
  ObjectId base;
  std::map<Ino, uint64_t> dirty;
  auto pin = im->log_.PinSegments();
  {
    std::lock_guard l(im->mu_);
    snap = im->kv_.GetSnapshot();
    dirty = im->dirty_;
    base = im->base_;
  }
  objects::Txn txn(/*dry=*/true);  // ids only, discarded: nothing is encoded or stored
  LFS_ASSIGN(auto built, im->BuildTrees(snap.get(), dirty, &txn));
  pin.unlock();
  LFS_ASSIGN(auto c, im->store_.GetCommit(from ? *from : base));
  return im->store_.DiffTrees(c.root, built.root, &txn);
}

Status Workspace::Reset(const std::optional<ObjectId>& to) {
  if (opts_.read_only || impl_->scratch_) return Status::Error(EROFS, "read-only workspace");
  auto* im = impl_.get();
  Status s = [&]() -> Status {
  std::lock_guard cl(im->commit_mu_);
  std::lock_guard l(im->mu_);
  if (to) LFS_TRY(im->store_.SetBranch(opts_.branch, *to));
  LFS_ASSIGN(auto head, im->store_.BranchHead(opts_.branch));
  if (!head) return Status::NotFound("branch vanished");
  kv::Batch b;
  b.set_space_exempt();  // discarding changes frees space
  b.DeleteRange(kv::Cf::kWorkspace, im->keys_.prefix(), im->keys_.End());
  LFS_TRY(im->kv_.Write(b, false));
  im->dirty_.clear();
  im->marked_.clear();
  if (!im->log_.empty()) im->log_.RequestCollect();
  return im->InitFresh(*head);
  }();
  im->CollectIfWanted();
  return s;
}

}  // namespace layerfs::workspace
