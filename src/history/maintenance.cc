// Store::Stats, Store::Verify and Store::Gc: the whole-Store passes.
#include <ftw.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
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
int DuVisit(const char* path, const struct stat* sb, int type, struct FTW* ftw) {
  // The reserve (kv/space_guard.h) is room held for the database and the daemon's log has
  // preallocated room of its own: neither is the Store's data.
  if (ftw->level == 1 && (strcmp(path + ftw->base, "reserve") == 0 || strcmp(path + ftw->base, "layerfsd.log") == 0))
    return 0;
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

// The families that hold object records: chunks have their own unless the database is older.
std::vector<kv::Cf> RecordFamilies(const kv::Kv& kv) {
  std::vector<kv::Cf> out{kv::Cf::kBlobs, kv::Cf::kTrees, kv::Cf::kCommits};
  if (!kv.Aliased(kv::Cf::kChunks)) out.push_back(kv::Cf::kChunks);
  return out;
}

bool IsPending(std::string_view record) {
  auto info = objects::ParseRecord(record);
  return info.ok() && info->encoding == objects::Encoding::kPending;
}

}  // namespace

Result<StoreStats> Store::Stats() {
  objects::LocalOnly local;  // counts what is here; never fetches
  StoreStats st;
  st.policy = policy().ToString();
  // Sizes as the Store settles: what commits left to the background encoder is encoded first;
  // on a full disk or a read-only open it stays pending (and is counted as such).
  if (!read_only())
    if (Status d = DrainEncoding(); !d.ok() && d.code() != ENOSPC) return d;
  // Flushed so the table figures are complete; on a full disk they leave the memtables out.
  if (Status f = kv_->Flush(); !f.ok() && f.code() != ENOSPC) return f;
  for (const char* k : {"whole", "chunk", "metadata"}) st.max_chain_depth[k] = 0;
  for (kv::Cf cf : RecordFamilies(*kv_)) {
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
    if (cf == kv::Cf::kBlobs || cf == kv::Cf::kChunks) payload += cs.data_bytes;
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
  std::unordered_set<ObjectId, ObjectIdHash> seen_commits;
  if (commits.empty()) {
    LFS_ASSIGN(auto branches, Branches());
    for (auto& [name, head] : branches) commits.push_back(head);
    LFS_ASSIGN(auto rrefs, RemoteRefs());
    for (auto& [name, head] : rrefs) commits.push_back(head);
  }
  // Each damaged object is reported once, with the path it was first met at and every Commit
  // whose tree reaches it (a damaged blob shared by a hundred Commits is one line naming them).
  // On a lazy Store without fetch, an object not here yet is counted as missing, not reported.
  struct Problem {
    std::string what;  // "blob ID at PATH: message"
    std::vector<ObjectId> commits;
    bool missing = false;
  };
  std::vector<Problem> found;
  using Indices = std::vector<size_t>;
  auto problem = [&](const ObjectId& id, const char* kind, const std::string& path, const Status& s) -> size_t {
    const bool missing = lazy && !fetch && s.code() == ENOENT;
    if (missing) rep.missing++;
    found.push_back({fmt::format("{} {} at {}: {}", kind, id.Hex(), path.empty() ? "/" : path, s.message()), {}, missing});
    return found.size() - 1;
  };
  // Per tree, memoised: the entries below it (checked against what its parent's entry says: a
  // Workspace numbers inodes by these counts, so a wrong one would be a wrong inode number) and
  // the problems found below it.
  constexpr uint64_t kUnreadable = ~0ull;  // already reported
  struct TreeResult {
    uint64_t entries = 0;
    uint64_t subdirs = 0;      // its own subdirectories
    bool links_below = false;  // a hard link anywhere below (checked against entry summaries)
    Indices damage;
  };
  std::unordered_map<ObjectId, TreeResult, ObjectIdHash> trees;
  std::unordered_map<ObjectId, std::optional<size_t>, ObjectIdHash> files;  // file id -> its problem, if any
  std::function<TreeResult(const ObjectId&, const std::string&, size_t)> tree =
      [&](const ObjectId& id, const std::string& path, size_t depth) -> TreeResult {
    if (auto it = trees.find(id); it != trees.end()) return it->second;
    TreeResult res;
    if (depth > objects::kMaxTreeDepth) {
      res.entries = kUnreadable;  // not remembered: the same tree may sit higher elsewhere
      res.damage.push_back(problem(id, "tree", path, Status::Corrupt(fmt::format("nested deeper than {} directories",
                                                                               objects::kMaxTreeDepth))));
      return res;
    }
    auto entries = ReadTree(id);
    rep.objects++;
    if (!entries.ok()) {
      res.entries = kUnreadable;
      res.damage.push_back(problem(id, "tree", path, entries.status()));
      return trees[id] = std::move(res);
    }
    for (const auto& e : *entries) {
      std::string p = path + "/" + e.name;
      res.entries++;
      if (e.type != EntryType::kDir) res.links_below |= e.link_group != 0;
      if (e.type == EntryType::kDir) {
        res.subdirs++;
        TreeResult below = tree(e.id, p, depth + 1);
        res.links_below |= below.links_below;
        res.damage.insert(res.damage.end(), below.damage.begin(), below.damage.end());
        if (below.entries != kUnreadable && below.entries != e.subtree_entries)
          res.damage.push_back(problem(e.id, "tree", p, Status::Corrupt(fmt::format("{} entries below, its entry says {}",
                                                                                   below.entries, e.subtree_entries))));
        // A summary is what mounts believe without reading the subtree (nlink, hard links).
        if (below.entries != kUnreadable && e.summary &&
            (below.subdirs != e.subdirs || below.links_below != e.links_below))
          res.damage.push_back(problem(
              e.id, "tree", p,
              Status::Corrupt(fmt::format("{} subdirectories and {} below, its entry says {} and {}", below.subdirs,
                                          below.links_below ? "hard links" : "no hard links", e.subdirs,
                                          e.links_below ? "hard links" : "no hard links"))));
        if (__builtin_add_overflow(res.entries, e.subtree_entries, &res.entries)) res.entries = kUnreadable - 1;
      } else if (e.type == EntryType::kFile && !e.id.IsZero()) {
        auto [it, fresh] = files.try_emplace(e.id);
        if (fresh) {
          rep.objects++;
          auto n = history::ReadContentTo(*objects_, e.id, e.chunked, [](std::string_view) { return Status::Ok(); });
          if (!n.ok()) it->second = problem(e.id, e.chunked ? "chunked file" : "blob", p, n.status());
          else if (*n != e.size) it->second = problem(e.id, "blob", p, Status::Corrupt("size does not match its entry"));
          else rep.bytes += *n;
          report();
        }
        if (it->second) res.damage.push_back(*it->second);
      }
    }
    // Each problem once: subtrees shared many times over (a DAG of trees) would otherwise
    // multiply the list at every level.
    std::sort(res.damage.begin(), res.damage.end());
    res.damage.erase(std::unique(res.damage.begin(), res.damage.end()), res.damage.end());
    return trees[id] = std::move(res);
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
      found[problem(c, "commit", "", info.status())].commits.push_back(c);
      continue;
    }
    TreeResult root = tree(info->root, "", 0);
    std::unordered_set<size_t> mine(root.damage.begin(), root.damage.end());
    if (root.entries != kUnreadable && root.entries != info->files)
      mine.insert(problem(c, "commit", "", Status::Corrupt(fmt::format("{} entries in its tree, the commit says {}",
                                                                       root.entries, info->files))));
    for (size_t i : mine) found[i].commits.push_back(c);
    for (const auto& p : info->parents) commits.push_back(p);
    report();
  }
  meter.state().objects = rep.objects;
  meter.state().bytes = rep.bytes;
  meter.Done();
  for (auto& pr : found) {
    if (pr.missing) continue;
    std::string line = std::move(pr.what);
    if (!pr.commits.empty()) {
      line += pr.commits.size() == 1 ? "; in commit" : fmt::format("; in {} commits:", pr.commits.size());
      for (size_t i = 0; i < pr.commits.size() && i < 8; i++) line += " " + pr.commits[i].Hex().substr(0, 12);
      if (pr.commits.size() > 8) line += " ...";
    }
    rep.problems.push_back(std::move(line));
  }
  rep.pending = objects_->QueuedCount();
  return rep;
}

