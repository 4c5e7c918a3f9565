// Workspace: inode operations over the kWorkspace column family, copy-on-write over the base
// Commit. One WriteBatch per operation.
#include <functional>
#include "workspace/workspace.h"

#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "history/keys.h"
#include "history/store_impl.h"
#include "kv/space_guard.h"
#include "objects/tree.h"
#include "workspace/workspace_impl.h"

namespace layerfs::workspace {

using objects::Kind;

namespace {

// Who owns the Store: its directory's uid and gid, or this process's for a Store without one.
std::pair<uint32_t, uint32_t> StoreOwner(const Store& store) {
  struct stat st {};
  if (!store.path().empty() && stat(store.path().c_str(), &st) == 0) return {st.st_uid, st.st_gid};
  return {geteuid(), getegid()};
}
using objects::kMaxTreeDepth;
constexpr uint64_t kMaxFileSize = 16ull << 40;  // as ext4 with 4 KiB blocks
constexpr size_t kMaxLinkDirs = 1 << 20;        // directories holding hard links of a base Commit
constexpr std::string_view kWsNextKey = "ws-next";

// Frees unreferenced data-log segments when the enclosing operation's locks are gone (declare it
// before the lock guard).
struct CollectAfter {
  Workspace::Impl* im;
  ~CollectAfter() { im->CollectIfWanted(); }
};

// An R record: the DataRef of a block in the data log, then its patches (bytes each).
bool ParseRef(std::string_view rec, kv::DataRef* ref, std::string_view* patches) {
  size_t used = 0;
  if (!kv::DataRef::DecodePrefix(rec, ref, &used) || ref->length > kBlockSize) return false;
  *patches = rec.substr(used);
  return true;
}

// Patches (bytes each: u32 LE offset + bytes) applied in order over a block's bytes; false if
// one is damaged or would grow the block past kBlockSize.
bool ApplyBlockPatches(std::string_view patches, std::string* block) {
  base::Reader r(patches);
  while (!r.AtEnd()) {
    std::string_view patch;
    if (!r.Bytes(&patch) || !kv::ApplyPatch(patch, block) || block->size() > kBlockSize) return false;
  }
  return true;
}

Status CheckName(std::string_view name) {
  if (name.size() > 255) return Status::Error(ENAMETOOLONG, "name too long");
  if (!objects::ValidName(name)) return Status::Invalid("invalid name");
  return Status::Ok();
}
}  // namespace

uint32_t KillSuidgid(uint32_t perm, uint32_t gid, const Caller& c) {
  perm &= ~static_cast<uint32_t>(S_ISUID);
  if ((perm & S_IXGRP) || c.gid != gid) perm &= ~static_cast<uint32_t>(S_ISGID);
  return perm;
}

timespec Now() {
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return t;
}

// ---- Impl helpers ----

Result<Inode> Workspace::Impl::Load(Ino ino, const kv::Snapshot* snap) {
  LFS_ASSIGN(auto v, kv_.Get(kv::Cf::kWorkspace, keys_.Inode(ino), snap));
  if (!v) return Status::NotFound(fmt::format("inode {} does not exist", ino));
  return DecodeInode(ino, *v);
}

Workspace::Impl::InodeLocks::InodeLocks(Impl& im, std::initializer_list<Ino> inos) {
  std::array<size_t, 4> idx{};
  for (Ino ino : inos) {
    if (n_ == idx.size()) std::abort();  // a caller's bug: at most four inodes
    idx[n_++] = static_cast<size_t>((ino * 0x9E3779B97F4A7C15ull) >> 56) % kStripes;
  }
  // Ascending, each stripe once (an insertion sort: at most four).
  size_t m = 0;
  for (size_t i = 0; i < n_; i++) {
    const size_t v = idx[i];
    size_t j = 0;
    while (j < m && idx[j] < v) j++;
    if (j < m && idx[j] == v) continue;
    for (size_t k = m; k > j; k--) idx[k] = idx[k - 1];
    idx[j] = v;
    m++;
  }
  n_ = m;
  for (size_t i = 0; i < n_; i++) {
    held_[i] = &im.stripes_[idx[i]];
    held_[i]->lock();
  }
}

Workspace::Impl::InodeLocks::~InodeLocks() {
  for (size_t i = n_; i-- > 0;) held_[i]->unlock();
}

Status Workspace::Impl::Unpristine() {
  std::lock_guard g(leaf_mu_);
  if (!pristine_) return Status::Ok();
  // Written before the change's own batch: batches written under the shared lock land in any
  // order, and a state still saying "pristine" after a change would let the Workspace be
  // dropped as if nothing had changed.
  pristine_ = false;
  kv::Batch b;
  b.set_space_exempt();  // one small record replaced; a deletion must work on a full disk
  PutState(&b);
  Status s = kv_.Write(b, false);  // not Write: no Dirty record here, and leaf_mu_ is held
  if (!s.ok()) pristine_ = true;
  return s;
}

namespace {
// The inodes whose Dirty records this thread put into the batch it is building (MarkDirty),
// settled when the batch is written.
thread_local std::vector<Ino> tl_new_marks;
}  // namespace

std::vector<Ino>& Workspace::Impl::tl_marks() { return tl_new_marks; }

void Workspace::Impl::MarkDirty(kv::Batch* b, Ino ino) {
  std::lock_guard leaf(leaf_mu_);
  if (pristine_) {
    pristine_ = false;
    PutState(b);
  }
  uint64_t gen = next_gen_++;
  dirty_[ino] = gen;
  if (marked_.count(ino)) return;
  std::string g;
  base::PutVarint(&g, gen);
  b->Put(kv::Cf::kWorkspace, keys_.Dirty(ino), g);
  tl_new_marks.push_back(ino);
}

void Workspace::Impl::SettleMarks(bool written) {
  if (tl_new_marks.empty()) return;
  if (written) {
    std::lock_guard leaf(leaf_mu_);
    marked_.insert(tl_new_marks.begin(), tl_new_marks.end());
  }
  tl_new_marks.clear();
}

void Workspace::Impl::PutState(kv::Batch* b, const ObjectId& base) {
  std::string s;
  base::PutU8(&s, numbered_ ? 2 : 1);
  s.append(base.AsKey());
  base::PutVarint(&s, std::max(next_ino_, ino_high_));
  if (numbered_) base::PutU8(&s, pristine_ ? 1 : 0);
  b->Put(kv::Cf::kWorkspace, keys_.State(), s);
}

Result<std::optional<std::pair<Ino, EntryType>>> Workspace::Impl::GetEntry(Ino dir, std::string_view name,
                                                                           const kv::Snapshot* snap) {
  LFS_ASSIGN(auto v, kv_.Get(kv::Cf::kWorkspace, keys_.Entry(dir, name), snap));
  using R = std::optional<std::pair<Ino, EntryType>>;
  if (!v) return R();
  base::Reader r(*v);
  uint64_t ino;
  uint8_t t;
  if (!r.Varint(&ino) || !r.U8(&t)) return Status::Corrupt("damaged directory entry");
  return R(std::make_pair(ino, static_cast<EntryType>(t)));
}

static std::string EntryValue(Ino ino, EntryType t) {
  std::string v;
  base::PutVarint(&v, ino);
  base::PutU8(&v, static_cast<uint8_t>(t));
  return v;
}

Result<std::vector<std::pair<std::string, std::pair<Ino, EntryType>>>> Workspace::Impl::ListEntries(
    Ino dir, const kv::Snapshot* snap) {
  std::vector<std::pair<std::string, std::pair<Ino, EntryType>>> out;
  std::string p = keys_.EntryPrefix(dir);
  Status bad;
  LFS_TRY(kv_.Scan(kv::Cf::kWorkspace, p, history::PrefixEnd(p), [&](auto k, auto v) {
    base::Reader r(v);
    uint64_t ino;
    uint8_t t;
    if (!r.Varint(&ino) || !r.U8(&t)) {
      bad = Status::Corrupt("damaged directory entry");
      return false;
    }
    out.emplace_back(std::string(k.substr(p.size())), std::make_pair(ino, static_cast<EntryType>(t)));
    return true;
  }, snap));
  LFS_TRY(bad);
  return out;
}

Status Workspace::Impl::Materialize(Inode* dir) {
  if (dir->materialized) return Status::Ok();
  kv::Batch b;
  b.set_space_exempt();  // reading a directory must work on a full disk
  if (dir->has_origin) {
    LFS_ASSIGN(auto entries, store_.ReadTree(dir->origin));
    // Depth-first numbering (state version 2): the subtree of a directory numbered d holds the
    // numbers d+1 .. d+entries, each child followed by its own subtree. An unmaterialised
    // directory always has its origin numbering (only materialised ones are rebuilt at commit).
    Ino number = dir->ino + 1;
    if (numbered_ && !dir->counter_numbered && dir->count_known) {
      // The entries' counts must add up to what this directory's own entry said: with lying
      // counts two inodes could get one number (or the root's).
      uint64_t total = 0;
      bool overflow = false;
      for (const auto& e : entries)
        overflow |= __builtin_add_overflow(total, 1 + (e.type == EntryType::kDir ? e.subtree_entries : 0), &total) ||
                    (e.type == EntryType::kDir && e.subtree_entries == UINT64_MAX);
      if (overflow || total != dir->origin_size)
        return Status::Corrupt(fmt::format("tree {}: its entries hold {} entries, its parent says {}",
                                           dir->origin.Hex(), overflow ? std::string("too many")
                                                                       : std::to_string(total),
                                           dir->origin_size));
    }
    // Link groups met in this directory: their inodes are in this batch, not in the Kv yet.
    std::map<uint64_t, Inode> batch_links;
    for (const auto& e : entries) {
      Ino own = number;
      number += 1 + (e.type == EntryType::kDir ? e.subtree_entries : 0);
      Inode n;
      bool existing_link = false;
      // Link groups name the base Commit's hard links; a subtree a merge put here keeps its
      // files apart (docs/design.md, "Merge").
      const bool grouped = e.link_group && !dir->counter_numbered;
      if (grouped) {
        std::optional<Inode> linked;
        if (auto it = batch_links.find(e.link_group); it != batch_links.end()) {
          linked = it->second;
        } else {
          LFS_ASSIGN(auto lv, kv_.Get(kv::Cf::kWorkspace, keys_.Link(e.link_group)));
          base::Reader r(lv ? std::string_view(*lv) : std::string_view());
          uint64_t ino;
          if (lv && r.Varint(&ino)) {
            auto l = Load(ino);
            if (l.ok()) linked = std::move(*l);
          }
        }
        if (linked && linked->type != e.type)
          return Status::Corrupt(fmt::format("tree {}: link group {} joins a {} and a {}", dir->origin.Hex(),
                                             e.link_group, EntryTypeName(linked->type), EntryTypeName(e.type)));
        if (linked) {
          n = std::move(*linked);
          n.nlink++;
          n.parents.push_back(dir->ino);
          existing_link = true;
        }
      }
      if (!existing_link) {
        n.ino = numbered_ && !dir->counter_numbered ? own : next_ino_++;
        n.counter_numbered = dir->counter_numbered && e.type == EntryType::kDir;
        n.type = e.type;
        n.perm = e.mode & 07777;
        n.uid = e.uid;
        n.gid = e.gid;
        n.rdev = e.rdev;
        n.mtime = n.ctime = n.atime = {e.mtime_sec, static_cast<long>(e.mtime_nsec)};
        n.xattrs = e.xattrs;
        n.parents = {dir->ino};
        n.target = e.target;
        n.nlink = 1;
        if (e.type == EntryType::kFile) {
          n.size = e.size;
          n.has_origin = !e.id.IsZero();
          n.origin = e.id;
          n.origin_chunked = e.chunked;
          n.valid_len = n.origin_size = e.size;
        } else if (e.type == EntryType::kDir) {
          n.has_origin = true;
          n.origin = e.id;
          n.count_known = true;
          n.origin_size = e.subtree_entries;
          // nlink of a directory: 2 + its subdirectories, from the entry's summary (so a lazy
          // mount fetches nothing to list a directory) or, for older trees, from the subtree.
          // A subtree that cannot be read is listed anyway (nlink 2) and fails when opened:
          // damage stays in its directory.
          n.nlink = 2;
          if (e.summary) {
            n.nlink += static_cast<uint32_t>(std::min<uint64_t>(e.subdirs, UINT32_MAX - 2));
          } else if (auto sub = store_.ReadTree(e.id); sub.ok()) {
            for (const auto& s : *sub) n.nlink += s.type == EntryType::kDir;
          }
        } else if (e.type == EntryType::kSymlink) {
          n.size = e.target.size();
        }
        if (e.link_group && !dir->counter_numbered) {
          std::string v;
          base::PutVarint(&v, n.ino);
          b.Put(kv::Cf::kWorkspace, keys_.Link(e.link_group), v);
        }
      }
      Put(&b, n);
      b.Put(kv::Cf::kWorkspace, keys_.Entry(dir->ino, e.name), EntryValue(n.ino, n.type));
      if (grouped) batch_links[e.link_group] = n;
    }
  }
  dir->materialized = true;
  Put(&b, *dir);
  PutState(&b);
  LFS_TRY(Write(b));
  // Every directory holding a hard link of the base is materialised with the root, so each
  // link group is one inode from the start: nlink is right on first sight, and a write through
  // one link reaches (and is committed through) all of them.
  if (dir->ino == kRootIno && dir->has_origin) LFS_TRY(MaterializeLinkDirs(dir->origin));
  return Status::Ok();
}

Status Workspace::Impl::MaterializeLinkDirs(const ObjectId& root_tree) {
  std::vector<std::vector<std::string>> dirs;  // paths below the root of dirs with hard links
  std::vector<std::string> path;
  // Subtrees known to hold no hard link are not walked again (a tree may appear at many paths),
  // and the walk gives up past kMaxLinkDirs directories holding links, or kMaxTreeDepth levels.
  std::unordered_set<ObjectId, ObjectIdHash> no_links;
  std::function<Result<bool>(const ObjectId&)> walk = [&](const ObjectId& tree) -> Result<bool> {
    if (no_links.count(tree)) return false;
    if (path.size() > kMaxTreeDepth)
      return Status::Corrupt(fmt::format("tree {}: nested deeper than {} directories", tree.Hex(), kMaxTreeDepth));
    LFS_ASSIGN(auto entries, store_.ReadTree(tree));
    bool has_link = false;
    for (const auto& e : entries) has_link |= e.type != EntryType::kDir && e.link_group != 0;
    if (has_link && !path.empty()) dirs.push_back(path);
    if (dirs.size() > kMaxLinkDirs)
      return Status::Corrupt(fmt::format("tree {}: hard links in more than {} directories", root_tree.Hex(), kMaxLinkDirs));
    bool below = has_link;
    for (const auto& e : entries) {
      if (e.type != EntryType::kDir) continue;
      // A summary without hard links below: nothing there to find (and, lazily, nothing to fetch).
      if (e.summary && !e.links_below) continue;
      path.push_back(e.name);
      LFS_ASSIGN(bool sub, walk(e.id));
      below |= sub;
      path.pop_back();
    }
    if (!below) no_links.insert(tree);
    return below;
  };
  LFS_TRY(walk(root_tree).status());
  for (const auto& p : dirs) {
    Ino cur = kRootIno;
    for (const auto& name : p) {
      LFS_ASSIGN(auto ent, GetEntry(cur, name));
      if (!ent || ent->second != EntryType::kDir) break;
      cur = ent->first;
      LFS_ASSIGN(Inode d, LoadDir(cur));
      (void)d;
    }
  }
  return Status::Ok();
}

Result<Inode> Workspace::Impl::LoadDirShared(Ino ino, std::shared_lock<std::shared_mutex>& l) {
  LFS_ASSIGN(Inode n, Load(ino));
  if (!n.is_dir()) return Status::Error(ENOTDIR, "not a directory");
  if (n.materialized) return n;
  // Materialising writes records: trade the shared lock for the exclusive one, and back.
  l.unlock();
  Status s = [&]() -> Status {
    std::lock_guard x(mu_);
    return LoadDir(ino).status();
  }();
  l.lock();
  LFS_TRY(s);
  LFS_ASSIGN(n, Load(ino));
  if (!n.is_dir()) return Status::Error(ENOTDIR, "not a directory");
  return n;
}

Result<Inode> Workspace::Impl::LoadDir(Ino ino) {
  LFS_ASSIGN(Inode n, Load(ino));
  if (!n.is_dir()) return Status::Error(ENOTDIR, "not a directory");
  LFS_TRY(Materialize(&n));
  return n;
}

Result<std::string> Workspace::Impl::ReadOrigin(const Inode& n, uint64_t off, uint64_t len) {
  if (!n.has_origin || off >= n.valid_len) return std::string();
  len = std::min(len, n.valid_len - off);
  LFS_ASSIGN(std::string o, history::ReadContentRange(store_.objects(), n.origin, n.origin_chunked, off, len));
  // The committed content is at least valid_len bytes (its tree entry's size): shorter content
  // is damage, not a hole.
  if (o.size() != len)
    return Status::Corrupt(fmt::format("content {} is shorter than its file ({} bytes at {}, {} expected)",
                                       n.origin.Hex(), o.size(), off, len));
  return o;
}

Status Workspace::Impl::MaterializeRef(std::string_view rec, std::string* out) {
  kv::DataRef ref;
  std::string_view patches;
  if (!ParseRef(rec, &ref, &patches)) return Status::Corrupt("workspace: damaged data-log record");
  out->assign(ref.length, '\0');
  LFS_TRY(log_.Read(ref, out->data()));
  return ApplyBlockPatches(patches, out) ? Status::Ok() : Status::Corrupt("workspace: damaged data-log record");
}

Status Workspace::Impl::MaterializeOverlay(const Inode& n, uint64_t blk, std::string_view rec, std::string* out) {
  const uint64_t bstart = blk * kBlockSize;
  out->clear();
  if (n.has_origin && bstart < n.valid_len) {
    LFS_ASSIGN(*out, ReadOrigin(n, bstart, std::min<uint64_t>(kBlockSize, n.valid_len - bstart)));
  }
  return ApplyBlockPatches(rec, out) ? Status::Ok() : Status::Corrupt("workspace: damaged overlay record");
}

Result<std::string> Workspace::Impl::ReadRange(const Inode& n, uint64_t off, uint64_t len,
                                               const kv::Snapshot* snap) {
  if (off >= n.size) return std::string();
  len = std::min<uint64_t>(len, n.size - off);
  std::string out(len, '\0');
  if (!n.has_blocks) {
    LFS_ASSIGN(std::string o, ReadOrigin(n, off, len));
    std::copy(o.begin(), o.end(), out.begin());
    return out;
  }
  uint64_t first = off / kBlockSize, last = (off + len - 1) / kBlockSize;
  // Stored blocks straight into the zeroed result (a block holds the block's whole current bytes;
  // past its end, zeros); then committed bytes where no block is stored.
  std::vector<bool> stored(last - first + 1);
  bool misplaced = false;  // a key in the range naming a block outside it: damaged records
  auto overlap = [&](uint64_t blk, uint64_t size, uint64_t* from, uint64_t* to) {
    if (blk < first || blk > last) {
      misplaced = true;
      return false;
    }
    uint64_t bstart = blk * kBlockSize;
    stored[blk - first] = true;
    *from = std::max(bstart, off);
    *to = std::min(bstart + size, off + len);
    return *from < *to;
  };
  LFS_TRY(kv_.ScanOnce(kv::Cf::kWorkspace, keys_.Block(n.ino, first), keys_.Block(n.ino, last + 1),
                       [&](auto k, auto v) {
                         uint64_t blk = base::GetBigEndian64(k.data() + k.size() - 8), from, to;
                         uint64_t bstart = blk * kBlockSize;
                         if (overlap(blk, v.size(), &from, &to))
                           std::copy(v.begin() + (from - bstart), v.begin() + (to - bstart), out.begin() + (from - off));
                         return true;
                       }, snap));
  if (misplaced) return Status::Corrupt(fmt::format("workspace: damaged block record of inode {}", n.ino));
  if (n.has_refs) {
    Status err;
    std::string tmp;
    LFS_TRY(kv_.ScanOnce(kv::Cf::kWorkspace, keys_.Ref(n.ino, first), keys_.Ref(n.ino, last + 1),
                         [&](auto k, auto v) {
                           uint64_t blk = base::GetBigEndian64(k.data() + k.size() - 8), from, to;
                           uint64_t bstart = blk * kBlockSize;
                           kv::DataRef ref;
                           std::string_view patches;
                           if (ParseRef(v, &ref, &patches) && patches.empty()) {
                             // No patches: the overlap straight from the data log.
                             if (overlap(blk, ref.length, &from, &to))
                               err = log_.ReadPart(ref, from - bstart, to - from, out.data() + (from - off));
                             return err.ok();
                           }
                           err = MaterializeRef(v, &tmp);
                           if (err.ok() && overlap(blk, tmp.size(), &from, &to))
                             std::copy(tmp.begin() + (from - bstart), tmp.begin() + (to - bstart), out.begin() + (from - off));
                           return err.ok();
                         }, snap));
    LFS_TRY(err);
    if (misplaced) return Status::Corrupt(fmt::format("workspace: damaged data-log record of inode {}", n.ino));
  }
  if (n.has_origin && off < n.valid_len) {
    LFS_ASSIGN(std::string o, ReadOrigin(n, off, len));
    for (uint64_t b = first; b <= last; b++) {
      if (stored[b - first]) continue;
      uint64_t bs = std::max(b * kBlockSize, off), be = std::min({(b + 1) * kBlockSize, off + len, off + o.size()});
      if (bs < be) std::copy(o.begin() + (bs - off), o.begin() + (be - off), out.begin() + (bs - off));
    }
  }
  if (n.has_overlays) {
    // Q records: their patches over the committed bytes just copied (or the zeros past them),
    // each clipped to the range.
    Status err;
    LFS_TRY(kv_.ScanOnce(kv::Cf::kWorkspace, keys_.Overlay(n.ino, first), keys_.Overlay(n.ino, last + 1),
                         [&](auto k, auto v) {
                           const uint64_t bstart = base::GetBigEndian64(k.data() + k.size() - 8) * kBlockSize;
                           base::Reader r(v);
                           while (!r.AtEnd()) {
                             std::string_view patch;
                             uint32_t at = 0;
                             if (r.Bytes(&patch) && patch.size() >= 4)
                               for (int i = 0; i < 4; i++) at |= uint32_t(static_cast<uint8_t>(patch[i])) << (8 * i);
                             if (patch.size() < 4 || uint64_t{at} + patch.size() - 4 > kBlockSize) {
                               err = Status::Corrupt("workspace: damaged overlay record");
                               return false;
                             }
                             const uint64_t ps = bstart + at, pe = ps + patch.size() - 4;
                             const uint64_t from = std::max(ps, off), to = std::min(pe, off + len);
                             if (from < to)
                               std::copy(patch.begin() + 4 + (from - ps), patch.begin() + 4 + (to - ps),
                                         out.begin() + (from - off));
                           }
                           return true;
                         }, snap));
    LFS_TRY(err);
  }
  return out;
}

Status Workspace::Impl::Truncate(kv::Batch* b, Inode* n, uint64_t size) {
  if (size < n->size) {
    uint64_t keep_blocks = (size + kBlockSize - 1) / kBlockSize;
    if (n->has_blocks) {
      DeleteBlocks(b, *n, keep_blocks, n->size);
      if (size % kBlockSize) {
        uint64_t blk = size / kBlockSize;
        LFS_ASSIGN(auto v, kv_.Get(kv::Cf::kWorkspace, keys_.Block(n->ino, blk)));
        bool from_log = false;
        if (!v && n->has_refs) {
          // A block in the data log becomes a B record cut at the new end (bytes past it must
          // read as zeros if the file grows again, and a patch may reach past it).
          LFS_ASSIGN(auto rec, kv_.Get(kv::Cf::kWorkspace, keys_.Ref(n->ino, blk)));
          if (rec) {
            v.emplace();
            LFS_TRY(MaterializeRef(*rec, &*v));
            b->Delete(kv::Cf::kWorkspace, keys_.Ref(n->ino, blk));
            from_log = true;
          }
        }
        if (!v && n->has_overlays) {
          // Likewise a block of patches over committed bytes: below the new end valid_len
          // moves, so it becomes the B record of its bytes.
          LFS_ASSIGN(auto rec, kv_.Get(kv::Cf::kWorkspace, keys_.Overlay(n->ino, blk)));
          if (rec) {
            v.emplace();
            LFS_TRY(MaterializeOverlay(*n, blk, *rec, &*v));
            b->Delete(kv::Cf::kWorkspace, keys_.Overlay(n->ino, blk));
            from_log = true;
          }
        }
        if (v && (from_log || v->size() > size % kBlockSize)) {
          if (v->size() > size % kBlockSize) v->resize(size % kBlockSize);
          b->Put(kv::Cf::kWorkspace, keys_.Block(n->ino, blk), *v);
        }
      }
    }
    n->valid_len = std::min(n->valid_len, size);
  }
  n->size = size;
  return Status::Ok();
}

// DeleteBlocks asks for a collection before the batch deleting the records is written: a
// collection running in between sees the records still there and takes the request with it, and
// the segments would stay until the next request. So the thread asks again once it is done.
thread_local bool Workspace::Impl::tl_refs_dropped = false;

void Workspace::Impl::AskAgainForDroppedRefs() {
  if (!tl_refs_dropped) return;
  tl_refs_dropped = false;
  log_.RequestCollect();
}

void Workspace::Impl::DeleteBlocks(kv::Batch* b, const Inode& n, uint64_t first, uint64_t size) {
  const Ino ino = n.ino;
  const bool refs = n.has_refs, overlays = n.has_overlays;
  // Point deletes for the usual few blocks: every range tombstone stays in the memtable and is
  // consulted by every later read, so removing a tree of small files one range at a time is
  // quadratic. A range deletion only for large files.
  uint64_t end = (size + kBlockSize - 1) / kBlockSize;
  if (end <= first) return;
  if (end - first <= 256) {
    for (uint64_t blk = first; blk < end; blk++) {
      b->Delete(kv::Cf::kWorkspace, keys_.Block(ino, blk));
      if (refs) b->Delete(kv::Cf::kWorkspace, keys_.Ref(ino, blk));
      if (overlays) b->Delete(kv::Cf::kWorkspace, keys_.Overlay(ino, blk));
    }
  } else {
    b->DeleteRange(kv::Cf::kWorkspace, keys_.Block(ino, first), keys_.BlocksEnd(ino));
    if (refs) b->DeleteRange(kv::Cf::kWorkspace, keys_.Ref(ino, first), keys_.RefsEnd(ino));
    if (overlays) b->DeleteRange(kv::Cf::kWorkspace, keys_.Overlay(ino, first), keys_.OverlaysEnd(ino));
  }
  if (refs) {
    log_.RequestCollect();
    tl_refs_dropped = true;
  }
}

void Workspace::Impl::DeleteInode(kv::Batch* b, const Inode& n) {
  Ino ino = n.ino;
  b->Delete(kv::Cf::kWorkspace, keys_.Inode(ino));
  if (n.has_blocks) DeleteBlocks(b, n, 0, n.size);
  b->Delete(kv::Cf::kWorkspace, keys_.Dirty(ino));
  b->Delete(kv::Cf::kWorkspace, keys_.Orphan(ino));
  Unmark(ino);
}

Status Workspace::Impl::DropLink(kv::Batch* b, Inode* child, Ino dir) {
  auto it = std::find(child->parents.begin(), child->parents.end(), dir);
  if (it != child->parents.end()) child->parents.erase(it);
  child->nlink = child->nlink > 0 ? child->nlink - 1 : 0;
  child->ctime = Now();
  if (child->nlink == 0 || (child->is_dir() && child->nlink <= 1)) {
    if (child->is_dir()) {
      DeleteInode(b, *child);
    } else {
      // Open files keep their data until the kernel forgets the inode.
      child->nlink = 0;
      Put(b, *child);
      b->Delete(kv::Cf::kWorkspace, keys_.Dirty(child->ino));
      b->Put(kv::Cf::kWorkspace, keys_.Orphan(child->ino), "");
      Unmark(child->ino);
    }
  } else {
    Put(b, *child);
    MarkDirty(b, child->ino);
  }
  return Status::Ok();
}

Result<Inode> Workspace::Impl::NewInode(EntryType type, uint32_t perm, const Caller& c, const Inode& parent) {
  Inode n;
  {
    std::lock_guard g(leaf_mu_);
    if (next_ino_ >= ino_high_) {
      // Changes under the shared lock write their batches in any order, so the state record
      // cannot carry each new number: it promises a range instead, written before any number
      // of the range is used (a crash skips the rest of it).
      const uint64_t old_high = ino_high_;
      ino_high_ = next_ino_ + kInoReserve;
      kv::Batch b;
      PutState(&b);
      Status s = kv_.Write(b, false);  // not Write: no Dirty record here, and leaf_mu_ is held
      if (!s.ok()) {
        ino_high_ = old_high;
        return s;
      }
    }
    n.ino = next_ino_++;
  }
  n.type = type;
  n.perm = perm & 07777;
  n.uid = c.uid;
  n.gid = c.gid;
  if (parent.perm & S_ISGID) {
    n.gid = parent.gid;
    if (type == EntryType::kDir) n.perm |= S_ISGID;
  }
  n.atime = n.mtime = n.ctime = Now();
  n.parents = {parent.ino};
  n.nlink = type == EntryType::kDir ? 2 : 1;
  n.materialized = type == EntryType::kDir;
  return n;
}

Status Workspace::Impl::MigrateLegacyBlocks() {
  // Older builds filed blocks as prefix|I|ino|block, beside the inode records. Moved in batches
  // of about 64 MiB, each atomic (a Put of the new key, a Delete of the old): after a crash the
  // next open finds the rest.
  const std::string from = keys_.prefix() + kTagInode, to = history::PrefixEnd(from);
  for (;;) {
    kv::Batch b;
    LFS_TRY(kv_.Scan(kv::Cf::kWorkspace, from, to, [&](auto k, auto v) {
      if (k.size() != Keys::kLegacyBlockKeySize) return true;
      Ino ino = Keys::InoAt(k, keys_.prefix().size() + 1);
      b.Put(kv::Cf::kWorkspace, keys_.Block(ino, base::GetBigEndian64(k.data() + k.size() - 8)), v);
      b.Delete(kv::Cf::kWorkspace, k);
      return b.ApproximateBytes() < (64u << 20);
    }));
    if (b.empty()) return Status::Ok();
    LFS_TRY(kv_.Write(b, true));
  }
}

Status Workspace::Impl::InitFresh(const ObjectId& commit) {
  LFS_ASSIGN(auto c, store_.GetCommit(commit));
  base_ = commit;
  numbered_ = true;
  pristine_ = true;
  // Inode numbers are 64-bit; a Commit claiming more entries than they can number is damaged.
  if (c.files > (1ull << 62)) return Status::Corrupt(fmt::format("commit {}: claims {} entries", commit.Hex(), c.files));
  next_ino_ = 2 + c.files;  // 1 .. 1 + c.files: the root and the Commit's entries
  ino_high_ = 0;
  Inode root;
  root.ino = kRootIno;
  root.type = EntryType::kDir;
  root.perm = 0755;
  // A Commit does not record its root's own attributes. The root belongs to the Store's owner
  // (the owner of its directory; the process's own ids for a Store without one): owned by uid
  // 0, a user's own mount refused them any change at its top.
  std::tie(root.uid, root.gid) = StoreOwner(store_);
  root.has_origin = true;
  root.origin = c.root;
  root.count_known = true;
  root.origin_size = c.files;
  root.atime = root.mtime = root.ctime = {c.time_sec, static_cast<long>(c.time_nsec)};
  LFS_ASSIGN(auto entries, store_.ReadTree(c.root));
  root.nlink = 2;
  for (const auto& e : entries) root.nlink += e.type == EntryType::kDir;
  kv::Batch b;
  b.set_space_exempt();  // a fresh Workspace is small, and mounting it must work on a full disk
  Put(&b, root);
  PutState(&b);
  return kv_.Write(b, true);
}

// ---- Data log ----

Status CollectDataLog(Store& store, bool wait) {
  auto r = store.data_log().Collect([&]() -> Result<std::set<uint32_t>> {
    // What is freed must stay unreferenced after a crash: the records as read here durable first.
    // (Synced before the scan, under the pins: the data log's sync that precedes the WAL's takes
    // every segment, the soon dead ones too, so no durable record points at bytes that are not.)
    LFS_TRY(store.kv().SyncWal());
    std::set<uint32_t> live;
    bool damaged = false;
    // Every Workspace that has records, found by seeking from one to the next: counting up to
    // ws-next would cost a scan for every Workspace id ever handed out (each read-only mount
    // takes one), and a damaged ws-next could make that 2^64 of them.
    std::string at;
    for (;;) {
      std::string first;
      bool found = false;
      LFS_TRY(store.kv().Scan(kv::Cf::kWorkspace, at, "", [&](auto k, auto) {
        first = k;
        found = true;
        return false;
      }));
      if (!found) break;
      if (first.size() < 8) {  // not a Workspace's key
        at = first + '\0';
        continue;
      }
      const uint64_t wsid = base::GetBigEndian64(first.data());
      Keys keys(wsid);
      std::string p = keys.RefPrefix();
      LFS_TRY(store.kv().Scan(kv::Cf::kWorkspace, p, history::PrefixEnd(p), [&](auto, auto v) {
        kv::DataRef ref;
        std::string_view patches;
        if (!ParseRef(v, &ref, &patches)) {
          damaged = true;
          return false;
        }
        live.insert(ref.segment);
        return true;
      }));
      if (damaged) return Status::Corrupt("workspace: damaged data-log record; data log not collected");
      if (wsid == UINT64_MAX) break;
      at = Keys(wsid + 1).prefix();
    }
    return live;
  }, wait);
  return r.ok() ? Status::Ok() : r.status();
}

void Workspace::Impl::CollectIfWanted() {
  AskAgainForDroppedRefs();
  if (!log_.collect_wanted() || log_.WakeCollector()) return;
  Status s = CollectDataLog(store_, /*wait=*/false);  // the next chance will do
  if (!s.ok()) spdlog::warn("data log: {}", s.message());
}

// ---- Open ----

Workspace::Workspace(std::unique_ptr<Impl> impl, WorkspaceOptions opts) : impl_(std::move(impl)), opts_(std::move(opts)) {}

Workspace::~Workspace() {
  if (impl_ && impl_->ephemeral_) {
    kv::Batch b;
    b.set_space_exempt();
    b.DeleteRange(kv::Cf::kWorkspace, impl_->keys_.prefix(), impl_->keys_.End());
    (void)impl_->kv_.Write(b, false);
  }
}

static Result<uint64_t> AllocateWsid(kv::Kv& kv) {
  LFS_ASSIGN(auto v, kv.Get(kv::Cf::kMeta, kWsNextKey));
  uint64_t id = 1;
  if (v && v->size() == 8) id = base::GetBigEndian64(v->data());
  std::string next;
  base::PutBigEndian64(&next, id + 1);
  kv::Batch b;
  b.set_space_exempt();
  b.Put(kv::Cf::kMeta, kWsNextKey, next);
  LFS_TRY(kv.Write(b, false));
  return id;
}

Result<bool> HasWorkspace(Store& store, const std::string& branch) {
  LFS_ASSIGN(auto v, store.kv().Get(kv::Cf::kMeta, std::string(kWsKeyPrefix) + branch));
  return v.has_value();
}

Result<std::unique_ptr<Workspace>> Workspace::Open(Store& store, const WorkspaceOptions& opts) {
  static std::mutex open_mu;  // serialises workspace-id allocation
  std::lock_guard ol(open_mu);
  // A read-only Store (a full disk): the Workspace writes to memory only (Impl::scratch_).
  std::unique_ptr<kv::Kv> scratch = store.kv().read_only() ? kv::NewScratchKv(store.kv()) : nullptr;
  kv::Kv& kv = scratch ? *scratch : store.kv();
  if (opts.read_only) {
    LFS_ASSIGN(uint64_t wsid, AllocateWsid(kv));
    auto impl = std::make_unique<Impl>(store, wsid, true, std::move(scratch));
    LFS_TRY(impl->InitFresh(opts.commit));
    impl->next_gen_ = static_cast<uint64_t>(history::NowNanos());
    return std::unique_ptr<Workspace>(new Workspace(std::move(impl), opts));
  }
  LFS_ASSIGN(auto head, store.BranchHead(opts.branch));
  if (!head) return Status::NotFound(fmt::format("no branch '{}'", opts.branch));
  std::string key = std::string(kWsKeyPrefix) + opts.branch;
  LFS_ASSIGN(auto idv, kv.Get(kv::Cf::kMeta, key));
  uint64_t wsid;
  if (idv && idv->size() == 8) {
    wsid = base::GetBigEndian64(idv->data());
  } else {
    LFS_ASSIGN(wsid, AllocateWsid(kv));
    std::string v;
    base::PutBigEndian64(&v, wsid);
    kv::Batch b;
    b.Put(kv::Cf::kMeta, key, v);
    LFS_TRY(kv.Write(b, true));
  }
  auto impl = std::make_unique<Impl>(store, wsid, false, std::move(scratch));
  impl->next_gen_ = static_cast<uint64_t>(history::NowNanos());
  LFS_ASSIGN(auto state, kv.Get(kv::Cf::kWorkspace, impl->keys_.State()));
  bool fresh = !state;
  if (state) {
    base::Reader r(*state);
    uint8_t ver = 0, flags = 0;
    std::string_view base;
    uint64_t next;
    if (!r.U8(&ver) || (ver != 1 && ver != 2) || !r.Raw(ObjectId::kSize, &base) || !r.Varint(&next) ||
        (ver == 2 && !r.U8(&flags)))
      return Status::Corrupt(fmt::format("workspace of '{}': damaged state", opts.branch));
    impl->base_ = ObjectId::FromKey(base);
    impl->next_ino_ = impl->ino_high_ = next;
    impl->numbered_ = ver == 2;
    impl->pristine_ = ver == 2 && (flags & 1);
    if (impl->base_ != *head) {
      // The branch moved (import, fork target reset). A clean workspace follows it; a dirty one
      // stays on its base, and its next commit reports the move.
      bool dirty = false;
      LFS_TRY(kv.Scan(kv::Cf::kWorkspace, impl->keys_.DirtyPrefix(),
                              history::PrefixEnd(impl->keys_.DirtyPrefix()), [&](auto, auto) {
                                dirty = true;
                                return false;
                              }));
      if (!dirty) {
        kv::Batch b;
        b.set_space_exempt();
        b.DeleteRange(kv::Cf::kWorkspace, impl->keys_.prefix(), impl->keys_.End());
        LFS_TRY(kv.Write(b, false));
        fresh = true;
      }
    }
  }
  if (fresh) {
    LFS_TRY(impl->InitFresh(*head));
  } else {
    LFS_TRY(impl->MigrateLegacyBlocks());
    // Inodes unlinked while open when the last process ended: nobody holds them now.
    kv::Batch b;
    b.set_space_exempt();
    std::string op = impl->keys_.OrphanPrefix();
    LFS_TRY(kv.Scan(kv::Cf::kWorkspace, op, history::PrefixEnd(op), [&](auto k, auto) {
      Ino ino = Keys::InoAt(k, op.size());
      b.DeleteRange(kv::Cf::kWorkspace, impl->keys_.Inode(ino), impl->keys_.InodeEnd(ino));
      b.DeleteRange(kv::Cf::kWorkspace, impl->keys_.Block(ino, 0), impl->keys_.BlocksEnd(ino));
      b.DeleteRange(kv::Cf::kWorkspace, impl->keys_.Ref(ino, 0), impl->keys_.RefsEnd(ino));
      b.DeleteRange(kv::Cf::kWorkspace, impl->keys_.Overlay(ino, 0), impl->keys_.OverlaysEnd(ino));
      b.Delete(kv::Cf::kWorkspace, impl->keys_.Dirty(ino));
      b.Delete(kv::Cf::kWorkspace, k);
      return true;
    }));
    // A Workspace started by a build that gave every root to uid 0: a Store owned by someone
    // else (who cannot chown to 0) gets its root back, as a fresh one would have it.
    if (auto [uid, gid] = StoreOwner(store); uid != 0 && !kv.read_only()) {
      auto root = impl->Load(kRootIno);
      if (root.ok() && root->uid == 0 && root->gid == 0) {
        root->uid = uid;
        root->gid = gid;
        impl->Put(&b, *root);
      }
    }
    if (!b.empty()) LFS_TRY(kv.Write(b, false));
  }
  std::string dp = impl->keys_.DirtyPrefix();
  LFS_TRY(kv.Scan(kv::Cf::kWorkspace, dp, history::PrefixEnd(dp), [&](auto k, auto v) {
    base::Reader r(v);
    uint64_t gen = 0;
    (void)r.Varint(&gen);
    impl->dirty_[Keys::InoAt(k, dp.size())] = gen;
    impl->marked_.insert(Keys::InoAt(k, dp.size()));
    return true;
  }));
  impl->CollectIfWanted();  // segments an earlier process left, possibly all dead
  return std::unique_ptr<Workspace>(new Workspace(std::move(impl), opts));
}

Status DropWorkspaceState(Store& store, const std::string& branch) {
  std::string key = std::string(kWsKeyPrefix) + branch;
  LFS_ASSIGN(auto idv, store.kv().Get(kv::Cf::kMeta, key));
  if (!idv || idv->size() != 8) return Status::Ok();
  Keys keys(base::GetBigEndian64(idv->data()));
  kv::Batch b;
  b.set_space_exempt();
  b.DeleteRange(kv::Cf::kWorkspace, keys.prefix(), keys.End());
  b.Delete(kv::Cf::kMeta, key);
  LFS_TRY(store.kv().Write(b, true));
  if (!store.data_log().empty()) return CollectDataLog(store);
  return Status::Ok();
}

bool Workspace::pristine() const {
  std::shared_lock l(impl_->mu_);
  std::lock_guard g(impl_->leaf_mu_);
  return impl_->pristine_;
}

ObjectId Workspace::base_commit() const {
  std::shared_lock l(impl_->mu_);
  return impl_->base_;
}

// ---- Operations ----

#define LFS_WRITABLE() \
  if (opts_.read_only || impl_->scratch_) return Status::Error(EROFS, "read-only workspace")

Result<Attr> Workspace::Lookup(Ino parent, std::string_view name) {
  std::shared_lock l(impl_->mu_);
  if (name.size() > 255) return Status::Error(ENAMETOOLONG, "name too long");
  LFS_ASSIGN(Inode dir, impl_->LoadDirShared(parent, l));
  LFS_ASSIGN(auto e, impl_->GetEntry(parent, name));
  if (!e) return Status::NotFound("no such entry");
  LFS_ASSIGN(Inode n, impl_->Load(e->first));
  return n.ToAttr();
}

Result<Attr> Workspace::GetAttr(Ino ino) {
  std::shared_lock l(impl_->mu_);
  LFS_ASSIGN(Inode n, impl_->Load(ino));
  return n.ToAttr();
}

Result<Attr> Workspace::SetAttr(Ino ino, const AttrChange& ch) {
  LFS_WRITABLE();
  Result<Attr> r = [&]() -> Result<Attr> {
  auto pin = impl_->log_.PinSegments();  // a truncation may read a block in the data log
  std::shared_lock l(impl_->mu_);
  Impl::InodeLocks il(*impl_, {ino});
  LFS_ASSIGN(Inode n, impl_->Load(ino));
  if (ch.size && n.is_dir()) return Status::Error(EISDIR, "is a directory");
  LFS_TRY(impl_->Unpristine());
  kv::Batch b;
  timespec now = Now();
  if (ch.mode) n.perm = *ch.mode & 07777;
  if (ch.uid) n.uid = *ch.uid;
  if (ch.gid) n.gid = *ch.gid;
  if (ch.size) {
    if (n.is_dir()) return Status::Error(EISDIR, "is a directory");
    if (n.type != EntryType::kFile) return Status::Invalid("not a regular file");
    if (*ch.size > kMaxFileSize) return Status::Error(EFBIG, "file too large");
    if (*ch.size < n.size) b.set_space_exempt();  // frees space
    LFS_TRY(impl_->Truncate(&b, &n, *ch.size));
    n.mtime = now;
  }
  if (ch.atime) n.atime = *ch.atime;
  if (ch.mtime) n.mtime = *ch.mtime;
  if (ch.kill_suidgid && !n.is_dir()) n.perm = KillSuidgid(n.perm, n.gid, *ch.kill_suidgid);
  n.ctime = ch.ctime ? *ch.ctime : now;
  impl_->Put(&b, n);
  impl_->MarkDirty(&b, ino);
  LFS_TRY(impl_->Write(b));
  return n.ToAttr();
  }();
  impl_->CollectIfWanted();
  return r;
}

// Creates `n` as `name` in `parent`: the entry, both inodes, dirty marks, in one batch.
// REQUIRES: mu_ shared with the stripes of `parent` and `n`, or mu_ exclusive.
static Result<Attr> Link_(Workspace::Impl* im, Inode& parent, std::string_view name, Inode& n) {
  LFS_TRY(im->Unpristine());
  kv::Batch b;
  timespec now = Now();
  parent.mtime = parent.ctime = now;
  if (n.is_dir()) parent.nlink++;
  b.Put(kv::Cf::kWorkspace, im->keys_.Entry(parent.ino, name), EntryValue(n.ino, n.type));
  im->Put(&b, n);
  im->Put(&b, parent);
  im->MarkDirty(&b, parent.ino);
  im->MarkDirty(&b, n.ino);
  LFS_TRY(im->Write(b));
  return n.ToAttr();
}

Result<Attr> Workspace::Mknod(Ino parent, std::string_view name, uint32_t mode, uint64_t rdev, const Caller& c) {
  LFS_WRITABLE();
  LFS_TRY(CheckName(name));
  std::shared_lock l(impl_->mu_);
  LFS_TRY(impl_->LoadDirShared(parent, l).status());  // materialised before any stripe is held
  Impl::InodeLocks il(*impl_, {parent});
  LFS_ASSIGN(Inode dir, impl_->Load(parent));
  LFS_ASSIGN(auto e, impl_->GetEntry(parent, name));
  if (e) return Status::Exists("entry exists");
  EntryType t = TypeFromMode(mode);
  if (t == EntryType::kDir || t == EntryType::kSymlink) return Status::Invalid("mknod of a directory or symlink");
  LFS_ASSIGN(Inode n, impl_->NewInode(t, mode, c, dir));
  if (t == EntryType::kChar || t == EntryType::kBlock) n.rdev = rdev;
  return Link_(impl_.get(), dir, name, n);
}

Result<Attr> Workspace::Mkdir(Ino parent, std::string_view name, uint32_t mode, const Caller& c) {
  LFS_WRITABLE();
  LFS_TRY(CheckName(name));
  std::shared_lock l(impl_->mu_);
  LFS_TRY(impl_->LoadDirShared(parent, l).status());  // materialised before any stripe is held
  Impl::InodeLocks il(*impl_, {parent});
  LFS_ASSIGN(Inode dir, impl_->Load(parent));
  LFS_ASSIGN(auto e, impl_->GetEntry(parent, name));
  if (e) return Status::Exists("entry exists");
  LFS_ASSIGN(Inode n, impl_->NewInode(EntryType::kDir, mode, c, dir));
  return Link_(impl_.get(), dir, name, n);
}

Result<Attr> Workspace::Symlink(Ino parent, std::string_view name, std::string_view target, const Caller& c) {
  LFS_WRITABLE();
  LFS_TRY(CheckName(name));
  if (target.size() >= 4096) return Status::Error(ENAMETOOLONG, "link target too long");
  std::shared_lock l(impl_->mu_);
  LFS_TRY(impl_->LoadDirShared(parent, l).status());  // materialised before any stripe is held
  Impl::InodeLocks il(*impl_, {parent});
  LFS_ASSIGN(Inode dir, impl_->Load(parent));
  LFS_ASSIGN(auto e, impl_->GetEntry(parent, name));
  if (e) return Status::Exists("entry exists");
  LFS_ASSIGN(Inode n, impl_->NewInode(EntryType::kSymlink, 0777, c, dir));
  n.perm = 0777;
  n.target = target;
  n.size = target.size();
  return Link_(impl_.get(), dir, name, n);
}

Result<Attr> Workspace::Link(Ino ino, Ino new_parent, std::string_view new_name) {
  LFS_WRITABLE();
  LFS_TRY(CheckName(new_name));
  std::shared_lock l(impl_->mu_);
  LFS_TRY(impl_->LoadDirShared(new_parent, l).status());
  Impl::InodeLocks il(*impl_, {ino, new_parent});
  LFS_ASSIGN(Inode n, impl_->Load(ino));
  if (n.is_dir()) return Status::Error(EPERM, "hard link to a directory");
  LFS_ASSIGN(Inode dir, impl_->Load(new_parent));
  LFS_ASSIGN(auto e, impl_->GetEntry(new_parent, new_name));
  if (e) return Status::Exists("entry exists");
  if (n.nlink >= 65000) return Status::Error(EMLINK, "too many links");
  n.nlink++;
  n.parents.push_back(new_parent);
  n.ctime = Now();
  return Link_(impl_.get(), dir, new_name, n);
}

Status Workspace::Unlink(Ino parent, std::string_view name) {
  LFS_WRITABLE();
  CollectAfter collect{impl_.get()};  // runs once the lock is released
  std::shared_lock l(impl_->mu_);
  LFS_TRY(impl_->LoadDirShared(parent, l).status());
  // The child's number is read before its stripe is held, and read again once it is: only
  // rename (exclusive) could change what the name points at, but a stale guess must not win.
  std::optional<Impl::InodeLocks> il;
  std::optional<std::pair<Ino, EntryType>> e;
  for (;;) {
    LFS_ASSIGN(auto guess, impl_->GetEntry(parent, name));
    if (!guess) return Status::NotFound("no such entry");
    il.emplace(*impl_, std::initializer_list<Ino>{parent, guess->first});
    LFS_ASSIGN(e, impl_->GetEntry(parent, name));
    if (!e) return Status::NotFound("no such entry");
    if (e->first == guess->first) break;
    il.reset();
  }
  LFS_ASSIGN(Inode dir, impl_->Load(parent));
  LFS_ASSIGN(Inode child, impl_->Load(e->first));
  if (child.is_dir()) return Status::Error(EISDIR, "is a directory");
  LFS_TRY(impl_->Unpristine());
  kv::Batch b;
  b.set_space_exempt();  // frees space: must work on a full disk
  b.Delete(kv::Cf::kWorkspace, impl_->keys_.Entry(parent, name));
  LFS_TRY(impl_->DropLink(&b, &child, parent));
  dir.mtime = dir.ctime = Now();
  impl_->Put(&b, dir);
  impl_->MarkDirty(&b, parent);
  return impl_->Write(b);
}

Status Workspace::Rmdir(Ino parent, std::string_view name) {
  LFS_WRITABLE();
  CollectAfter collect{impl_.get()};  // runs once the lock is released
  std::lock_guard l(impl_->mu_);
  if (name == ".") return Status::Invalid("rmdir of .");
  LFS_ASSIGN(Inode dir, impl_->LoadDir(parent));
  LFS_ASSIGN(auto e, impl_->GetEntry(parent, name));
  if (!e) return Status::NotFound("no such entry");
  LFS_ASSIGN(Inode child, impl_->Load(e->first));
  if (!child.is_dir()) return Status::Error(ENOTDIR, "not a directory");
  LFS_TRY(impl_->Materialize(&child));
  LFS_ASSIGN(auto entries, impl_->ListEntries(child.ino));
  if (!entries.empty()) return Status::Error(ENOTEMPTY, "directory not empty");
  kv::Batch b;
  b.set_space_exempt();
  b.Delete(kv::Cf::kWorkspace, impl_->keys_.Entry(parent, name));
  impl_->DeleteInode(&b, child);
  dir.nlink--;
  dir.mtime = dir.ctime = Now();
  impl_->Put(&b, dir);
  impl_->MarkDirty(&b, parent);
  return impl_->Write(b);
}

Status Workspace::Rename(Ino parent, std::string_view name, Ino new_parent, std::string_view new_name, unsigned flags) {
  LFS_WRITABLE();
  LFS_TRY(CheckName(new_name));
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) return Status::Invalid("unsupported rename flags");
  if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE)) return Status::Invalid("conflicting rename flags");
  CollectAfter collect{impl_.get()};  // runs once the lock is released
  std::lock_guard l(impl_->mu_);
  auto* im = impl_.get();
  LFS_ASSIGN(Inode src_dir, im->LoadDir(parent));
  LFS_ASSIGN(auto se, im->GetEntry(parent, name));
  if (!se) return Status::NotFound("no such entry");
  LFS_ASSIGN(Inode src, im->Load(se->first));
  Inode dst_dir_storage;
  bool same_dir = parent == new_parent;
  if (!same_dir) {
    LFS_ASSIGN(dst_dir_storage, im->LoadDir(new_parent));
  }
  Inode& dst_dir = same_dir ? src_dir : dst_dir_storage;
  // A directory cannot move below itself.
  auto check_not_below = [&](const Inode& moved, Ino target_dir) -> Status {
    if (!moved.is_dir() || same_dir) return Status::Ok();
    for (Ino cur = target_dir; cur != kRootIno;) {
      if (cur == moved.ino) return Status::Invalid("cannot move a directory into itself");
      LFS_ASSIGN(Inode up, im->Load(cur));
      if (up.parents.empty()) break;
      cur = up.parents[0];
    }
    return Status::Ok();
  };
  LFS_TRY(check_not_below(src, new_parent));
  LFS_ASSIGN(auto de, im->GetEntry(new_parent, new_name));
  kv::Batch b;
  b.set_space_exempt();  // moves or frees: what a user does to make room
  timespec now = Now();
  auto replace_parent = [](Inode& n, Ino from, Ino to) {
    auto it = std::find(n.parents.begin(), n.parents.end(), from);
    if (it != n.parents.end()) *it = to;
  };
  if (flags & RENAME_EXCHANGE) {
    if (!de) return Status::NotFound("exchange target does not exist");
    LFS_ASSIGN(Inode dst, im->Load(de->first));
    LFS_TRY(check_not_below(dst, parent));
    b.Put(kv::Cf::kWorkspace, im->keys_.Entry(parent, name), EntryValue(dst.ino, dst.type));
    b.Put(kv::Cf::kWorkspace, im->keys_.Entry(new_parent, new_name), EntryValue(src.ino, src.type));
    if (!same_dir) {
      replace_parent(src, parent, new_parent);
      replace_parent(dst, new_parent, parent);
      if (src.is_dir() != dst.is_dir()) {
        if (src.is_dir()) { src_dir.nlink--; dst_dir.nlink++; }
        else { src_dir.nlink++; dst_dir.nlink--; }
      }
    }
    src.ctime = dst.ctime = now;
    im->Put(&b, src);
    im->Put(&b, dst);
  } else {
    if (de) {
      if (flags & RENAME_NOREPLACE) return Status::Exists("target exists");
      if (de->first == src.ino) return Status::Ok();  // both names are links to one inode
      LFS_ASSIGN(Inode dst, im->Load(de->first));
      if (src.is_dir() && !dst.is_dir()) return Status::Error(ENOTDIR, "target is not a directory");
      if (!src.is_dir() && dst.is_dir()) return Status::Error(EISDIR, "target is a directory");
      if (dst.is_dir()) {
        LFS_TRY(im->Materialize(&dst));
        LFS_ASSIGN(auto entries, im->ListEntries(dst.ino));
        if (!entries.empty()) return Status::Error(ENOTEMPTY, "target directory not empty");
        im->DeleteInode(&b, dst);
        dst_dir.nlink--;
      } else {
        LFS_TRY(im->DropLink(&b, &dst, new_parent));
      }
    }
    b.Delete(kv::Cf::kWorkspace, im->keys_.Entry(parent, name));
    b.Put(kv::Cf::kWorkspace, im->keys_.Entry(new_parent, new_name), EntryValue(src.ino, src.type));
    if (!same_dir) {
      replace_parent(src, parent, new_parent);
      if (src.is_dir()) {
        src_dir.nlink--;
        dst_dir.nlink++;
      }
    }
    src.ctime = now;
    im->Put(&b, src);
  }
  src_dir.mtime = src_dir.ctime = now;
  im->Put(&b, src_dir);
  im->MarkDirty(&b, parent);
  if (!same_dir) {
    dst_dir.mtime = dst_dir.ctime = now;
    im->Put(&b, dst_dir);
    im->MarkDirty(&b, new_parent);
  }
  return im->Write(b);
}

