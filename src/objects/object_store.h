// ObjectStore: content-addressed objects with capped delta chains, on a Kv.
//
// Every object is stored once under the keyed hash of its decoded bytes. An object is raw,
// zstd-compressed, or a zstd patch-from delta against a base object of the same kind; a record
// carries its chain depth, and no record is deeper than the Policy's cap for its kind, so a read
// decodes at most `cap` deltas. Base choice at the cap follows sparse-revlog keyframes (see
// docs/design.md, "Delta chains"). Reads verify the hash; a mismatch is EIO, never bad bytes.
//
// Writes are staged in a pending batch owned by the store (visible to its own reads and dedup)
// and reach the Kv on Flush() or through TakeBatch(). Thread-safe: one mutex guards the pending
// state and the decoded-content cache; compression runs outside it.
//
// Deferred encoding (docs/design.md, "Commits in the background"): a Put through a deferred Txn
// stores the content as a *pending* record (raw, with its delta hint) and a queue key, both in
// the Txn's batch, so the owner's one write makes the content durable and readable at once.
// Finalize() later replaces a pending record with the record Put would have chosen (deltas of
// larger inputs at Tuning::background_level rather than Tuning::level), in one batch
// with the removal of its queue key; a reader sees either form and the same bytes. A pending
// record is never a delta base: choosing one as a base finalizes it first, so every delta's base
// is final and depths stay consistent. One finalization runs at a time (finalize_mu_); gc holds
// that lock (LockFinalize) while it marks and sweeps, so no base it frees is chosen meanwhile.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kv/kv.h"
#include "layerfs/ids.h"
#include "objects/object_source.h"
#include "layerfs/store.h"

namespace layerfs::objects {

// FORMAT: persisted kind and encoding values; never renumber.
enum class Kind : uint8_t { kBlob = 1, kChunk = 2, kChunkList = 3, kTree = 4, kCommit = 5 };
enum class Encoding : uint8_t { kRaw = 0, kZstd = 1, kDelta = 2, kPending = 3 };

// The family a kind belongs to, as the formats name it (remote pack indexes, a record's base):
// content (blob, chunk, chunk list), trees or commits.
kv::Cf CfOf(Kind k);
// Where a record of the kind is kept: CfOf's family, except chunks, kept in kv::Cf::kChunks
// (which a Store made before format 8 aliases to kBlobs: kv::Kv::Aliased).
kv::Cf StorageCfOf(Kind k);
const char* KindName(Kind k);

// The most decoded bytes an object of each kind may hold (docs/format.md, "Object records"):
// file content objects are at most 2 MiB (files of 2 MiB and more are chunked, chunks are at
// most 1 MiB), trees and chunk lists 256 MiB, commits 64 MiB. A record that declares more is
// damage and a Put of more fails with EFBIG, so a few crafted bytes can never make a reader
// allocate gigabytes.
uint64_t MaxDecodedSize(Kind k);

struct RecordInfo {
  Kind kind;
  Encoding encoding;
  uint32_t depth;
  uint64_t decoded_size;
  ObjectId base;  // valid when encoding == kDelta
  size_t stored_bytes;
  ObjectId hint;  // kPending: the delta hint it will be encoded against (zero: none)
};
// Parses a record's header; `payload` (optional) receives the encoded bytes.
Result<RecordInfo> ParseRecord(std::string_view rec, std::string_view* payload = nullptr);

struct Tuning {
  // zstd levels at write time. Measured on npm `three` (157 releases through the mount,
  // bench/dsh-dedup): 19 for small inputs and a level-17 second pass over large deltas and fulls
  // made the Store 10% smaller (9.1 vs 10.3 MB) for 5x the commit time (32 vs 6 s), most of it
  // in the level-17 passes over ~1 MB bundles; these levels keep the Store below Git's pack.
  int level = 9;                  // for fulls and deltas of larger inputs
  int background_level = 15;      // ... for deltas of larger inputs that the background encoder
                                  // makes (finalizing pending records, off the commit path).
                                  // npm `three`, 157 releases (bench/dsh-dedup): 9.44 MB at 9,
                                  // 9.1 MB at 15
  int small_level = 15;           // ... for inputs (content, or base + content) below small_below
  size_t small_below = 128 << 10;
  int large_full_level = 9;       // for a full copy of a larger input (chosen only when a full
                                  // wins: sized first at estimate_level, scaled by estimate_ratio)
  int estimate_level = 3;
  double estimate_ratio = 0.8;
  uint32_t snapshot_depth = 3;    // at the cap: ancestors this shallow are tried as delta bases
  size_t raw_below = 48 << 10;    // fulls smaller than this are stored raw (RocksDB compresses
                                  // them together, with a dictionary)
  double raw_estimate_ratio = 0.7; // what a raw record takes in the Store against zstd level 1
                                   // of it alone (157 eslint releases: 0.71)
  size_t cache_bytes = 512 << 20; // decoded-content LRU (0: none)
  size_t flush_bytes = 256 << 20; // pending bytes that trigger an automatic Flush()
};

// One pending record in the encoding queue, and the persisted queue list that names it.
struct Queued {
  Kind kind;
  ObjectId id;
  uint64_t list;
};

struct PutResult {
  ObjectId id;
  bool added = false;  // false when the content was already stored
  size_t stored_bytes = 0;
};

// A staging area for one operation's writes: Puts through a Txn are visible to reads through
// the same Txn and reach the Kv only when the owner takes its batch. Destroying a Txn discards
// them. Not thread-safe: one owner at a time.
class Txn {
 public:
  // A dry Txn is for ids only (`status`): file content (blobs, chunks) is hashed, not encoded or
  // staged; trees and chunk lists are staged unencoded so they can be read back.
  // A deferred Txn stages pending records (see above) for everything but Commits; its owner calls
  // ObjectStore::Enqueue(txn) once the batch it took is written. A deferred Txn that grows past
  // Tuning::flush_bytes writes what it staged early (unreferenced until the owner's write; gc
  // frees it if that never comes), so a huge commit is not held in memory whole.
  explicit Txn(bool dry = false, bool deferred = false) : dry_(dry), deferred_(deferred && !dry) {}
  bool empty() const { return batch_.empty(); }
  bool dry() const { return dry_; }
  bool deferred() const { return deferred_; }

