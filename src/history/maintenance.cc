// Store::Stats, Store::Verify and Store::Gc: the whole-Store passes.
#include <ftw.h>
#include <sys/stat.h>

#include <functional>
#include <map>
#include <unordered_set>

#include "base/coding.h"
#include "history/file_content.h"
#include "history/keys.h"
#include "history/store_impl.h"
#include "kv/kv.h"
#include "objects/object_store.h"
#include "objects/tree.h"

namespace layerfs {

using objects::Kind;

namespace {

uint64_t g_du_total;
int DuVisit(const char*, const struct stat* sb, int type, struct FTW*) {
  if (type == FTW_F || type == FTW_D || type == FTW_SL) g_du_total += static_cast<uint64_t>(sb->st_blocks) * 512;
  return 0;
}

uint64_t AllocatedBytes(const std::string& path) {
  static std::mutex mu;
  std::lock_guard l(mu);
  g_du_total = 0;
  nftw(path.c_str(), DuVisit, 16, FTW_PHYS);
  return g_du_total;
}

const char* PolicyKey(Kind k) {
  switch (k) {
    case Kind::kBlob: return "whole";
    case Kind::kChunk: return "chunk";
    case Kind::kTree: return "metadata";
    default: return nullptr;
  }
}

}  // namespace

Result<StoreStats> Store::Stats() {
  objects::LocalOnly local;  // counts what is here; never fetches
  StoreStats st;
  st.policy = policy().ToString();
  // Sizes as the Store settles: what commits left to the background encoder is encoded first.
  LFS_TRY(DrainEncoding());
  LFS_TRY(kv_->Flush());
  for (const char* k : {"whole", "chunk", "metadata"}) st.max_chain_depth[k] = 0;
  for (kv::Cf cf : {kv::Cf::kBlobs, kv::Cf::kTrees, kv::Cf::kCommits}) {
    LFS_TRY(kv_->Scan(cf, "", "", [&](auto, auto v) {
      auto info = objects::ParseRecord(v);
      if (!info.ok()) return true;
      std::string kind = objects::KindName(info->kind);
      st.objects[kind]++;
      if (info->encoding == objects::Encoding::kPending) {
        st.pending_objects++;
        st.pending_bytes += v.size();
      }
      st.depth_histogram[kind][info->depth]++;
      if (const char* pk = PolicyKey(info->kind))
        st.max_chain_depth[pk] = std::max(st.max_chain_depth[pk], info->depth);
      if (info->kind == Kind::kCommit) {
        std::string_view payload;
        (void)objects::ParseRecord(v, &payload);
        st.commits++;
      }
      return true;
    }));
  }
  // Logical bytes: the file bytes of every Commit's tree, as recorded in each Commit.
  LFS_TRY(kv_->Scan(kv::Cf::kCommits, "", "", [&](auto k, auto) {
    auto c = GetCommit(ObjectId::FromKey(k));
    if (c.ok()) st.logical_bytes += c->logical_bytes;
    return true;
  }));
  LFS_ASSIGN(auto branches, Branches());
  st.branches = branches.size();
  uint64_t payload = 0, meta = 0;
  for (int i = 0; i < kv::kNumCfs; i++) {
    auto cf = static_cast<kv::Cf>(i);
    LFS_ASSIGN(auto cs, kv_->Stats(cf));
    st.cf_bytes[kv::CfName(cf)] = cs.sst_file_bytes;
    if (cf == kv::Cf::kBlobs) payload += cs.data_bytes;
    else if (cf != kv::Cf::kWorkspace) meta += cs.data_bytes;
  }
  st.payload_bytes = payload;
  st.metadata_bytes = meta;
  st.allocated_bytes = path_.empty() ? payload + meta : AllocatedBytes(path_);
  st.other_bytes = st.allocated_bytes > payload + meta ? st.allocated_bytes - payload - meta : 0;
  return st;
}

Result<VerifyReport> Store::Verify(const std::vector<ObjectId>& requested, const ProgressFn& progress,
                                   bool fetch) {
  VerifyReport rep;
  ProgressMeter meter(progress, "verify");
  auto report = [&] {
    meter.state().objects = rep.objects;
    meter.state().bytes = rep.bytes;
    meter.Update();
  };
  LFS_ASSIGN(bool lazy, IsLazy());
  // A lazy Store's verify checks what is here and counts the rest, unless asked to fetch it.
  std::optional<objects::LocalOnly> local;
  if (!fetch) local.emplace();
  objects_->ClearCache();  // read everything back from the database, not from memory
  std::vector<ObjectId> commits = requested;
  std::unordered_set<ObjectId, ObjectIdHash> seen_commits, seen;
  if (commits.empty()) {
    LFS_ASSIGN(auto branches, Branches());
    for (auto& [name, head] : branches) commits.push_back(head);
    LFS_ASSIGN(auto rrefs, RemoteRefs());
    for (auto& [name, head] : rrefs) commits.push_back(head);
  }
  auto problem = [&](const ObjectId& id, const char* kind, const std::string& path, const Status& s) {
    if (lazy && !fetch && s.code() == ENOENT) {
      rep.missing++;
      return;
    }
    rep.problems.push_back(fmt::format("{} {} at {}: {}", kind, id.Hex(), path.empty() ? "/" : path, s.message()));
  };
  // Returns the entries below the tree, checked against what its parent's entry says: a
  // Workspace numbers inodes by these counts, so a wrong one would be a wrong inode number.
  constexpr uint64_t kUnreadable = ~0ull;  // already reported
  std::unordered_map<ObjectId, uint64_t, ObjectIdHash> entry_counts;
  std::function<uint64_t(const ObjectId&, const std::string&, size_t)> tree =
      [&](const ObjectId& id, const std::string& path, size_t depth) -> uint64_t {
    if (auto it = entry_counts.find(id); it != entry_counts.end()) return it->second;
    if (depth > objects::kMaxTreeDepth) {
      problem(id, "tree", path, Status::Corrupt(fmt::format("nested deeper than {} directories", objects::kMaxTreeDepth)));
      return kUnreadable;  // not remembered: the same tree may sit higher elsewhere
    }
    auto entries = ReadTree(id);
    rep.objects++;
    if (!entries.ok()) {
      problem(id, "tree", path, entries.status());
      return entry_counts[id] = kUnreadable;
    }
    uint64_t count = 0;
    for (const auto& e : *entries) {
      std::string p = path + "/" + e.name;
      count++;
      if (e.type == EntryType::kDir) {
        uint64_t below = tree(e.id, p, depth + 1);
        if (below != kUnreadable && below != e.subtree_entries)
          problem(e.id, "tree", p, Status::Corrupt(fmt::format("{} entries below, its entry says {}", below,
                                                               e.subtree_entries)));
        if (__builtin_add_overflow(count, e.subtree_entries, &count)) count = kUnreadable - 1;
      } else if (e.type == EntryType::kFile && !e.id.IsZero()) {
        if (!seen.insert(e.id).second) continue;
        rep.objects++;
        auto n = history::ReadContentTo(*objects_, e.id, e.chunked, [](std::string_view) { return Status::Ok(); });
        if (!n.ok()) problem(e.id, e.chunked ? "chunked file" : "blob", p, n.status());
        else if (*n != e.size) problem(e.id, "blob", p, Status::Corrupt("size does not match its entry"));
        else rep.bytes += *n;
        report();
      }
    }
    entry_counts[id] = count;
    return count;
  };
  // Every commit reachable through all parents.
  while (!commits.empty()) {
    ObjectId c = commits.back();
    commits.pop_back();
    if (!seen_commits.insert(c).second) continue;
    rep.commits++;
    rep.objects++;
    auto info = GetCommit(c);
    if (!info.ok()) {
      problem(c, "commit", "", info.status());
      continue;
    }
    uint64_t entries = tree(info->root, "", 0);
    if (entries != kUnreadable && entries != info->files)
      problem(c, "commit", "", Status::Corrupt(fmt::format("{} entries in its tree, the commit says {}", entries,
                                                           info->files)));
    for (const auto& p : info->parents) commits.push_back(p);
    report();
  }
  meter.state().objects = rep.objects;
  meter.state().bytes = rep.bytes;
  meter.Done();
  rep.pending = objects_->QueuedCount();
  return rep;
}

Result<GcReport> Store::Gc(const std::vector<ObjectId>& extra_roots, const ProgressFn& progress) {
  GcReport rep;
  std::unique_lock gc_lock(impl_->gc_mu);  // no fetch is between writing objects and its refs
  objects::LocalOnly local;                 // gc never fetches
  LFS_ASSIGN(bool lazy, IsLazy());
  ProgressMeter mark(progress, "gc-mark");
  LFS_TRY(DrainEncoding());
  // No finalization between mark and sweep: it could choose a base the sweep then frees.
  auto finalize_lock = objects_->LockFinalize();
  LFS_TRY(kv_->Flush());
  rep.bytes_before = path_.empty() ? 0 : AllocatedBytes(path_);
  // Mark: commits, trees, file content and chunks reachable from any branch, plus every delta
  // base their records need.
  // Live ids per column family: a tree and a blob with the same bytes share an id, and marking
  // one must neither stop the other's traversal nor keep the other's record alive.
  std::map<kv::Cf, std::unordered_set<ObjectId, ObjectIdHash>> live;
  std::vector<std::pair<Kind, ObjectId>> work;
  LFS_ASSIGN(auto branches, Branches());
  for (auto& [name, head] : branches) work.emplace_back(Kind::kCommit, head);
  for (const auto& id : extra_roots) work.emplace_back(Kind::kCommit, id);
  LFS_ASSIGN(auto rrefs, RemoteRefs());
  for (auto& [name, head] : rrefs) work.emplace_back(Kind::kCommit, head);
  while (!work.empty()) {
    auto [kind, id] = work.back();
    work.pop_back();
    if (id.IsZero() || !live[objects::CfOf(kind)].insert(id).second) continue;
    mark.state().objects++;
    mark.Update();
    // Keep the chain below this record.
    auto info = objects_->Info(kind, id);
    if (!info.ok() && lazy && info.status().code() == ENOENT) {
      // Not fetched: what it reaches is missing too, or new and reached through new trees.
      rep.missing++;
      continue;
    }
    if (!info.ok()) return info.status().Context("gc mark");
    if (info->encoding == objects::Encoding::kDelta) work.emplace_back(kind, info->base);
    if (kind == Kind::kCommit) {
      LFS_ASSIGN(auto c, GetCommit(id));
      work.emplace_back(Kind::kTree, c.root);
      for (auto& p : c.parents) work.emplace_back(Kind::kCommit, p);
    } else if (kind == Kind::kTree) {
      LFS_ASSIGN(auto entries, ReadTree(id));
      for (auto& e : entries) {
        if (e.type == EntryType::kDir) work.emplace_back(Kind::kTree, e.id);
        else if (e.type == EntryType::kFile) work.emplace_back(e.chunked ? Kind::kChunkList : Kind::kBlob, e.id);
      }
    } else if (kind == Kind::kChunkList) {
      LFS_ASSIGN(std::string list, objects_->Get(Kind::kChunkList, id));
      LFS_ASSIGN(auto chunks, objects::DecodeChunkList(list));
      for (auto& ch : chunks) work.emplace_back(Kind::kChunk, ch.id);
    }
  }
  mark.Done();
  ProgressMeter sweep(progress, "gc-sweep");
  // Sweep, in bounded batches.
  kv::Batch b;
  // A new epoch: marks of fetched packs from before it are no longer trusted (docs/design.md,
  // "Fetch, pull, clone"): an object this gc frees may be one a later pack relies on.
  {
    LFS_ASSIGN(auto ev, kv_->Get(kv::Cf::kMeta, history::kGcEpochKey));
    uint64_t epoch = 0;
    if (ev && ev->size() == 8) {
      base::Reader r(*ev);
      (void)r.Fixed64(&epoch);
    }
    std::string nv;
    base::PutFixed64(&nv, epoch + 1);
    b.Put(kv::Cf::kMeta, history::kGcEpochKey, nv);
  }
  for (kv::Cf cf : {kv::Cf::kBlobs, kv::Cf::kTrees, kv::Cf::kCommits}) {
    LFS_TRY(kv_->Scan(cf, "", "", [&](auto k, auto) {
      if (k.size() == ObjectId::kSize && !live[cf].count(ObjectId::FromKey(k))) {
        b.Delete(cf, k);
        rep.objects_deleted++;
      }
      sweep.state().objects++;
      sweep.Update();
      return true;
    }));
  }
  LFS_TRY(kv_->Write(b, true));
  objects_->ClearCache();
  LFS_TRY(kv_->CompactAll());
  sweep.Done();
  rep.bytes_after = path_.empty() ? 0 : AllocatedBytes(path_);
  return rep;
}

}  // namespace layerfs
