// Fetch and clone: refs first, then the catalog, then every record of the packs not yet fetched
// that the Store lacks, in ascending chain depth, verified before it is written; tracking refs
// last.
#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <unordered_set>

#include "history/keys.h"
#include "objects/object_store.h"
#include "remote/remote.h"
#include "remote/sync.h"

namespace layerfs::remote {

using objects::Kind;

namespace {

constexpr uint64_t kBatchBytes = 64u << 20;
constexpr size_t kBatchRecords = 20000;

struct Key {
  kv::Cf cf;
  ObjectId id;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const { return ObjectIdHash()(k.id) ^ static_cast<size_t>(k.cf); }
};

// Reads, verifies and writes one batch of records (bases before deltas, or already local).
Status TakeIn(Store& store, Remote& remote, const std::vector<Located>& batch, TransferStats* stats) {
  std::vector<std::string> records;
  LFS_TRY(remote.ReadRecords(batch, &records, &stats->bytes));
  auto& os = store.objects();
  objects::Txn txn;
  for (size_t i = 0; i < batch.size(); i++) os.StageRecord(&txn, batch[i].entry.kind, batch[i].entry.id, records[i]);
  {
    objects::LocalOnly local;  // a base must be local or in this batch: the order guarantees it
    for (const auto& w : batch) {
      auto content = os.GetVerified(w.entry.kind, w.entry.id, &txn);
      if (!content.ok())
        return Status::Corrupt(fmt::format("remote '{}' ({}): {} {} is damaged: {}", remote.name(),
                                           remote.transport().url(), objects::KindName(w.entry.kind),
                                           w.entry.id.Hex(), content.status().message()));
    }
  }
  kv::Batch b;
  os.TakeBatch(&b, &txn);
  LFS_TRY(store.kv().Write(b, false));
  stats->objects += batch.size();
  return Status::Ok();
}

Status FetchObjects(Store& store, Remote& remote, ProgressMeter& meter, TransferStats* stats,
                    std::vector<Remote::Pack>* fetched_packs) {
  LFS_ASSIGN(auto packs, remote.Packs());
  std::vector<Located> needed;
  std::unordered_set<Key, KeyHash> seen;
  {
    objects::LocalOnly local;
    for (const auto& p : packs) {
      if (p.fetched) continue;
      fetched_packs->push_back(p);
      LFS_ASSIGN(auto index, remote.IndexOf(p));
      for (const auto& e : index.entries) {
        if (!seen.insert({e.cf(), e.id}).second) continue;
        LFS_ASSIGN(auto have, store.objects().Record(e.kind, e.id));
        if (have) continue;
        needed.push_back({e, p.number, p.name});
      }
    }
  }
  // Bases first: a delta's base has a smaller depth. Then pack order, frame order.
  std::stable_sort(needed.begin(), needed.end(), [](const Located& a, const Located& b) {
    if (a.entry.depth != b.entry.depth) return a.entry.depth < b.entry.depth;
    if (a.pack != b.pack) return a.pack < b.pack;
    return a.entry.frame_offset < b.entry.frame_offset;
  });
  meter.state().objects_total = needed.size();
  std::vector<Located> batch;
  uint64_t batch_bytes = 0;
  auto flush = [&]() -> Status {
    if (batch.empty()) return Status::Ok();
    LFS_TRY(TakeIn(store, remote, batch, stats));
    batch.clear();
    batch_bytes = 0;
    meter.state().objects = stats->objects;
    meter.state().bytes = stats->bytes;
    meter.Update();
    return Status::Ok();
  };
  for (size_t i = 0; i < needed.size(); i++) {
    // A new depth starts a new batch unless this one's bases are all in earlier batches anyway
    // (only deltas whose base is in this very batch need it: staged records are visible).
    batch_bytes += needed[i].entry.codec == FrameCodec::kStored ? needed[i].entry.frame_length
                                                                 : needed[i].entry.record_length;
    batch.push_back(std::move(needed[i]));
    if (batch_bytes >= kBatchBytes || batch.size() >= kBatchRecords) LFS_TRY(flush());
  }
  LFS_TRY(flush());
  return store.kv().SyncWal();
}

}  // namespace

Result<FetchResult> Fetch(Store& store, const std::string& remote_name, const FetchOptions& opts) {
  auto start = std::chrono::steady_clock::now();
  LFS_ASSIGN(auto remote, Remote::Open(store, remote_name));
  FetchResult res;
  res.remote = remote_name;
  res.url = remote->info().url;
  res.lazy = remote->info().lazy;
  LFS_ASSIGN(bool attached, remote->Attach(/*create=*/false));
  std::map<std::string, BranchHead> heads;
  if (attached) {
    // Refs before indexes: every ref read was moved after the packs it needs were indexed.
    LFS_ASSIGN(heads, remote->Branches());
    LFS_TRY(remote->Refresh(&res.received.indexes, &res.received.bytes));
  }
  // Objects no ref reaches yet are written from here on: gc must wait.
  std::shared_lock gc_pin(store.gc_mutex());
  std::vector<Remote::Pack> fetched_packs;
  if (attached && !res.lazy) {
    ProgressMeter meter(opts.progress, "fetch");
    LFS_TRY(FetchObjects(store, *remote, meter, &res.received, &fetched_packs));
    meter.Done();
  }
  // Every head must now be here (full) or catalogued (lazy); otherwise the remote is damaged.
  for (const auto& [branch, h] : heads) {
    bool ok;
    if (res.lazy) {
      LFS_ASSIGN(auto loc, remote->Lookup(kv::Cf::kCommits, h.id));
      ok = loc.has_value();
      if (!ok) {
        objects::LocalOnly local;
        LFS_ASSIGN(auto rec, store.objects().Record(Kind::kCommit, h.id));
        ok = rec.has_value();
      }
    } else {
      objects::LocalOnly local;
      LFS_ASSIGN(auto rec, store.objects().Record(Kind::kCommit, h.id));
      ok = rec.has_value();
    }
    if (!ok)
      return Status::Corrupt(fmt::format("remote '{}' ({}): branch '{}' points at commit {}, which no index holds",
                                         remote_name, res.url, branch, h.id.Hex()));
  }
  // Tracking refs last, with the packs' marks, in one synced batch.
  kv::Batch b;
  LFS_ASSIGN(auto old_refs, store.RemoteRefs());
  std::map<std::string, ObjectId> old;
  std::string prefix = remote_name + "/";
  for (const auto& [name, id] : old_refs)
    if (name.compare(0, prefix.size(), prefix) == 0) old[name.substr(prefix.size())] = id;
  for (const auto& [branch, h] : heads) {
    RefUpdate u{branch, std::nullopt, h.id, "", ""};
    auto it = old.find(branch);
    if (it == old.end()) {
      u.status = "new";
    } else {
      u.old_id = it->second;
      if (it->second == h.id) {
        u.status = "unchanged";
      } else if (res.lazy) {
        u.status = "updated";
      } else {
        LFS_ASSIGN(bool ff, IsAncestor(store, it->second, h.id));
        u.status = ff ? "updated" : "forced";
      }
    }
    if (u.status != "unchanged") b.Put(kv::Cf::kMeta, history::RemoteRefKey(remote_name, branch), h.id.AsKey());
    res.refs.push_back(std::move(u));
  }
  for (const auto& [branch, id] : old) {
    if (heads.count(branch) || !attached) continue;
    res.refs.push_back({branch, id, std::nullopt, "deleted", ""});
    b.Delete(kv::Cf::kMeta, history::RemoteRefKey(remote_name, branch));
  }
  LFS_TRY(remote->MarkFetched(fetched_packs, &b));
  LFS_TRY(store.kv().Write(b, true));
  res.received.packs = fetched_packs.size();
  res.received.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return res;
}

namespace {

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

// Removes what a failed clone made: the directory if it created it, else its contents.
void Undo(const std::string& path, bool created) {
  nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
  if (!created) mkdir(path.c_str(), 0700);
}

}  // namespace

Result<CloneResult> Clone(const std::string& url, const std::string& path, const CloneOptions& opts) {
  // A directory remote is made by its first push; cloning one that is not there is a mistyped
  // path, not an empty remote. An empty remote is an empty directory.
  LFS_ASSIGN(auto t, Connect(url, /*existing=*/true));
  std::optional<RemoteConfig> cfg;
  {
    auto data = t->Get("config");
    if (data.ok()) {
      LFS_ASSIGN(cfg, DecodeRemoteConfig(*data));
    } else if (data.status().code() != ENOENT) {
      return data.status();
    }
  }
  struct stat sb;
  bool existed = stat(path.c_str(), &sb) == 0;
  CreateOptions co;
  Policy policy;
  if (cfg) {
    co.seed = cfg->seed;
    co.empty = true;
    policy = cfg->policy;
  }
  LFS_ASSIGN(auto store, Store::Create(path, policy, co));
  CloneResult res;
  res.store = path;
  res.url = url;
  res.lazy = opts.lazy;
  res.empty_remote = !cfg;
  Status s = [&]() -> Status {
    LFS_TRY(AddRemote(*store, {opts.remote_name, url, opts.lazy, ""}));
    FetchOptions fo;
    fo.progress = opts.progress;
    LFS_ASSIGN(res.fetch, Fetch(*store, opts.remote_name, fo));
    kv::Batch b;
    if (!cfg) {
      LFS_ASSIGN(auto main, store->BranchHead("main"));
      if (main) res.branches.emplace_back("main", *main);
    }
    for (const auto& u : res.fetch.refs) {
      if (!u.new_id) continue;
      b.Put(kv::Cf::kMeta, history::RefKey(u.branch), u.new_id->AsKey());
      res.branches.emplace_back(u.branch, *u.new_id);
    }
    return store->kv().Write(b, true);
  }();
  if (!s.ok()) {
    store.reset();
    Undo(path, !existed);
    return s;
  }
  return res;
}

}  // namespace layerfs::remote