 private:
  friend class ObjectStore;
  bool dry_;
  bool deferred_;
  // Pending records staged (and taken) but not yet handed to the queue, and the queue list that
  // TakeBatch wrote for them (0: none yet).
  std::vector<std::pair<Kind, ObjectId>> queued_;
  uint64_t queue_list_ = 0;
  kv::Batch batch_;
  // Staged records by column family byte + id: a tree and a blob may share an id (the same
  // bytes) and are still different records.
  std::unordered_map<std::string, std::string> records_;
};

class ObjectStore {
 public:
  ObjectStore(kv::Kv* kv, uint64_t seed, Policy policy, Tuning tuning = {});

  // Stores `content` unless an identical object exists (confirmed byte for byte). `base`, when
  // given, is the previous version (same kind) to delta against. On a failed Put nothing is staged.
  // With `txn`, the write is staged there instead of in the store's shared pending batch.
  Result<PutResult> Put(Kind kind, std::string_view content, const std::optional<ObjectId>& base,
                        Txn* txn = nullptr);
  // Decoded, hash-verified content. ENOENT if absent, EIO if damaged. Reads see `txn`'s writes.
  // A record missing locally is asked of the source, if one is set (object_source.h).
  Result<std::string> Get(Kind kind, const ObjectId& id, Txn* txn = nullptr);
  // As Get, but decodes the record of `id` itself (never its cached content) and verifies it;
  // the steps below may come from the cache, which holds only verified content. For records that
  // came from elsewhere: verify them bottom up and each one is checked once.
  Result<std::string> GetVerified(Kind kind, const ObjectId& id, Txn* txn = nullptr);
  // The record as stored (nullopt when absent); consults the source as Get does.
  Result<std::optional<std::string>> Record(Kind kind, const ObjectId& id, Txn* txn = nullptr);
  // Stages an already encoded record (a fetched one, verified by the caller) in `txn`.
  void StageRecord(Txn* txn, Kind kind, const ObjectId& id, std::string record);
  Result<bool> Exists(Kind kind, const ObjectId& id, Txn* txn = nullptr);
  Result<RecordInfo> Info(Kind kind, const ObjectId& id, Txn* txn = nullptr);

  // Moves the pending writes (of `txn`, or the shared ones) into `batch` (so a caller can make
  // them atomic with its own).
  void TakeBatch(kv::Batch* batch, Txn* txn = nullptr);
  // Moves what `from` staged into `into` (several Txns filled by parallel workers, one owner).
  void Absorb(Txn* into, Txn* from);
  // Writes the pending writes to the Kv (unsynced).
  Status Flush();
  // Drops pending writes (after a failed operation).
  void Abort();
  // Forgets cached content (after gc deleted objects).
  void ClearCache();

