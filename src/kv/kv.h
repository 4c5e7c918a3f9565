// Kv: the ordered key-value interface every layer above stores through.
//
// Column families partition the data by kind (see docs/format.md); a Batch applies atomically, all
// or nothing, and with sync=true is durable on return. Implementations: RocksKv (the real one),
// MemKv (tests) and FaultKv (a wrapper that injects failures). All are thread-safe.
//
// Failures: a write refused for space is ENOSPC and changes nothing. A RocksKv whose engine
// stopped taking writes after a failed write, flush or compaction (a full disk) keeps serving
// reads, answers writes with ENOSPC, and comes back by itself once it can (Recover(); docs/
// design.md, "Full disks and damaged media"). Damaged data reads as EIO naming the file.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "layerfs/status.h"

namespace layerfs::kv {

class FileIo;

// FORMAT: the order and names of column families are persisted; append only.
// kChunks (format 8) holds the chunk records of large files apart from the other content records
// (docs/design.md, "Storage engine"); in a database made before it existed it has no storage of
// its own and reads and writes of it land in kBlobs (Kv::Aliased).
enum class Cf : uint8_t { kMeta = 0, kBlobs = 1, kTrees = 2, kCommits = 3, kIndex = 4, kWorkspace = 5, kChunks = 6 };
constexpr int kNumCfs = 7;
const char* CfName(Cf cf);

class Batch {
 public:
  enum class Op : uint8_t { kPut, kDelete, kDeleteRange, kPatch };
  struct Entry {
    Op op;
    Cf cf;
    std::string key, value;  // value = end key for kDeleteRange, EncodePatch() for kPatch
  };
  void Put(Cf cf, std::string_view k, std::string_view v) {
    bytes_ += k.size() + v.size();
    entries_.push_back({Op::kPut, cf, std::string(k), std::string(v)});
  }
  void Delete(Cf cf, std::string_view k) { entries_.push_back({Op::kDelete, cf, std::string(k), {}}); }
  // Deletes [begin, end).
  void DeleteRange(Cf cf, std::string_view begin, std::string_view end) {
    entries_.push_back({Op::kDeleteRange, cf, std::string(begin), std::string(end)});
  }
  // Writes `bytes` at `offset` into the key's value without reading it (a blind write: a
  // RocksDB merge), zero-extending the value as needed; an absent value counts as empty.
  // Families that accept patches: kWorkspace.
  void Patch(Cf cf, std::string_view k, uint32_t offset, std::string_view bytes);
  void Add(const Entry& e) {
    bytes_ += e.key.size() + e.value.size();
    entries_.push_back(e);
  }
  // Moves every entry of `other` to the end of this batch (in order, without copying their
  // bytes), leaving `other` empty.
  void Append(Batch&& other) {
    bytes_ += other.bytes_;
    if (entries_.empty()) {
      entries_ = std::move(other.entries_);
    } else {
      entries_.reserve(entries_.size() + other.entries_.size());
      for (auto& e : other.entries_) entries_.push_back(std::move(e));
    }
    other.Clear();
  }
  const std::vector<Entry>& entries() const { return entries_; }
  size_t ApproximateBytes() const { return bytes_; }
  bool empty() const { return entries_.empty(); }
  void Clear() {
    entries_.clear();
    bytes_ = 0;
    space_exempt_ = false;
  }
  // Admitted on a full disk, where growth is refused (kv/space_guard.h): deletions, which free
  // space, and the small writes reading needs (materialising a directory, a sync).
  void set_space_exempt() { space_exempt_ = true; }
  bool space_exempt() const { return space_exempt_; }