Result<std::string> Workspace::Readlink(Ino ino) {
  std::shared_lock l(impl_->mu_);
  LFS_ASSIGN(Inode n, impl_->Load(ino));
  if (n.type != EntryType::kSymlink) return Status::Invalid("not a symlink");
  return n.target;
}

Result<std::vector<DirEntry>> Workspace::ReadDir(Ino ino) {
  std::shared_lock l(impl_->mu_);
  LFS_ASSIGN(Inode dir, impl_->LoadDirShared(ino, l));
  LFS_ASSIGN(auto entries, impl_->ListEntries(ino));
  std::vector<DirEntry> out;
  out.reserve(entries.size());
  for (auto& [name, e] : entries) out.push_back({name, e.first, TypeBits(e.second)});
  return out;
}

// Loads `ino` and takes a snapshot under the lock, for a read of [off, off + size) from it
// outside the lock; false if there is nothing to read. REQUIRES: a data-log pin, held until the
// bytes are read, so no segment the snapshot refers to is freed meanwhile.
Result<bool> Workspace::Impl::StartRead(Ino ino, uint64_t off, size_t size, Inode* n,
                                        std::shared_ptr<const kv::Snapshot>* snap) {
  std::shared_lock l(mu_);
  // The snapshot first, and the inode from it: changes of other inodes go on under the shared
  // lock, and a change of this one lands wholly before or after the snapshot.
  auto s = kv_.GetSnapshot();
  LFS_ASSIGN(*n, Load(ino, s.get()));
  if (n->is_dir()) return Status::Error(EISDIR, "is a directory");
  if (off >= n->size || size == 0) return false;
  *snap = std::move(s);
  return true;
}