  // Deferred encoding. Enqueue: the pending records `txn` staged are written; queue them.
  void Enqueue(Txn* txn);
  // Reads the persisted queue (at open: what a previous process left pending).
  Status LoadQueue();
  // Encodes the pending record (kind, id) now, as Put would have, if it still is pending.
  Status Finalize(Kind kind, const ObjectId& id);
  // The queue, for the encoder: the next entry (false if empty), and its completion (an entry
  // that failed goes back to the end of the queue).
  bool PopQueued(Queued* out);
  void DoneQueued(const Queued& e, bool failed);
  // Entries queued or being finalized.
  size_t QueuedCount();
  // Waits until the queue is empty and nothing is being finalized, or `timeout_ms` passed
  // (negative: forever); true if empty.
  bool WaitQueueEmpty(int timeout_ms);
  // Waits until an entry is queued or `timeout_ms` passed.
  void WaitQueued(int timeout_ms);
  // Whether Workspace commits should defer encoding (a background encoder runs).
  void SetDeferring(bool on) { deferring_ = on; }
  bool deferring() const { return deferring_; }
  // Held by gc while it marks and sweeps: no finalization runs meanwhile.
  std::unique_lock<std::mutex> LockFinalize() { return std::unique_lock<std::mutex>(finalize_mu_); }

  // Fuzzing only (tests/fuzz): replaces the check of every decoded object against its id (the
  // keyed hash) with `check`, so crafted records decode past it; the fuzz targets' check keeps
  // the object graph acyclic as real ids do. Set before any read; not thread-safe.
  using IdCheck = std::function<bool(Kind, const ObjectId&, std::string_view content)>;
  void SetIdCheckForFuzzing(IdCheck check) { id_check_ = std::move(check); }
  // Where local misses go (nullptr: nowhere). May be set at any time.
  void SetSource(std::shared_ptr<ObjectSource> source);
  bool has_source();
  std::shared_ptr<ObjectSource> source();

  uint64_t seed() const { return seed_; }
  const Policy& policy() const { return policy_; }
  kv::Kv* kv() { return kv_; }
  uint32_t CapFor(Kind k) const;

 private:
  // The stored record of (kind, id) in the Kv (a blob or chunk also in the other content family);
  // `where` gets the family it was found in.
  Result<std::optional<std::string>> GetStored(Kind kind, const ObjectId& id, kv::Cf* where = nullptr);
  Result<std::optional<std::string>> ReadRecord(Kind kind, const ObjectId& id, Txn* txn);
  Result<std::string> Decode(Kind kind, const ObjectId& id, uint32_t max_depth, Txn* txn, bool use_cache = true);
  // The delta level for `input` bytes (base + content); `background`: off the commit path.
  int LevelFor(size_t input, bool background) const;
  Result<std::string> EncodeFull(Kind kind, std::string_view content);
  Result<std::string> ChooseEncoding(Kind kind, std::string_view content,
                                     const std::optional<ObjectId>& base, Txn* txn, bool finalize_locked);
  Status FinalizeLocked(Kind kind, const ObjectId& id);
  // Encodes (kind, id) if pending: against its hint when `use_hint` and the hint is final; if the
  // hint is still pending, reports it in `pending_hint` and changes nothing.
  Status FinalizeOne(Kind kind, const ObjectId& id, std::optional<ObjectId>* pending_hint, bool use_hint);
  Status FlushDeferred(Txn* txn);
  void StageQueueList(kv::Batch* batch, Txn* txn);
  void CachePut(const ObjectId& id, const std::string& content);
  std::optional<std::string> CacheGet(const ObjectId& id);

  kv::Kv* kv_;
  uint64_t seed_;
  Policy policy_;
  Tuning tuning_;
  IdCheck id_check_;

  std::atomic<bool> deferring_{false};
  std::mutex finalize_mu_;  // one finalization at a time; gc holds it (LockFinalize)
  std::mutex queue_mu_;     // guards the queue
  std::condition_variable queue_cv_;
  std::deque<Queued> queue_;
  std::unordered_set<std::string> queued_keys_;  // in queue_ or in flight: kind byte + id
  std::unordered_map<uint64_t, size_t> list_left_;  // queue list -> its entries not yet done
  uint64_t next_list_ = 1;
  size_t in_flight_ = 0;

  std::mutex source_mu_;
  std::shared_ptr<ObjectSource> source_;

  std::mutex mu_;  // guards everything below
  Txn shared_;     // the pending writes of callers that pass no Txn
  std::list<std::pair<ObjectId, std::string>> lru_;
  std::unordered_map<ObjectId, decltype(lru_)::iterator, ObjectIdHash> lru_index_;
  size_t lru_bytes_ = 0;
};

}  // namespace layerfs::objects