Result<GcReport> Store::Gc(const std::vector<ObjectId>& extra_roots, const ProgressFn& progress) {
  GcReport rep;
  std::unique_lock gc_lock(impl_->gc_mu);  // no fetch is between writing objects and its refs
  objects::LocalOnly local;                 // gc never fetches
  LFS_ASSIGN(bool lazy, IsLazy());
  ProgressMeter mark(progress, "gc-mark");
  // On a full disk what is still pending stays so: the sweep keeps pending records (below).
  if (Status d = DrainEncoding(); !d.ok() && d.code() != ENOSPC) return d;
  // No finalization between mark and sweep: it could choose a base the sweep then frees.
  auto finalize_lock = objects_->LockFinalize();
  // Flushed so bytes_before is the tables' size; on a full disk, marking and sweeping go on
  // (they read the memtables too) and the compaction below says why it cannot run.
  if (Status f = kv_->Flush(); !f.ok() && f.code() != ENOSPC) return f;
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
  b.set_space_exempt();  // deletions: they free space at the compaction below
  for (kv::Cf cf : RecordFamilies(*kv_)) {
    // Reachable ids are marked by the family the formats name (objects::CfOf): a chunk's is blobs'.
    const auto& reached = live[cf == kv::Cf::kChunks ? kv::Cf::kBlobs : cf];
    LFS_TRY(kv_->Scan(cf, "", "", [&](auto k, auto v) {
      // A pending record (left by a drain that met a full disk) is kept while its queue entry
      // names it; the gc after its encoding collects it if nothing reaches it.
      if (k.size() == ObjectId::kSize && !reached.count(ObjectId::FromKey(k)) && !IsPending(v)) {
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
  // The deletions are durable; the space comes back when the tables are rewritten without them.
  if (Status c = kv_->CompactAll(); !c.ok())
    return Status::Errorf(c.code(), "deleted {} unreachable objects, but could not compact them away ({}); run gc again "
                          "once there is room", rep.objects_deleted, c.message());
  sweep.Done();
  rep.bytes_after = path_.empty() ? 0 : AllocatedBytes(path_);
  return rep;
}

}  // namespace layerfs
