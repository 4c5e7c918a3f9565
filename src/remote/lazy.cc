#include "remote/lazy.h"

#include <chrono>

#include "objects/object_store.h"

namespace layerfs::remote {

using objects::Kind;

namespace {
constexpr auto kRefreshInterval = std::chrono::seconds(5);
}

Result<std::vector<std::shared_ptr<Remote>>> LazySource::LazyRemotes() {
  LFS_ASSIGN(auto infos, ListRemotes(store_));
  std::vector<std::shared_ptr<Remote>> out;
  std::lock_guard l(mu_);
  std::map<std::string, std::shared_ptr<Remote>> keep;
  for (const auto& info : infos) {
    if (!info.lazy) continue;
    auto it = remotes_.find(info.name);
    if (it != remotes_.end() && it->second->info().url == info.url) {
      keep[info.name] = it->second;
    } else {
      auto r = Remote::Open(store_, info);
      if (!r.ok()) continue;  // an unreachable remote is skipped; others may have it
      keep[info.name] = std::shared_ptr<Remote>(std::move(*r));
    }
    out.push_back(keep[info.name]);
  }
  remotes_ = std::move(keep);
  return out;
}

Status LazySource::Fetch(Kind kind, const ObjectId& id) {
  std::pair<int, ObjectId> key{static_cast<int>(objects::CfOf(kind)), id};
  {
    std::unique_lock l(mu_);
    // One fetch per id at a time: a second reader waits for the first, then finds it local.
    bool waited = false;
    while (in_flight_.count(key) || running_ >= kMaxConcurrent) {
      waited |= in_flight_.count(key) > 0;
      cv_.wait(l);
    }
    if (waited) {
      l.unlock();
      objects::LocalOnly local;
      LFS_ASSIGN(auto rec, store_.objects().Record(kind, id));
      if (rec) return Status::Ok();
      l.lock();
      while (in_flight_.count(key) || running_ >= kMaxConcurrent) cv_.wait(l);
    }
    in_flight_.insert(key);
    running_++;
  }
  Status s = FetchLocked(kind, id);
  // What a reader (a mount's above all) is told: the object is absent, or reading it failed.
  // A remote that cannot be reached is an I/O error of this Store, with the cause in the message.
  if (!s.ok() && s.code() != ENOENT && s.code() != EIO)
    s = Status::Errorf(EIO, "{} {} could not be fetched: {}", objects::KindName(kind), id.Hex(), s.message());
  {
    std::lock_guard l(mu_);
    in_flight_.erase(key);
    running_--;
  }
  cv_.notify_all();
  return s;
}

Status LazySource::FetchLocked(Kind kind, const ObjectId& id) {
  LFS_ASSIGN(auto remotes, LazyRemotes());
  Status last = Status::NotFound(fmt::format("{} {} is missing (no lazy remote has it)", objects::KindName(kind), id.Hex()));
  for (const auto& r : remotes) {
    Status s = FetchFrom(*r, kind, id);
    if (s.ok()) return s;
    if (s.code() != ENOENT) return s;
    last = s;
  }
  return last;
}

Status LazySource::FetchFrom(Remote& remote, Kind kind, const ObjectId& id) {
  const kv::Cf cf = objects::CfOf(kind);
  auto& os = store_.objects();
  objects::LocalOnly local;  // nothing below may recurse into a fetch
  // The chain, top down, to the first record the Store has.
  std::vector<Located> chain;
  ObjectId cur = id;
  for (;;) {
    LFS_ASSIGN(auto loc, remote.Lookup(cf, cur));
    if (!loc) {
      // Perhaps pushed since the catalog was last read.
      LFS_TRY(remote.RefreshAtMostEvery(kRefreshInterval));
      LFS_ASSIGN(loc, remote.Lookup(cf, cur));
    }
    if (!loc) {
      if (chain.empty())
        return Status::NotFound(fmt::format("{} {} is missing (remote '{}' does not have it)", objects::KindName(kind),
                                            id.Hex(), remote.name()));
      return Status::Corrupt(fmt::format("remote '{}' ({}): {} {}: its delta base {} is in no index", remote.name(),
                                         remote.transport().url(), objects::KindName(kind), chain.back().entry.id.Hex(),
                                         cur.Hex()));
    }
    if (!chain.empty() && loc->entry.depth + 1 != chain.back().entry.depth)
      return Status::Corrupt(fmt::format("remote '{}' ({}): {} {}: delta chain depths are inconsistent", remote.name(),
                                         remote.transport().url(), objects::KindName(kind), id.Hex()));
    chain.push_back(std::move(*loc));
    if (chain.back().entry.depth == 0) break;
    cur = chain.back().entry.base;
    LFS_ASSIGN(auto have, os.Record(kind, cur));
    if (have) break;
  }
  // The neighbours of zstd-framed records: the rest of their frame, read anyway.
  std::vector<Located> wanted = chain;
  {
    std::set<std::pair<int, ObjectId>> in;
    for (const auto& c : chain) in.insert({static_cast<int>(c.entry.cf()), c.entry.id});
    for (const auto& c : chain) {
      if (c.entry.codec != FrameCodec::kZstd) continue;
      LFS_ASSIGN(auto frame, FrameEntries(remote, c));
      for (auto& e : frame) {
        if (!in.insert({static_cast<int>(e.cf()), e.id}).second) continue;
        LFS_ASSIGN(auto have, os.Record(e.kind, e.id));
        if (have) continue;
        wanted.push_back({std::move(e), c.pack_number, c.pack});
      }
    }
  }
  std::vector<std::string> records;
  uint64_t bytes = 0;
  Status rs = remote.ReadRecords(wanted, &records, &bytes);
  bytes_ += bytes;
  LFS_TRY(rs);
  objects::Txn txn;
  for (size_t i = 0; i < chain.size(); i++) os.StageRecord(&txn, chain[i].entry.kind, chain[i].entry.id, records[i]);
  // Bottom up: each fetched record is decoded and hashed itself, its base already checked.
  for (size_t i = chain.size(); i-- > 0;) {
    auto content = os.GetVerified(kind, chain[i].entry.id, &txn);
    if (!content.ok())
      return Status::Corrupt(fmt::format("remote '{}' ({}): {} {} is damaged: {}", remote.name(),
                                         remote.transport().url(), objects::KindName(kind), chain[i].entry.id.Hex(),
                                         content.status().message()));
  }
  // Each neighbour on its own: one that does not hash right is dropped, not kept (a later read
  // of it fetches it again and reports the damage then).
  uint64_t kept = chain.size();
  for (size_t i = chain.size(); i < wanted.size(); i++) {
    const IndexEntry& e = wanted[i].entry;
    objects::Txn one;
    os.StageRecord(&one, e.kind, e.id, records[i]);
    if (!os.GetVerified(e.kind, e.id, &one).ok()) continue;
    os.StageRecord(&txn, e.kind, e.id, std::move(records[i]));
    kept++;
  }
  kv::Batch b;
  os.TakeBatch(&b, &txn);
  LFS_TRY(store_.kv().Write(b, false));
  objects_ += kept;
  return Status::Ok();
}

Result<std::vector<IndexEntry>> LazySource::FrameEntries(Remote& remote, const Located& at) {
  std::lock_guard l(frames_mu_);
  std::pair<std::string, std::string> key{remote.name(), at.pack};
  auto it = frames_.find(key);
  if (it == frames_.end()) {
    LFS_ASSIGN(auto index, remote.IndexOf({at.pack, at.pack_number, false}));
    std::map<uint64_t, std::vector<IndexEntry>> by_frame;
    for (auto& e : index.entries)
      if (e.codec == FrameCodec::kZstd) by_frame[e.frame_offset].push_back(std::move(e));
    it = frames_.emplace(key, std::move(by_frame)).first;
  }
  auto f = it->second.find(at.entry.frame_offset);
  if (f == it->second.end()) return std::vector<IndexEntry>();
  return f->second;
}

Result<std::shared_ptr<LazySource>> AttachLazySource(Store& store) {
  LFS_ASSIGN(bool lazy, store.IsLazy());
  auto& os = store.objects();
  auto current = std::dynamic_pointer_cast<LazySource>(os.source());
  if (!lazy) {
    if (current) os.SetSource(nullptr);
    return std::shared_ptr<LazySource>();
  }
  if (current) return current;
  auto src = std::make_shared<LazySource>(store);
  os.SetSource(src);
  return src;
}

}  // namespace layerfs::remote