 private:
  std::vector<Entry> entries_;
  size_t bytes_ = 0;
  bool space_exempt_ = false;
};

// The patch encoding (a merge operand): offset (4 bytes, little-endian), then the bytes.
std::string EncodePatch(uint32_t offset, std::string_view bytes);
// Applies an encoded patch to `value`; false if the operand is malformed.
bool ApplyPatch(std::string_view patch, std::string* value);
// EINVAL unless `patch` is well formed and `cf` accepts patches; every Kv checks a batch's patches
// with it before applying anything.
Status CheckPatch(Cf cf, std::string_view patch);

// A consistent read view; reads through it see the database as of its creation.
class Snapshot {
 public:
  virtual ~Snapshot() = default;
};

struct CfStats {
  uint64_t sst_file_bytes = 0;  // sizes of the table files
  uint64_t data_bytes = 0;      // data blocks: the records themselves
  uint64_t index_filter_bytes = 0;
  uint64_t entries = 0;
  uint64_t raw_key_bytes = 0, raw_value_bytes = 0;
};

class Kv {
 public:
  virtual ~Kv() = default;
  // Returns nullopt when the key is absent.
  virtual Result<std::optional<std::string>> Get(Cf cf, std::string_view key,
                                                 const Snapshot* snap = nullptr) = 0;
  virtual Status Write(const Batch& batch, bool sync) = 0;
  // Calls fn(key, value) for keys in [begin, end) in order (end empty = to the last key) while
  // fn returns true.
  virtual Status Scan(Cf cf, std::string_view begin, std::string_view end,
                      const std::function<bool(std::string_view, std::string_view)>& fn,
                      const Snapshot* snap = nullptr) = 0;
  // Scan for data read once (file blocks): the same result, but a RocksDB Kv does not keep what
  // it reads in its block cache, where a long sequential read would only evict everything else
  // (the kernel's page cache holds file data already). Measured: 1 GiB cold read 10% faster.
  virtual Status ScanOnce(Cf cf, std::string_view begin, std::string_view end,
                          const std::function<bool(std::string_view, std::string_view)>& fn,
                          const Snapshot* snap = nullptr) {
    return Scan(cf, begin, end, fn, snap);
  }
  virtual std::shared_ptr<const Snapshot> GetSnapshot() = 0;
  // Flushes and fully compacts one family (dropping deleted records).
  virtual Status Compact(Cf cf) = 0;
  // Flushes memtables and compacts every column family (used by gc so freed space shows).
  virtual Status CompactAll() = 0;
  // Flushes memtables to table files (so table statistics are complete).
  virtual Status Flush() = 0;
  // Makes every write so far durable (fsync of the write-ahead log).
  virtual Status SyncWal() = 0;
  virtual Result<CfStats> Stats(Cf cf) = 0;
  // If the engine stopped taking writes (a failed write, flush or compaction), tries to bring it
  // back now: Ok once writes are taken again; ENOSPC while there is no room; EBUSY while a
  // snapshot is held. A RocksKv also tries by itself in the background.
  virtual Status Recover() { return Status::Ok(); }
  // Opened read-only: every write is EROFS.
  virtual bool read_only() const { return false; }
  // True when `cf` has no storage of its own and is kept in kBlobs' (kChunks in a RocksDB
  // database made before that family existed): its keys, scans and statistics are kBlobs'.
  virtual bool Aliased(Cf) const { return false; }
};

class SpaceGuard;
struct FileFaults;

struct RocksOptions {
  bool create_if_missing = false;
  bool error_if_exists = false;
  // DB::OpenForReadOnly: for reading a Store whose normal open failed (a full disk, a read-only
  // filesystem). Writes nothing at all: no WAL replayed into tables, no obsolete file deleted,
  // no OPTIONS file; holds an OFD read lock on db/LOCK so no writer opens the database meanwhile.
  bool read_only = false;
  size_t block_cache_bytes = 256 << 20;
  // The mode of every file the database creates (base::StoreFileMode: 0600 unless shared).
  unsigned file_mode = 0600;
  SpaceGuard* space = nullptr;            // admission of writes and the reserve; may be null
  // An open that fails for lack of space releases the reserve and tries again (a daemon that
  // must start on a full disk); off for the read-only verbs, which fall back to a read-only open.
  bool release_reserve_to_open = true;
  // Run before every sync of a database file (a synced write, SyncWal, a flush, a compaction,
  // a MANIFEST update): what the records about to become durable point at must be durable
  // first (the data log's Sync; kv/rocks_sync_order.h). A failure fails that sync. May be empty.
  std::function<Status()> before_sync;
  // WAL replay at open: the first write batch holding a Put to kWorkspace for which this
  // returns false, and everything after it, is not replayed (kv/rocks_replay_filter.h). May be
  // empty.
  std::function<bool(std::string_view key, std::string_view value)> workspace_replay_ok;
  // The database's files, from the bottom up (each wraps the one before; kv/rocks_kv.cc):
  // RocksDB's default file system; io->RocksFileSystem() (tests: kv/power_loss.h records what
  // reached the disk); faults (tests: kv/file_faults.h fails appends and syncs); the sync order
  // (before_sync); the Store's file mode (kv/rocks_private_fs.h). A fault fails a call before
  // the power-loss layer sees it, and before_sync runs before either sees a sync.
  std::shared_ptr<FileIo> io;             // null: RocksDB's default file system
  std::shared_ptr<FileFaults> faults;     // tests: faults in the database's files
  // Tests: the memtable size at which RocksDB flushes a family by itself (0: the tuned 64 MiB).
  size_t write_buffer_bytes = 0;
};
// Opens (or creates) the RocksDB database at `path`. Fails with EBUSY if another process holds
// it; a database with damaged table files opens (reads of them are EIO) with a warning in the
// log; ENOSPC if there is no room to open it (with opts.space, after releasing the reserve).
Result<std::unique_ptr<Kv>> OpenRocksKv(const std::string& path, const RocksOptions& opts);
std::unique_ptr<Kv> NewMemKv();
// A Kv that reads `base` and keeps every write in memory, never reaching `base` or a disk: what
// a Workspace on a read-only Store (a full disk) writes to be read (its state, the directories
// it materialises) lives and dies with it. Reads see base and the writes; snapshots hold both.
// `base` is only read and must outlive it, and must not change meanwhile (a read-only RocksKv).
std::unique_ptr<Kv> NewScratchKv(Kv& base);

}  // namespace layerfs::kv
