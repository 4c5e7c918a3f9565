#include "objects/object_store.h"

#include <algorithm>
#include <vector>

#include "base/coding.h"
#include "base/hash.h"
#include "codec/zstd_codec.h"

namespace layerfs::objects {

kv::Cf CfOf(Kind k) {
  switch (k) {
    case Kind::kBlob:
    case Kind::kChunk:
    case Kind::kChunkList: return kv::Cf::kBlobs;
    case Kind::kTree: return kv::Cf::kTrees;
    case Kind::kCommit: return kv::Cf::kCommits;
  }
  return kv::Cf::kBlobs;
}

kv::Cf StorageCfOf(Kind k) { return k == Kind::kChunk ? kv::Cf::kChunks : CfOf(k); }

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kBlob: return "blob";
    case Kind::kChunk: return "chunk";
    case Kind::kChunkList: return "chunklist";
    case Kind::kTree: return "tree";
    case Kind::kCommit: return "commit";
  }
  return "?";
}

uint64_t MaxDecodedSize(Kind k) {
  switch (k) {
    case Kind::kBlob:
    case Kind::kChunk: return 2 << 20;
    case Kind::kChunkList:
    case Kind::kTree: return 256 << 20;
    case Kind::kCommit: return 64 << 20;
  }
  return 0;
}

// Record: u8 kind, u8 encoding, varint depth, varint decoded size, [16-byte base], payload.
Result<RecordInfo> ParseRecord(std::string_view rec, std::string_view* payload) {
  base::Reader r(rec);
  uint8_t kind, enc;
  uint64_t depth, size;
  if (!r.U8(&kind) || !r.U8(&enc) || !r.Varint(&depth) || !r.Varint(&size) || kind < 1 ||
      kind > 5 || enc > 3 || depth > 1024)
    return Status::Corrupt("object record header is damaged");
  if (size > MaxDecodedSize(static_cast<Kind>(kind)))
    return Status::Corrupt(fmt::format("object record declares {} bytes, more than a {} holds", size,
                                       KindName(static_cast<Kind>(kind))));
  RecordInfo info{static_cast<Kind>(kind), static_cast<Encoding>(enc), static_cast<uint32_t>(depth),
                  size, {}, rec.size()};
  if (info.encoding == Encoding::kDelta) {
    std::string_view b;
    if (!r.Raw(ObjectId::kSize, &b)) return Status::Corrupt("object record base is truncated");
    info.base = ObjectId::FromKey(b);
  } else if (depth != 0) {
    return Status::Corrupt("full object record with nonzero depth");
  } else if (info.encoding == Encoding::kPending) {
    std::string_view h;
    if (!r.Raw(ObjectId::kSize, &h)) return Status::Corrupt("pending object record hint is truncated");
    info.hint = ObjectId::FromKey(h);
  }
  if (payload) *payload = r.Rest();
  return info;
}

namespace {
thread_local int t_local_only = 0;
}  // namespace

LocalOnly::LocalOnly() { t_local_only++; }
LocalOnly::~LocalOnly() { t_local_only--; }
bool LocalOnly::active() { return t_local_only > 0; }

// Blobs and chunks are both plain file content and may stand for each other.
static bool Compatible(Kind a, Kind b) {
  auto content = [](Kind k) { return k == Kind::kBlob || k == Kind::kChunk; };
  return a == b || (content(a) && content(b));
}

static std::string RecordHeader(Kind kind, Encoding enc, uint32_t depth, uint64_t size,
                                const ObjectId* base) {
  std::string h;
  base::PutU8(&h, static_cast<uint8_t>(kind));
  base::PutU8(&h, static_cast<uint8_t>(enc));
  base::PutVarint(&h, depth);
  base::PutVarint(&h, size);
  if (base) h.append(base->AsKey());
  return h;
}

ObjectStore::ObjectStore(kv::Kv* kv, uint64_t seed, Policy policy, Tuning tuning)
    : kv_(kv), seed_(seed), policy_(policy), tuning_(tuning) {}

uint32_t ObjectStore::CapFor(Kind k) const {
  switch (k) {
    case Kind::kBlob: return policy_.whole;
    case Kind::kChunk: return policy_.chunk;
    case Kind::kTree: return policy_.meta;
    default: return 0;
  }
}