Result<std::string> Workspace::Read(Ino ino, uint64_t off, size_t size) {
  Inode n;
  std::shared_ptr<const kv::Snapshot> snap;
  auto pin = impl_->log_.PinSegments();
  LFS_ASSIGN(bool any, impl_->StartRead(ino, off, size, &n, &snap));
  if (!any) return std::string();
  // The bytes are read outside the lock, from a snapshot taken with the inode: the kernel's
  // parallel readahead requests overlap their I/O instead of queueing behind one another, and a
  // write that lands meanwhile is not seen, as if it had come after this read.
  return impl_->ReadRange(n, off, size, snap.get());
}

Result<ReadReply> Workspace::ReadPieces(Ino ino, uint64_t off, size_t size) {
  auto* im = impl_.get();
  Inode n;
  std::shared_ptr<const kv::Snapshot> snap;
  auto pin = im->log_.PinSegments();
  LFS_ASSIGN(bool any, im->StartRead(ino, off, size, &n, &snap));
  if (!any) return ReadReply{};
  const uint64_t len = std::min<uint64_t>(size, n.size - off);
  ReadReply out;
  out.size = len;
  if (n.has_refs) {
    // Every block of the range must be an unpatched log block reaching as far as needed (bytes
    // past a block's end would be zeros, and B records or patches need applying).
    uint64_t first = off / kBlockSize, last = (off + len - 1) / kBlockSize, expect = first;
    uint64_t seg_size = 0;  // of segment `seg`, the last piece's
    uint32_t seg = 0;
    bool whole = true;
    LFS_TRY(im->kv_.ScanOnce(kv::Cf::kWorkspace, im->keys_.Ref(ino, first), im->keys_.Ref(ino, last + 1),
                             [&](auto k, auto v) {
                               uint64_t blk = base::GetBigEndian64(k.data() + k.size() - 8);
                               uint64_t bstart = blk * kBlockSize;
                               uint64_t from = std::max(off, bstart), to = std::min(off + len, bstart + kBlockSize);
                               kv::DataRef ref;
                               std::string_view patches;
                               if (blk != expect++ || !ParseRef(v, &ref, &patches) || !patches.empty() ||
                                   bstart + ref.length < to) {
                                 whole = false;
                                 return false;
                               }
                               const uint64_t at = ref.offset + (from - bstart), count = to - from;
                               // Contiguous with the last piece (one append wrote them): extend it.
                               if (!out.pieces.empty() && seg == ref.segment &&
                                   out.pieces.back().offset + out.pieces.back().length == at &&
                                   ref.offset + ref.length <= seg_size) {
                                 out.pieces.back().length += count;
                                 out.pieces.back().blocks.push_back(ref);
                                 return true;
                               }
                               auto file = im->log_.File(ref);
                               if (!file) {
                                 whole = false;
                                 return false;
                               }
                               seg = ref.segment;
                               seg_size = file->size;
                               out.pieces.push_back({{}, file->fd, at, count, {ref}});
                               out.hold.push_back(std::move(file->handle));
                               return true;
                             }, snap.get()));
    if (whole && expect == last + 1) return out;  // the log's bytes never change: no pin needed
    out.pieces.clear();
    out.hold.clear();
  }
  LFS_ASSIGN(std::string bytes, im->ReadRange(n, off, len, snap.get()));
  out.size = bytes.size();
  out.pieces.push_back({std::move(bytes), -1, 0, out.size, {}});
  return out;
}