static std::string StagedKey(Kind kind, const ObjectId& id) {
  std::string k(1, static_cast<char>(CfOf(kind)));
  k.append(id.AsKey());
  return k;
}

// The queue of pending records: index family, "enc/" + BE64 list number, value: (u8 kind,
// 16-byte id)* of the pending records one batch wrote (docs/format.md). A list is deleted once
// every record it names is final; one key per commit keeps the queue's tombstones few.
constexpr std::string_view kQueuePrefix = "enc/";
static std::string QueueListKey(uint64_t list) {
  std::string k(kQueuePrefix);
  base::PutBigEndian64(&k, list);
  return k;
}
static std::string QueueSetKey(Kind kind, const ObjectId& id) {
  std::string k(1, static_cast<char>(kind));
  k.append(id.AsKey());
  return k;
}

// A pending record: the header of a full record with encoding kPending, the 16-byte hint (zero
// for none), then the content as is.
static std::string PendingRecord(Kind kind, std::string_view content, const std::optional<ObjectId>& hint) {
  std::string r = RecordHeader(kind, Encoding::kPending, 0, content.size(), nullptr);
  r.append(hint ? hint->AsKey() : ObjectId{}.AsKey());
  r.append(content);
  return r;
}

// A blob and a chunk stand for each other (Compatible): a chunk may be a delta against a blob
// (a file that grew past the chunking threshold) and either may be found as the other by
// content id. With chunks in a family of their own (format 8), a record not in its kind's
// family is looked for in the other content family.
Result<std::optional<std::string>> ObjectStore::GetStored(Kind kind, const ObjectId& id, kv::Cf* where) {
  kv::Cf cf = StorageCfOf(kind);
  if (where) *where = cf;
  LFS_ASSIGN(auto rec, kv_->Get(cf, id.AsKey()));
  if (rec || (kind != Kind::kBlob && kind != Kind::kChunk) || kv_->Aliased(kv::Cf::kChunks)) return rec;
  cf = kind == Kind::kChunk ? kv::Cf::kBlobs : kv::Cf::kChunks;
  LFS_ASSIGN(rec, kv_->Get(cf, id.AsKey()));
  if (rec && where) *where = cf;
  return rec;
}

Result<std::optional<std::string>> ObjectStore::ReadRecord(Kind kind, const ObjectId& id, Txn* txn) {
  const std::string key = StagedKey(kind, id);
  if (txn) {
    auto it = txn->records_.find(key);
    if (it != txn->records_.end()) return std::optional<std::string>(it->second);
  }
  {
    std::lock_guard l(mu_);
    auto it = shared_.records_.find(key);
    if (it != shared_.records_.end()) return std::optional<std::string>(it->second);
  }
  LFS_ASSIGN(auto rec, GetStored(kind, id));
  if (rec || LocalOnly::active() || (txn && txn->dry_)) return rec;
  std::shared_ptr<ObjectSource> source;
  {
    std::lock_guard l(source_mu_);
    source = source_;
  }
  if (!source) return rec;
  Status s = source->Fetch(kind, id);
  if (!s.ok()) {
    if (s.code() == ENOENT) return rec;  // the source lacks it too: absent, as before
    return s;
  }
  return GetStored(kind, id);
}

Result<std::optional<std::string>> ObjectStore::Record(Kind kind, const ObjectId& id, Txn* txn) {
  return ReadRecord(kind, id, txn);
}

void ObjectStore::StageRecord(Txn* txn, Kind kind, const ObjectId& id, std::string record) {
  txn->batch_.Put(StorageCfOf(kind), id.AsKey(), record);
  txn->records_[StagedKey(kind, id)] = std::move(record);
}

void ObjectStore::SetSource(std::shared_ptr<ObjectSource> source) {
  std::lock_guard l(source_mu_);
  source_ = std::move(source);
}

bool ObjectStore::has_source() {
  std::lock_guard l(source_mu_);
  return source_ != nullptr;
}

std::shared_ptr<ObjectSource> ObjectStore::source() {
  std::lock_guard l(source_mu_);
  return source_;
}

Result<bool> ObjectStore::Exists(Kind kind, const ObjectId& id, Txn* txn) {
  LFS_ASSIGN(auto rec, ReadRecord(kind, id, txn));
  return rec.has_value();
}