Status Workspace::FillRead(const ReadReply& r, char* dst) {
  auto& log = impl_->log_;
  size_t n = 0;
  std::string scratch;
  for (const auto& p : r.pieces) {
    if (p.fd < 0) {
      std::memcpy(dst + n, p.bytes.data(), p.length);
      n += p.length;
      continue;
    }
    // Each block is read whole and checked before any of its bytes go out: straight into the
    // reply where the block is wholly inside it, through `scratch` at the piece's ends.
    const uint64_t end = p.offset + p.length;
    for (const auto& b : p.blocks) {
      const uint64_t from = std::max(p.offset, b.offset), to = std::min(end, b.offset + b.length);
      char* out = dst + n + (from - p.offset);
      const bool inside = from == b.offset && to == b.offset + b.length;
      char* buf = out;
      if (!inside) {
        scratch.resize(b.length);
        buf = scratch.data();
      }
      for (size_t got = 0; got < b.length;) {
        ssize_t k = ::pread(p.fd, buf + got, b.length - got, static_cast<off_t>(b.offset + got));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return Status::Errorf(EIO, "read {}: {}", log.SegmentPath(b.segment), strerror(errno));
        if (k == 0)
          return Status::Errorf(EIO, "{}: damaged: it ends before offset {} that a record points at",
                                log.SegmentPath(b.segment), b.offset + b.length);
        got += static_cast<size_t>(k);
      }
      LFS_TRY(log.Check(b, std::string_view(buf, b.length)));
      if (!inside) std::memcpy(out, buf + (from - b.offset), to - from);
    }
    n += p.length;
  }
  return Status::Ok();
}

Result<size_t> Workspace::Write(Ino ino, uint64_t off, std::string_view data,
                                const std::optional<Caller>& kill_suidgid, bool* killed) {
  LFS_WRITABLE();
  auto* im = impl_.get();
  Status s = im->WriteLocked(ino, off, data, kill_suidgid, killed);
  im->CollectIfWanted();
  if (!s.ok()) return s;
  return data.size();
}

// Whole blocks go to the data log, a run of them in one append, and get R records. A partial
// block of a block in the log is a patch appended to its R record (folded into a fresh log
// block once the patches grow past kMaxRefPatchBytes); other partial blocks are B records as
// before. Records exist only for blocks below the file's size, so past it nothing is looked up
// or deleted.
Status Workspace::Impl::WriteLocked(Ino ino, uint64_t off, std::string_view data,
                                    const std::optional<Caller>& kill_suidgid, bool* killed) {
  constexpr uint64_t kMaxRefPatchBytes = 16 << 10;
  constexpr uint64_t kMaxRunBlocks = 256;  // 16 MiB per append
  auto pin = log_.PinSegments();
  std::shared_lock l(mu_);
  InodeLocks il(*this, {ino});
  LFS_ASSIGN(Inode n, Load(ino));
  if (n.is_dir()) return Status::Error(EISDIR, "is a directory");
  if (data.empty()) return Status::Ok();
  if (off + data.size() > kMaxFileSize || off + data.size() < off) return Status::Error(EFBIG, "file too large");
  LFS_TRY(Unpristine());
  kv::Batch b;
  const uint64_t end = off + data.size(), old_size = n.size;
  const bool had_blocks = n.has_blocks, had_overlays = n.has_overlays;
  auto put_ref = [&](uint64_t blk, const kv::DataRef& ref) {
    std::string v;
    ref.EncodeTo(&v);
    b.Put(kv::Cf::kWorkspace, keys_.Ref(ino, blk), v);
    if (had_blocks && blk * kBlockSize < old_size) b.Delete(kv::Cf::kWorkspace, keys_.Block(ino, blk));
    if (had_overlays && blk * kBlockSize < old_size) b.Delete(kv::Cf::kWorkspace, keys_.Overlay(ino, blk));
    n.has_refs = true;
  };
  uint64_t blk = off / kBlockSize;
  while (blk * kBlockSize < end) {
    const uint64_t bstart = blk * kBlockSize;
    const uint64_t from = std::max(off, bstart), to = std::min(end, bstart + kBlockSize);
    const std::string_view piece = data.substr(from - off, to - from);
    if (from == bstart && to == bstart + kBlockSize) {
      uint64_t run = std::min((end - bstart) / kBlockSize, kMaxRunBlocks);
      const std::string_view bytes = data.substr(bstart - off, run * kBlockSize);
      LFS_ASSIGN(kv::DataRef ref, log_.Append(bytes));
      for (uint64_t i = 0; i < run; i++)
        put_ref(blk + i, kv::DataRef::Of(ref.segment, ref.offset + i * kBlockSize, bytes.substr(i * kBlockSize, kBlockSize)));
      blk += run;
      continue;
    }
    const bool may_exist = had_blocks && bstart < old_size;
    if (may_exist && n.has_refs) {
      LFS_ASSIGN(auto rec, kv_.Get(kv::Cf::kWorkspace, keys_.Ref(ino, blk)));
      kv::DataRef old;
      std::string_view old_patches;
      if (rec && !ParseRef(*rec, &old, &old_patches)) return Status::Corrupt("workspace: damaged data-log record");
      if (rec) {
        if (old_patches.size() + piece.size() <= kMaxRefPatchBytes) {
          base::PutBytes(&*rec, kv::EncodePatch(static_cast<uint32_t>(from - bstart), piece));
          b.Put(kv::Cf::kWorkspace, keys_.Ref(ino, blk), *rec);
        } else {
          std::string bytes;
          LFS_TRY(MaterializeRef(*rec, &bytes));
          if (bytes.size() < to - bstart) bytes.resize(to - bstart, '\0');
          std::copy(piece.begin(), piece.end(), bytes.begin() + (from - bstart));
          LFS_ASSIGN(kv::DataRef ref, log_.Append(bytes));
          put_ref(blk, kv::DataRef::Of(ref.segment, ref.offset, bytes));
        }
        blk++;
        continue;
      }
    }
    // A partial block. Where the committed content does not reach (no origin, or at or past
    // valid_len) an absent block reads as zeros, so the write is a blind patch: no read. Below
    // valid_len a stored block is patched too; an absent one gets a Q record, the patch over the
    // committed bytes, again without reading them (folded into a B record of the block's bytes
    // once its patches grow past kMaxRefPatchBytes).
    const std::string key = keys_.Block(ino, blk);
    const bool zeros_if_absent = !n.has_origin || bstart >= n.valid_len;
    bool present = false;
    if (!zeros_if_absent && may_exist) {
      LFS_ASSIGN(auto have, kv_.Get(kv::Cf::kWorkspace, key));
      present = have.has_value();
    }
    if (zeros_if_absent || present) {
      b.Patch(kv::Cf::kWorkspace, key, static_cast<uint32_t>(from - bstart), piece);
      blk++;
      continue;
    }
    const std::string okey = keys_.Overlay(ino, blk);
    std::optional<std::string> rec;
    if (may_exist && had_overlays) {
      LFS_ASSIGN(auto got, kv_.Get(kv::Cf::kWorkspace, okey));
      rec = std::move(got);
    }
    if (!rec) rec.emplace();
    if (rec->size() + piece.size() <= kMaxRefPatchBytes) {
      base::PutBytes(&*rec, kv::EncodePatch(static_cast<uint32_t>(from - bstart), piece));
      b.Put(kv::Cf::kWorkspace, okey, *rec);
      n.has_overlays = true;
    } else {
      std::string block;
      LFS_TRY(MaterializeOverlay(n, blk, *rec, &block));
      if (block.size() < to - bstart) block.resize(to - bstart, '\0');
      std::copy(piece.begin(), piece.end(), block.begin() + (from - bstart));
      b.Put(kv::Cf::kWorkspace, key, block);
      b.Delete(kv::Cf::kWorkspace, okey);
    }
    blk++;
  }
  n.has_blocks = true;
  n.size = std::max(n.size, end);
  n.mtime = n.ctime = Now();
  if (kill_suidgid) {
    const uint32_t before = n.perm;
    n.perm = KillSuidgid(n.perm, n.gid, *kill_suidgid);
    if (killed != nullptr) *killed = n.perm != before;
  }
  Put(&b, n);
  MarkDirty(&b, ino);
  return Write(b);
}