Result<RecordInfo> ObjectStore::Info(Kind kind, const ObjectId& id, Txn* txn) {
  LFS_ASSIGN(auto rec, ReadRecord(kind, id, txn));
  if (!rec) return Status::NotFound(fmt::format("{} {} is missing", KindName(kind), id.Hex()));
  return ParseRecord(*rec);
}

void ObjectStore::CachePut(const ObjectId& id, const std::string& content) {
  if (tuning_.cache_bytes == 0 || content.size() > tuning_.cache_bytes / 4) return;
  std::lock_guard l(mu_);
  if (lru_index_.count(id)) return;
  lru_.emplace_front(id, content);
  lru_index_[id] = lru_.begin();
  lru_bytes_ += content.size();
  while (lru_bytes_ > tuning_.cache_bytes && !lru_.empty()) {
    lru_bytes_ -= lru_.back().second.size();
    lru_index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

std::optional<std::string> ObjectStore::CacheGet(const ObjectId& id) {
  std::lock_guard l(mu_);
  auto it = lru_index_.find(id);
  if (it == lru_index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void ObjectStore::ClearCache() {
  std::lock_guard l(mu_);
  lru_.clear();
  lru_index_.clear();
  lru_bytes_ = 0;
}

Result<std::string> ObjectStore::Get(Kind kind, const ObjectId& id, Txn* txn) {
  return Decode(kind, id, 1024, txn);
}

Result<std::string> ObjectStore::GetVerified(Kind kind, const ObjectId& id, Txn* txn) {
  return Decode(kind, id, 1024, txn, /*use_cache=*/false);
}

Result<std::string> ObjectStore::Decode(Kind kind, const ObjectId& id, uint32_t max_depth, Txn* txn,
                                        bool use_cache) {
  if (use_cache) {
    if (auto c = CacheGet(id)) return std::move(*c);
  }
  // Walk the chain down to a full record, then apply deltas upward: at most cap decodes, and a
  // record whose depth does not shrink by one per step is damaged (this also rules out loops).
  struct Step {
    ObjectId id;
    RecordInfo info;
    std::string rec;
  };
  std::vector<Step> chain;
  ObjectId cur = id;
  std::string content;
  bool have_content = false;
  for (;;) {
    if (!chain.empty()) {
      if (auto c = CacheGet(cur)) {
        content = std::move(*c);
        have_content = true;
        break;
      }
    }
    LFS_ASSIGN(auto rec, ReadRecord(kind, cur, txn));
    if (!rec && !chain.empty())  // a stored delta whose base is gone is damage, not absence
      return Status::Corrupt(fmt::format("{} {}: delta base {} is missing", KindName(kind),
                                         chain.back().id.Hex(), cur.Hex()));
    if (!rec) return Status::NotFound(fmt::format("{} {} is missing", KindName(kind), cur.Hex()));
    auto info_r = ParseRecord(*rec);
    if (!info_r.ok()) return info_r.status().Context(fmt::format("{} {}", KindName(kind), cur.Hex()));
    RecordInfo info = *info_r;
    if (!Compatible(info.kind, kind))
      return Status::Corrupt(fmt::format("object {} is a {}, expected a {}", cur.Hex(),
                                         KindName(info.kind), KindName(kind)));
    uint32_t expect = chain.empty() ? std::min(info.depth, max_depth) : chain.back().info.depth - 1;
    if (info.depth != expect || (!chain.empty() && chain.back().info.depth == 0))
      return Status::Corrupt(fmt::format("{} {}: delta chain depth is inconsistent", KindName(kind), cur.Hex()));
    bool full = info.encoding != Encoding::kDelta;
    chain.push_back({cur, info, std::move(*rec)});
    if (full) break;
    cur = info.base;
  }
  for (size_t i = chain.size(); i-- > 0;) {
    Step& s = chain[i];
    std::string_view payload;
    (void)ParseRecord(s.rec, &payload);
    if (i == chain.size() - 1 && !have_content) {
      if (s.info.encoding == Encoding::kRaw || s.info.encoding == Encoding::kPending) {
        if (payload.size() != s.info.decoded_size)
          return Status::Corrupt(fmt::format("{} {}: size mismatch", KindName(kind), s.id.Hex()));
        content.assign(payload);
      } else {
        auto d = codec::Decompress(payload, s.info.decoded_size);
        if (!d.ok()) return d.status().Context(fmt::format("{} {}", KindName(kind), s.id.Hex()));
        content = std::move(*d);
      }
    } else {
      auto d = codec::DecodeDelta(content, payload, s.info.decoded_size);
      if (!d.ok()) return d.status().Context(fmt::format("{} {}", KindName(kind), s.id.Hex()));
      content = std::move(*d);
    }
    if (id_check_ ? !id_check_(kind, s.id, content) : !base::HashMatches(s.id, content, seed_))
      return Status::Corrupt(fmt::format("{} {}: content does not match its hash", KindName(kind), s.id.Hex()));
    if (i == 0 || s.info.depth % 4 == 0 || i + 1 == chain.size()) CachePut(s.id, content);
  }
  return content;
}

// Level 19 is affordable on small inputs only; large ones (long files, whose fulls and deltas
// dominate write time) get a mid level when a writer waits for them, and a higher one when the
// background encoder finalizes a pending record (`background`: ChooseEncoding's finalize_locked).
int ObjectStore::LevelFor(size_t input, bool background) const {
  if (input < tuning_.small_below) return tuning_.small_level;
  return background ? tuning_.background_level : tuning_.level;
}

namespace {
// Whether `content` looks incompressible (media, archives, encrypted or random bytes), judged on
// four 16 KiB slices spread over it at zstd's fastest level: if they shrink by less than 3%, the
// slow level would not do better on the whole (it compresses random bytes at a few tens of MB/s
// to find nothing). RocksDB's block compression still sees the raw record.
bool LooksIncompressible(std::string_view content) {
  constexpr size_t kSlice = 16 << 10, kSlices = 4;
  if (content.size() < 4 * kSlice * kSlices) return false;
  size_t in = 0, out = 0;
  for (size_t i = 0; i < kSlices; i++) {
    const size_t at = (content.size() - kSlice) / (kSlices - 1) * i;
    auto z = codec::Compress(content.substr(at, kSlice), 1);
    if (!z.ok()) return false;
    in += kSlice;
    out += z->size();
  }
  return out * 100 >= in * 97;
}
}  // namespace

Result<std::string> ObjectStore::EncodeFull(Kind kind, std::string_view content) {
  if (content.size() < tuning_.raw_below || (content.size() >= tuning_.small_below && LooksIncompressible(content)))
    return RecordHeader(kind, Encoding::kRaw, 0, content.size(), nullptr).append(content);
  int level = content.size() < tuning_.small_below ? tuning_.small_level : tuning_.large_full_level;
  LFS_ASSIGN(std::string z, codec::Compress(content, level));
  if (z.size() >= content.size())
    return RecordHeader(kind, Encoding::kRaw, 0, content.size(), nullptr).append(content);
  return RecordHeader(kind, Encoding::kZstd, 0, content.size(), nullptr).append(z);
}

Result<std::string> ObjectStore::ChooseEncoding(Kind kind, std::string_view content,
                                                const std::optional<ObjectId>& hint, Txn* txn,
                                                bool finalize_locked) {
  uint32_t cap = CapFor(kind);
  if (!hint || cap == 0 || content.size() < 64) return EncodeFull(kind, content);
  auto hint_info = Info(kind, *hint, txn);
  if (!hint_info.ok()) return EncodeFull(kind, content);  // base gone: store whole
  if (hint_info->encoding == Encoding::kPending) {
    // Never a base while pending: its depth is not known yet. Encode it first (bases of final
    // records are final, so the candidates below are settled).
    LFS_TRY(finalize_locked ? FinalizeLocked(hint_info->kind, *hint) : Finalize(hint_info->kind, *hint));
    hint_info = Info(kind, *hint, txn);
    if (!hint_info.ok()) return EncodeFull(kind, content);
    if (hint_info->encoding == Encoding::kPending) return EncodeFull(kind, content);
  }
  // Candidate bases: the previous version while its chain has room; at the cap, the keyframes at
  // the bottom of its chain (depths 0..snapshot_depth), Mercurial sparse-revlog style; the lowest
  // cost per remaining chain slot wins, a full copy included.
  std::vector<std::pair<ObjectId, uint32_t>> candidates;
  if (hint_info->depth + 1 <= cap) {
    candidates.emplace_back(*hint, hint_info->depth);
  } else {
    ObjectId cur = *hint;
    RecordInfo ci = *hint_info;
    while (true) {
      if (ci.depth <= tuning_.snapshot_depth && ci.depth + 1 <= cap)
        candidates.emplace_back(cur, ci.depth);
      if (ci.encoding != Encoding::kDelta) break;
      cur = ci.base;
      auto next = Info(kind, cur, txn);
      // A base one level shallower, or the walk ends (a crafted chain may loop).
      if (!next.ok() || next->depth + 1 != ci.depth) break;
      ci = *next;
    }
  }
  // Cost per version the record makes room for: a record at depth d leaves cap - d further deltas
  // on its chain, so a somewhat larger delta against a shallower base often wins (it keeps the
  // keyframes fresh instead of deltas against an ever older one). A raw full record shrinks again
  // under RocksDB's block compression, hence its 9/10.
  std::string best;
  double best_cost = 0;
  for (const auto& [bid, bdepth] : candidates) {
    auto base_content = Get(kind, bid, txn);
    if (!base_content.ok()) continue;
    int level = LevelFor(base_content->size() + content.size(), finalize_locked);
    LFS_ASSIGN(std::string delta, codec::EncodeDelta(*base_content, content, level));
    std::string rec = RecordHeader(kind, Encoding::kDelta, bdepth + 1, content.size(), &bid);
    double cost = static_cast<double>(rec.size() + delta.size()) / (cap - bdepth);
    if (best.empty() || cost < best_cost) {
      best_cost = cost;
      best = rec.append(delta);
    }
  }
  // The full copy: small ones as EncodeFull stores them; a large one is first sized with a fast
  // level and compressed at the slow full level only when it may win (full copies are rare, so
  // the import of a large file that deltas well never pays for it).
  std::string full;
  if (content.size() < tuning_.small_below) {
    LFS_ASSIGN(full, EncodeFull(kind, content));
  } else {
    LFS_ASSIGN(std::string fast, codec::Compress(content, tuning_.estimate_level));
    double estimate = (fast.size() * tuning_.estimate_ratio + 16) / (cap + 1);
    if (best.empty() || estimate < best_cost * 1.1) {
      LFS_ASSIGN(full, EncodeFull(kind, content));
    }
  }
  if (!full.empty()) {
    bool raw = static_cast<Encoding>(full[1]) == Encoding::kRaw;
    double full_bytes = static_cast<double>(full.size()) * (raw ? 9.0 / 10 : 1.0);
    // A raw record shrinks under RocksDB's block compression, with a trained dictionary in every
    // family but chunks', to about raw_estimate_ratio of what zstd's fastest level makes of it
    // alone. That matters when the delta is not far smaller than the content (a delta against
    // a look-alike rather than the file's own previous version): price the full by it then.
    if (raw && !best.empty() && best.size() * 16 > content.size()) {
      auto z = codec::Compress(content, 1);
      double ratio = kind == Kind::kChunk ? 1.0 : tuning_.raw_estimate_ratio;
      if (z.ok()) full_bytes = std::min(full_bytes, static_cast<double>(z->size()) * ratio + (full.size() - content.size()));
    }
    double cost = full_bytes / (cap + 1);
    if (best.empty() || cost <= best_cost) return full;
  }
  return best;
}

Result<PutResult> ObjectStore::Put(Kind kind, std::string_view content,
                                   const std::optional<ObjectId>& base, Txn* txn) {
  if (content.size() > MaxDecodedSize(kind))
    return Status::Errorf(EFBIG, "a {} of {} bytes is more than a Store holds (at most {})", KindName(kind),
                          content.size(), MaxDecodedSize(kind));
  // A dedup miss or an absent delta base just means storing the content whole, locally: a
  // commit in a lazy Store never waits on a remote.
  LocalOnly local;
  // Dedup with collision defence: an existing object under the same id must hold the same bytes;
  // if not, the next key generation is tried.
  for (int g = 0; g < base::kMaxGenerations; g++) {
    ObjectId id = base::HashContent(content, seed_, g);
    LFS_ASSIGN(auto rec, ReadRecord(kind, id, txn));
    if (rec) {
      auto existing = Get(kind, id, txn);
      if (existing.ok() && *existing == content) return PutResult{id, false, 0};
      if (!existing.ok() && existing.status().code() != EIO) return existing.status();
      continue;  // a collision (or a damaged object we must not dedup against)
    }
    if (txn && txn->dry_ && (kind == Kind::kBlob || kind == Kind::kChunk)) return PutResult{id, true, 0};
    std::string record;
    bool pending = txn && txn->deferred_ && kind != Kind::kCommit;
    if (txn && txn->dry_) {
      record = RecordHeader(kind, Encoding::kRaw, 0, content.size(), nullptr).append(content);
    } else if (pending) {
      record = PendingRecord(kind, content, base);
    } else {
      LFS_ASSIGN(record, ChooseEncoding(kind, content, base, txn, false));
    }
    size_t stored = record.size();
    bool flush = false;
    if (txn) {
      txn->batch_.Put(StorageCfOf(kind), id.AsKey(), record);
      txn->records_[StagedKey(kind, id)] = std::move(record);
      if (pending) {
        txn->queued_.emplace_back(kind, id);
        if (txn->batch_.ApproximateBytes() > tuning_.flush_bytes) {
          CachePut(id, std::string(content));
          LFS_TRY(FlushDeferred(txn));
          return PutResult{id, true, stored};
        }
      }
    } else {
      std::lock_guard l(mu_);
      // Another thread (a parallel import's worker) staged the same content since the read
      // above: it is stored once, and counted once.
      if (shared_.records_.count(StagedKey(kind, id))) return PutResult{id, false, 0};
      shared_.batch_.Put(StorageCfOf(kind), id.AsKey(), record);
      shared_.records_[StagedKey(kind, id)] = std::move(record);
      flush = shared_.batch_.ApproximateBytes() > tuning_.flush_bytes;
    }
    CachePut(id, std::string(content));
    if (flush) LFS_TRY(Flush());
    return PutResult{id, true, stored};
  }
  return Status::Error(EIO, "content collides with stored objects under every key generation");
}

void ObjectStore::TakeBatch(kv::Batch* batch, Txn* txn) {
  if (txn) StageQueueList(batch, txn);
  auto move_out = [&](Txn& t) {
    batch->Append(std::move(t.batch_));
    t.records_.clear();
  };
  if (txn) return move_out(*txn);
  std::lock_guard l(mu_);
  move_out(shared_);
}

void ObjectStore::Absorb(Txn* into, Txn* from) {
  into->batch_.Append(std::move(from->batch_));
  for (auto& [k, v] : from->records_) into->records_[k] = std::move(v);
  into->queued_.insert(into->queued_.end(), from->queued_.begin(), from->queued_.end());
  from->records_.clear();
  from->queued_.clear();
}

// ---- Deferred encoding ----

void ObjectStore::StageQueueList(kv::Batch* batch, Txn* txn) {
  if (txn->queued_.empty() || txn->queue_list_ != 0) return;
  {
    std::lock_guard l(queue_mu_);
    txn->queue_list_ = next_list_++;
  }
  std::string v;
  for (const auto& [kind, id] : txn->queued_) {
    base::PutU8(&v, static_cast<uint8_t>(kind));
    v.append(id.AsKey());
  }
  batch->Put(kv::Cf::kIndex, QueueListKey(txn->queue_list_), v);
}

Status ObjectStore::FlushDeferred(Txn* txn) {
  // Pending records only (a deferred Txn stages nothing else but Commits, which its owner
  // writes): safe to write before the owner's batch, unreferenced until then.
  StageQueueList(&txn->batch_, txn);
  LFS_TRY(kv_->Write(txn->batch_, false));
  txn->batch_.Clear();
  txn->records_.clear();
  Enqueue(txn);
  return Status::Ok();
}

void ObjectStore::Enqueue(Txn* txn) {
  if (txn->queued_.empty()) return;
  uint64_t list = txn->queue_list_;
  bool drop_list = false;
  {
    std::lock_guard l(queue_mu_);
    size_t n = 0;
    for (const auto& [kind, id] : txn->queued_)
      if (queued_keys_.insert(QueueSetKey(kind, id)).second) {
        queue_.push_back({kind, id, list});
        n++;
      }
    if (n) list_left_[list] += n;
    else drop_list = list != 0;
  }
  txn->queued_.clear();
  txn->queue_list_ = 0;
  if (drop_list) {  // every entry was queued already, by an earlier list
    kv::Batch b;
    b.Delete(kv::Cf::kIndex, QueueListKey(list));
    (void)kv_->Write(b, false);
  }
  queue_cv_.notify_all();
}

Status ObjectStore::LoadQueue() {
  std::vector<Queued> found;
  std::vector<uint64_t> lists;
  uint64_t max_list = 0;
  std::string begin(kQueuePrefix);
  std::string end = begin;
  end.back()++;
  LFS_TRY(kv_->Scan(kv::Cf::kIndex, begin, end, [&](auto k, auto v) {
    if (k.size() != kQueuePrefix.size() + 8) return true;
    uint64_t list = base::GetBigEndian64(k.data() + kQueuePrefix.size());
    max_list = std::max(max_list, list);
    lists.push_back(list);
    base::Reader r(v);
    uint8_t kind;
    std::string_view id;
    while (r.U8(&kind) && r.Raw(ObjectId::kSize, &id))
      if (kind >= 1 && kind <= 5) found.push_back({static_cast<Kind>(kind), ObjectId::FromKey(id), list});
    return true;
  }));
  kv::Batch b;
  {
    std::lock_guard l(queue_mu_);
    next_list_ = std::max(next_list_, max_list + 1);
    for (const auto& e : found)
      if (queued_keys_.insert(QueueSetKey(e.kind, e.id)).second) {
        queue_.push_back(e);
        list_left_[e.list]++;
      }
    // A list none of whose entries is queued under it (all named by an earlier list, or none
    // readable) would never be finished: delete it now.
    for (uint64_t list : lists)
      if (!list_left_.count(list)) b.Delete(kv::Cf::kIndex, QueueListKey(list));
  }
  if (!b.empty()) LFS_TRY(kv_->Write(b, false));
  queue_cv_.notify_all();
  return Status::Ok();
}

bool ObjectStore::PopQueued(Queued* out) {
  std::lock_guard l(queue_mu_);
  if (queue_.empty()) return false;
  *out = queue_.front();
  queue_.pop_front();
  in_flight_++;
  return true;
}

void ObjectStore::DoneQueued(const Queued& e, bool failed) {
  bool list_done = false;
  {
    std::lock_guard l(queue_mu_);
    in_flight_--;
    if (failed) {
      queue_.push_back(e);
    } else {
      queued_keys_.erase(QueueSetKey(e.kind, e.id));
      auto it = list_left_.find(e.list);
      if (it != list_left_.end() && --it->second == 0) {
        list_left_.erase(it);
        list_done = e.list != 0;
      }
    }
  }
  if (list_done) {
    // Unsynced: lost in a machine crash, the list is read again and its entries found final.
    kv::Batch b;
    b.Delete(kv::Cf::kIndex, QueueListKey(e.list));
    (void)kv_->Write(b, false);
  }
  queue_cv_.notify_all();
}

size_t ObjectStore::QueuedCount() {
  std::lock_guard l(queue_mu_);
  return queue_.size() + in_flight_;
}

bool ObjectStore::WaitQueueEmpty(int timeout_ms) {
  std::unique_lock l(queue_mu_);
  auto empty = [&] { return queue_.empty() && in_flight_ == 0; };
  if (timeout_ms < 0) {
    queue_cv_.wait(l, empty);
    return true;
  }
  return queue_cv_.wait_for(l, std::chrono::milliseconds(timeout_ms), empty);
}

void ObjectStore::WaitQueued(int timeout_ms) {
  std::unique_lock l(queue_mu_);
  queue_cv_.wait_for(l, std::chrono::milliseconds(timeout_ms), [&] { return !queue_.empty(); });
}

Status ObjectStore::Finalize(Kind kind, const ObjectId& id) {
  std::lock_guard fl(finalize_mu_);
  return FinalizeLocked(kind, id);
}

Status ObjectStore::FinalizeLocked(Kind kind, const ObjectId& id) {
  // A hint a lazy Store has not fetched is no base: encode whole rather than wait on a remote.
  LocalOnly local;
  // A pending record's hint may be pending too (a file committed several times while the
  // encoder was behind): encode the oldest first, without recursion.
  // Hints may form a cycle (A hints B, B hints A: content that came back after gc freed it,
  // or a crafted Store): the record whose pending hint is already on the stack is encoded
  // without it, which ends the cycle; every other record then has a final hint.
  std::vector<std::pair<Kind, ObjectId>> stack{{kind, id}};
  std::unordered_set<ObjectId, ObjectIdHash> on_stack{id};
  while (!stack.empty()) {
    if (stack.size() > 100000) return Status::Corrupt("pending records: hint chain does not end");
    std::optional<ObjectId> pending_hint;
    auto [k, i] = stack.back();
    LFS_TRY(FinalizeOne(k, i, &pending_hint, /*use_hint=*/true));
    if (pending_hint && on_stack.count(*pending_hint)) {
      LFS_TRY(FinalizeOne(k, i, &pending_hint, /*use_hint=*/false));
      pending_hint.reset();
    }
    if (pending_hint) {
      stack.emplace_back(k, *pending_hint);
      on_stack.insert(*pending_hint);
    } else {
      on_stack.erase(i);
      stack.pop_back();
    }
  }
  return Status::Ok();
}

// Encodes (kind, id) if its stored record is pending and its hint is not; if the hint is still
// pending, says so through `pending_hint` and changes nothing.
Status ObjectStore::FinalizeOne(Kind kind, const ObjectId& id, std::optional<ObjectId>* pending_hint, bool use_hint) {
  kv::Cf where;
  LFS_ASSIGN(auto rec, GetStored(kind, id, &where));
  std::string_view payload;
  std::optional<RecordInfo> info;
  if (rec) {
    auto parsed = ParseRecord(*rec, &payload);
    if (!parsed.ok()) return parsed.status().Context(fmt::format("pending {} {}", KindName(kind), id.Hex()));
    info = *parsed;
    kind = info->kind;  // reached as a hint, blob and chunk stand for each other
  }
  if (!info || info->encoding != Encoding::kPending) return Status::Ok();  // gone (gc), or done
  if (payload.size() != info->decoded_size || !base::HashMatches(id, payload, seed_))
    return Status::Corrupt(fmt::format("pending {} {}: content does not match its hash", KindName(kind), id.Hex()));
  std::optional<ObjectId> hint;
  if (use_hint && !info->hint.IsZero()) {
    hint = info->hint;
    auto hi = GetStored(kind, *hint);
    if (hi.ok() && *hi) {
      auto hinfo = ParseRecord(**hi);
      if (hinfo.ok() && hinfo->encoding == Encoding::kPending && Compatible(hinfo->kind, kind)) {
        *pending_hint = *hint;
        return Status::Ok();
      }
    }
  }
  LFS_ASSIGN(std::string record, ChooseEncoding(kind, payload, hint, nullptr, /*finalize_locked=*/true));
  kv::Batch b;
  b.Put(where, id.AsKey(), record);  // replaced where it is
  return kv_->Write(b, false);
}

Status ObjectStore::Flush() {
  kv::Batch b;
  {
    std::lock_guard l(mu_);
    b = std::move(shared_.batch_);
    shared_.batch_.Clear();
  }
  if (b.empty()) return Status::Ok();
  Status s = kv_->Write(b, false);
  std::lock_guard l(mu_);
  if (s.ok()) {
    shared_.records_.clear();
  } else {
    shared_.batch_ = std::move(b);  // keep staged so a retry or Abort sees it
  }
  return s;
}

void ObjectStore::Abort() {
  std::lock_guard l(mu_);
  for (const auto& e : shared_.batch_.entries()) {
    ObjectId id = ObjectId::FromKey(e.key);
    auto it = lru_index_.find(id);
    if (it != lru_index_.end()) {
      lru_bytes_ -= it->second->second.size();
      lru_.erase(it->second);
      lru_index_.erase(it);
    }
  }
  shared_.batch_.Clear();
  shared_.records_.clear();
}

}  // namespace layerfs::objects