Result<uint64_t> Workspace::CopyRange(Ino in, uint64_t off_in, Ino out, uint64_t off_out, uint64_t len) {
  LFS_WRITABLE();
  auto* im = impl_.get();
  len = std::min(len, kMaxCopy);
  if (len == 0) return uint64_t{0};
  if (off_in == 0 && off_out == 0 && in != out) {
    LFS_ASSIGN(uint64_t cloned, im->CloneContent(in, out, len));
    if (cloned > 0) return cloned;
  }
  uint64_t done = 0;
  bool may_share = true;  // until in is found to hold no data-log block at all
  while (done < len) {
    const uint64_t at_in = off_in + done, at_out = off_out + done;
    uint64_t want = std::min(len - done, kCopyPiece);
    if (may_share && at_in % kBlockSize == 0 && at_out % kBlockSize == 0 && want >= kBlockSize) {
      auto shared = im->ShareBlocks(in, at_in, out, at_out, want, &may_share);
      if (!shared.ok()) {
        if (done > 0) return done;
        return shared.status();
      }
      if (*shared > 0) {
        done += *shared;
        continue;
      }
      want = kBlockSize;  // a block that cannot be shared: its bytes, then try again
    }
    auto bytes = Read(in, at_in, want);
    Status s = bytes.status();
    if (s.ok() && bytes->empty()) break;  // in's end
    if (s.ok()) s = im->WriteLocked(out, at_out, *bytes);
    im->CollectIfWanted();
    if (!s.ok()) {
      if (done > 0) return done;  // as a short write: the next call reports the error
      return s;
    }
    done += bytes->size();
    if (bytes->size() < want) break;
  }
  return done;
}

// Whole blocks of `in` from off_in that sit unpatched in the data log, as many as follow one
// another within len and in's size, become R records of `out` from off_out naming the same log
// bytes: a segment is freed only when no record names it and the log's bytes never change, so
// two inodes may share them (a later write to either patches or replaces its own record).
Result<uint64_t> Workspace::Impl::ShareBlocks(Ino in, uint64_t off_in, Ino out, uint64_t off_out, uint64_t len,
                                               bool* may_share) {
  auto pin = log_.PinSegments();
  std::shared_lock l(mu_);
  InodeLocks il(*this, {in, out});
  LFS_ASSIGN(Inode src, Load(in));
  LFS_ASSIGN(Inode dst, Load(out));
  if (src.type != EntryType::kFile || !src.has_refs || dst.type != EntryType::kFile) {
    *may_share = false;  // nothing of in can be shared: the rest of this copy goes as bytes
    return uint64_t{0};
  }
  const uint64_t end = std::min(off_in + len, src.size);
  const uint64_t first = off_in / kBlockSize, count = end > off_in ? (end - off_in) / kBlockSize : 0;
  if (count == 0) return uint64_t{0};
  std::vector<std::string> refs;
  LFS_TRY(kv_.ScanOnce(kv::Cf::kWorkspace, keys_.Ref(in, first), keys_.Ref(in, first + count), [&](auto k, auto v) {
    kv::DataRef ref;
    std::string_view patches;
    if (base::GetBigEndian64(k.data() + k.size() - 8) != first + refs.size() || !ParseRef(v, &ref, &patches) ||
        !patches.empty() || ref.length != kBlockSize)
      return false;
    refs.emplace_back(v);
    return true;
  }));
  if (refs.empty()) return uint64_t{0};
  if (off_out + refs.size() * kBlockSize > kMaxFileSize) return Status::Error(EFBIG, "file too large");
  LFS_TRY(Unpristine());
  kv::Batch b;
  const uint64_t out_first = off_out / kBlockSize, old_size = dst.size;
  for (uint64_t i = 0; i < refs.size(); i++) {
    const uint64_t blk = out_first + i;
    b.Put(kv::Cf::kWorkspace, keys_.Ref(out, blk), refs[i]);
    if (dst.has_blocks && blk * kBlockSize < old_size) b.Delete(kv::Cf::kWorkspace, keys_.Block(out, blk));
    if (dst.has_overlays && blk * kBlockSize < old_size) b.Delete(kv::Cf::kWorkspace, keys_.Overlay(out, blk));
  }
  const uint64_t shared = refs.size() * kBlockSize;
  dst.has_blocks = dst.has_refs = true;
  dst.size = std::max(dst.size, off_out + shared);
  dst.mtime = dst.ctime = Now();
  Put(&b, dst);
  MarkDirty(&b, out);
  LFS_TRY(Write(b));
  return shared;
}

// A file holding committed content and nothing else, copied whole into an empty file: `out`
// takes the content id, the valid length and the size, as a fork takes a tree. Both inodes are
// regular files of this Workspace; the content stays reachable as long as `in` holds it, and
// after that through the Commit that `out`'s next commit records.
Result<uint64_t> Workspace::Impl::CloneContent(Ino in, Ino out, uint64_t len) {
  std::shared_lock l(mu_);
  InodeLocks il(*this, {in, out});
  LFS_ASSIGN(Inode src, Load(in));
  LFS_ASSIGN(Inode dst, Load(out));
  if (src.type != EntryType::kFile || dst.type != EntryType::kFile) return uint64_t{0};
  if (!src.has_origin || src.has_blocks || src.has_refs || src.has_overlays || src.size == 0 || len < src.size)
    return uint64_t{0};
  if (dst.size != 0 || dst.has_blocks || dst.has_refs || dst.has_overlays) return uint64_t{0};
  LFS_TRY(Unpristine());
  dst.has_origin = true;
  dst.origin = src.origin;
  dst.origin_chunked = src.origin_chunked;
  dst.origin_size = src.origin_size;
  dst.valid_len = src.valid_len;
  dst.size = src.size;
  dst.mtime = dst.ctime = Now();
  kv::Batch b;
  Put(&b, dst);
  MarkDirty(&b, out);
  LFS_TRY(Write(b));
  return src.size;
}

Status Workspace::Fallocate(Ino ino, int mode, uint64_t off, uint64_t len) {
  LFS_WRITABLE();
  constexpr int kKeepSize = 1, kPunchHole = 2, kZeroRange = 0x10;
  if (mode & ~(kKeepSize | kPunchHole | kZeroRange)) return Status::Error(EOPNOTSUPP, "fallocate mode not supported");
  if ((mode & kPunchHole) && (mode & kZeroRange)) return Status::Error(EINVAL, "punch hole and zero range together");
  if (mode & (kPunchHole | kZeroRange)) {
    if ((mode & kPunchHole) && !(mode & kKeepSize)) return Status::Error(EOPNOTSUPP, "punch hole needs keep size");
    uint64_t size;
    {
      std::shared_lock l(impl_->mu_);
      LFS_ASSIGN(Inode n, impl_->Load(ino));
      if (n.type != EntryType::kFile) return Status::Error(ENODEV, "not a regular file");
      size = n.size;
    }
    if (off + len > kMaxFileSize) return Status::Error(EFBIG, "file too large");
    // The bytes in the range that the file holds read as zeros: written as zeros, a window at a
    // time (a hole of gigabytes must not be one buffer). Zero range then grows the file like
    // a plain allocation unless asked to keep its size.
    constexpr uint64_t kWindow = 1 << 20;
    const std::string zeros(std::min<uint64_t>(kWindow, len), '\0');
    const uint64_t end = off >= size ? off : std::min(off + len, size);
    for (uint64_t at = off; at < end; at += kWindow) {
      auto w = Write(ino, at, std::string_view(zeros).substr(0, std::min(kWindow, end - at)));
      if (!w.ok()) return w.status();
    }
    if ((mode & kPunchHole) || (mode & kKeepSize)) return Status::Ok();
  }
  std::shared_lock l(impl_->mu_);
  Impl::InodeLocks il(*impl_, {ino});
  LFS_ASSIGN(Inode n, impl_->Load(ino));
  if (n.type != EntryType::kFile) return Status::Error(ENODEV, "not a regular file");
  if (off + len > kMaxFileSize) return Status::Error(EFBIG, "file too large");
  if ((mode & kKeepSize) || off + len <= n.size) return Status::Ok();
  LFS_TRY(impl_->Unpristine());
  kv::Batch b;
  n.size = off + len;
  n.ctime = Now();
  impl_->Put(&b, n);
  impl_->MarkDirty(&b, ino);
  return impl_->Write(b);
}

Result<uint64_t> Workspace::Lseek(Ino ino, uint64_t off, int whence) {
  std::shared_lock l(impl_->mu_);
  LFS_ASSIGN(Inode n, impl_->Load(ino));
  if (off >= n.size) return Status::Error(ENXIO, "offset beyond end of file");
  // Data: origin bytes below valid_len, and stored blocks.
  std::vector<uint64_t> blocks;
  auto add = [&](auto k, auto) {
    blocks.push_back(base::GetBigEndian64(k.data() + k.size() - 8));
    return true;
  };
  if (n.has_blocks)
    LFS_TRY(impl_->kv_.Scan(kv::Cf::kWorkspace, impl_->keys_.Block(ino, 0), impl_->keys_.BlocksEnd(ino), add));
  if (n.has_refs)
    LFS_TRY(impl_->kv_.Scan(kv::Cf::kWorkspace, impl_->keys_.Ref(ino, 0), impl_->keys_.RefsEnd(ino), add));
  // A Q block may hold patched bytes past valid_len.
  if (n.has_overlays)
    LFS_TRY(impl_->kv_.Scan(kv::Cf::kWorkspace, impl_->keys_.Overlay(ino, 0), impl_->keys_.OverlaysEnd(ino), add));
  if (n.has_refs || n.has_overlays) std::sort(blocks.begin(), blocks.end());
  auto is_data = [&](uint64_t p) {
    return (n.has_origin && p < n.valid_len) || std::binary_search(blocks.begin(), blocks.end(), p / kBlockSize);
  };
  if (whence == SEEK_DATA) {
    if (is_data(off)) return off;
    for (uint64_t b : blocks)
      if (b * kBlockSize + kBlockSize > off) return std::max(off, b * kBlockSize);
    return Status::Error(ENXIO, "no data after offset");
  }
  if (whence == SEEK_HOLE) {
    uint64_t p = off;
    while (p < n.size) {
      if (n.has_origin && p < n.valid_len) p = n.valid_len;
      else if (std::binary_search(blocks.begin(), blocks.end(), p / kBlockSize)) p = (p / kBlockSize + 1) * kBlockSize;
      else return p;
    }
    return n.size;
  }
  return Status::Invalid("unsupported whence");
}

Status Workspace::Fsync(Ino, bool) {
  // The data first: a synced record must never point at bytes a crash could lose.
  LFS_TRY(impl_->log_.Sync());
  return impl_->kv_.SyncWal();
}

Status Workspace::SetXattr(Ino ino, std::string_view name, std::string_view value, int flags) {
  LFS_WRITABLE();
  if (name.size() > 255 || name.empty()) return Status::Error(ERANGE, "bad xattr name");
  if (name.rfind("user.", 0) != 0) return Status::Error(EOPNOTSUPP, "only user.* attributes are supported");
  if (value.size() > 65536) return Status::Error(E2BIG, "xattr value too large");
  std::shared_lock l(impl_->mu_);
  Impl::InodeLocks il(*impl_, {ino});
  LFS_ASSIGN(Inode n, impl_->Load(ino));
  if (n.type == EntryType::kSymlink) return Status::Error(EPERM, "user xattrs on a symlink");
  auto it = std::lower_bound(n.xattrs.begin(), n.xattrs.end(), name,
                             [](const auto& p, std::string_view k) { return p.first < k; });
  bool exists = it != n.xattrs.end() && it->first == name;
  if ((flags & XATTR_CREATE) && exists) return Status::Exists("xattr exists");
  if ((flags & XATTR_REPLACE) && !exists) return Status::Error(ENODATA, "no such xattr");
  if (exists) it->second = value;
  else n.xattrs.insert(it, {std::string(name), std::string(value)});
  n.ctime = Now();
  LFS_TRY(impl_->Unpristine());
  kv::Batch b;
  impl_->Put(&b, n);
  impl_->MarkDirty(&b, ino);
  return impl_->Write(b);
}

Result<std::string> Workspace::GetXattr(Ino ino, std::string_view name) {
  std::shared_lock l(impl_->mu_);
  LFS_ASSIGN(Inode n, impl_->Load(ino));
  for (const auto& [k, v] : n.xattrs)
    if (k == name) return v;
  return Status::Error(ENODATA, "no such xattr");
}

Result<std::vector<std::string>> Workspace::ListXattr(Ino ino) {
  std::shared_lock l(impl_->mu_);
  LFS_ASSIGN(Inode n, impl_->Load(ino));
  std::vector<std::string> out;
  for (const auto& [k, v] : n.xattrs) out.push_back(k);
  return out;
}

Status Workspace::RemoveXattr(Ino ino, std::string_view name) {
  LFS_WRITABLE();
  std::shared_lock l(impl_->mu_);
  Impl::InodeLocks il(*impl_, {ino});
  LFS_ASSIGN(Inode n, impl_->Load(ino));
  auto it = std::find_if(n.xattrs.begin(), n.xattrs.end(), [&](const auto& p) { return p.first == name; });
  if (it == n.xattrs.end()) return Status::Error(ENODATA, "no such xattr");
  n.xattrs.erase(it);
  n.ctime = Now();
  LFS_TRY(impl_->Unpristine());
  kv::Batch b;
  impl_->Put(&b, n);
  impl_->MarkDirty(&b, ino);
  return impl_->Write(b);
}

Result<struct statvfs> Workspace::Statfs() {
  struct statvfs s {};
  std::string p = impl_->store_.path().empty() ? "/" : impl_->store_.path();
  if (statvfs(p.c_str(), &s) != 0) return Status::Errorf(errno, "statfs: {}", strerror(errno));
  s.f_namemax = 255;
  // What the Store keeps for its database is not for writers (kv/space_guard.h): df on the
  // mount shows what a write can still take.
  if (s.f_frsize > 0) {
    const fsblkcnt_t kept = impl_->store_.space().KeptBytes() / s.f_frsize;
    s.f_bavail = s.f_bavail > kept ? s.f_bavail - kept : 0;
    s.f_bfree = s.f_bfree > kept ? s.f_bfree - kept : 0;
  }
  return s;
}

std::string Workspace::PathOf(Ino ino) {
  std::lock_guard l(impl_->mu_);
  std::string path;
  for (int depth = 0; ino != kRootIno && depth < 4096; depth++) {
    auto n = impl_->Load(ino);
    if (!n.ok() || n->parents.empty()) return fmt::format("inode {}", ino);
    Ino dir = n->parents.front();
    auto entries = impl_->ListEntries(dir);
    if (!entries.ok()) return fmt::format("inode {}", ino);
    auto it = std::find_if(entries->begin(), entries->end(), [&](const auto& e) { return e.second.first == ino; });
    if (it == entries->end()) return fmt::format("inode {}", ino);
    path = "/" + it->first + path;
    ino = dir;
  }
  return path.empty() ? "/" : path;
}

void Workspace::Forget(Ino ino) {
  CollectAfter collect{impl_.get()};  // runs once the lock is released
  std::shared_lock l(impl_->mu_);
  Impl::InodeLocks il(*impl_, {ino});
  auto n = impl_->Load(ino);
  if (!n.ok() || n->nlink > 0) return;
  kv::Batch b;
  b.set_space_exempt();
  impl_->DeleteInode(&b, *n);
  Status s = impl_->Write(b);
  if (!s.ok()) spdlog::warn("workspace {}: freeing unlinked inode {}: {}", opts_.branch, ino, s.message());
}

}  // namespace layerfs::workspace
