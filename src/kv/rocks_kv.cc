// RocksKv: Kv on RocksDB. Tuning (docs/design.md, "Storage engine"; rocks_options.cc): 64 KiB
// blocks compressed with zstd and a per-file trained dictionary, so small records (deltas, tree
// listings) compress together; level-19 zstd at the bottom level, where history settles, and
// fast zstd above. Universal compaction: every CLI process reopens the database and flushes the
// recovered WAL into small files; universal compaction merges those and rewrites the large
// bottom run only on a full compaction, so commits do not stall on it.
// Three physical column families: "blobs" holds Cf::kBlobs as is, "workspace" holds
// Cf::kWorkspace as is (tuned for live data); "default" holds every other logical family, each
// key prefixed with the family's byte (the Cf value), so the small families share table files
// and the OPTIONS files describe two families, not six. A database made with one physical family
// per logical one (all six names present) is opened in that layout, unprefixed.
//
// Failures (docs/design.md, "Full disks and damaged media"). This RocksDB (7.8, Debian's build,
// assertions on) stops taking writes once a WAL append or a flush fails for space, and its own
// ways back are unsafe here: DB::SyncWAL after a failed WAL append aborts the process on an
// assertion, and DB::Resume keeps the failed WAL writer when no write reached the WAL since the
// last flush, so the next write aborts the same way. So: the WAL is synced by an empty synced
// write (which fails cleanly); RocksDB's automatic recovery is switched off; and a stopped
// database is closed and opened again (its WAL holds every write it acknowledged; the torn
// append at its end is dropped) as soon as no snapshot or call holds the open instance, by the
// writer that finds it stopped or by a recovery thread. Reads go on meanwhile. If the reopen
// fails, a read-only instance serves reads until a later attempt succeeds.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>

#include <rocksdb/env.h>
#include <rocksdb/listener.h>
#include <rocksdb/table_properties.h>
#include <spdlog/spdlog.h>

#include "kv/file_io.h"
#include "kv/kv.h"
#include "kv/rocks_internal.h"
#include "kv/rocks_private_fs.h"
#include "kv/rocks_replay_filter.h"
#include "kv/rocks_sync_order.h"
#include "kv/space_guard.h"

#if defined(__SANITIZE_THREAD__)
#define LAYERFS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LAYERFS_TSAN 1
#endif
#endif
#ifdef LAYERFS_TSAN
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

namespace layerfs::kv {

namespace {

// Debian's RocksDB is not built with ThreadSanitizer: TSan sees none of its own accesses nor the
// atomics that order them, only the memcpy calls it makes through libstdc++, and with no RocksDB
// frame on those stacks (TSan keeps the frames of instrumented code only) tests/tsan.supp cannot
// name them. The leader of a write group appends the group's batches into one buffer that the
// next leader reuses: two threads' copies into it, ordered by RocksDB's atomics, were reported
// as a race. A TSan build ignores the calling thread's accesses for the engine's write; the
// locks it takes still order what comes before and after. Nothing in other builds.
class EngineCall {
 public:
#ifdef LAYERFS_TSAN
  EngineCall() { __tsan_ignore_thread_begin(); }
  ~EngineCall() { __tsan_ignore_thread_end(); }
#else
  EngineCall() = default;
#endif
  EngineCall(const EngineCall&) = delete;
  EngineCall& operator=(const EngineCall&) = delete;
};

}  // namespace

const char* CfName(Cf cf) {
  static const char* kNames[kNumCfs] = {"default", "blobs", "trees", "commits", "index", "workspace", "chunks"};
  return kNames[static_cast<int>(cf)];
}

namespace rocks {

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::Ok();
  std::string msg = s.ToString();
  int code = EIO;
  if (s.IsNoSpace() || msg.find("No space left on device") != std::string::npos) code = ENOSPC;
  else if (msg.find("Read-only file system") != std::string::npos) code = EROFS;
  else if (msg.find("Permission denied") != std::string::npos) code = EACCES;
  else if (msg.find("Disk quota exceeded") != std::string::npos) code = EDQUOT;
  else if (s.IsIOError() && msg.find("lock") != std::string::npos) code = EBUSY;
  else if (s.IsNotFound()) code = ENOENT;
  else if (s.IsInvalidArgument()) code = EINVAL;
  return Status::Errorf(code, "{}: {}", what, msg);
}

}  // namespace rocks

namespace {

using rocks::FromRocks;

// One open instance of the database. A recovery replaces it; calls in flight and snapshots keep
// the instance they started on, which closes when the last of them lets go.
struct Db {
  std::unique_ptr<rocksdb::WalFilter> replay_filter;  // used while the instance opens
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  bool read_only = false;
  ~Db() {
    if (!db) return;
    for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
    (void)db->Close();
  }
};

class RocksSnapshot : public Snapshot {
 public:
  explicit RocksSnapshot(std::shared_ptr<Db> d) : d_(std::move(d)), snap_(d_->db->GetSnapshot()) {}
  ~RocksSnapshot() override { d_->db->ReleaseSnapshot(snap_); }
  const rocksdb::Snapshot* get() const { return snap_; }
  const std::shared_ptr<Db>& db() const { return d_; }

 private:
  std::shared_ptr<Db> d_;
  const rocksdb::Snapshot* snap_;
};

const char* ReasonName(rocksdb::BackgroundErrorReason r) {
  switch (r) {
    case rocksdb::BackgroundErrorReason::kFlush: return "flush";
    case rocksdb::BackgroundErrorReason::kCompaction: return "compaction";
    case rocksdb::BackgroundErrorReason::kWriteCallback: return "write";
    case rocksdb::BackgroundErrorReason::kMemTable: return "memtable";
    case rocksdb::BackgroundErrorReason::kManifestWrite: return "manifest write";
    case rocksdb::BackgroundErrorReason::kFlushNoWAL: return "flush";
    case rocksdb::BackgroundErrorReason::kManifestWriteNoWAL: return "manifest write";
  }
  return "background work";
}

// What the listener reports to: outlives every Db (the Kv and each instance hold it).
struct Health {
  // What stopped the engine decides the way back: a failed compaction only paused background
  // work (its own tables are intact: DB::Resume clears it, safely); anything else (a failed WAL
  // append, flush or MANIFEST write) needs the reopen.
  enum Kind : int { kNone = 0, kCompaction = 1, kOther = 2 };
  std::atomic<bool> stopped{false};
  std::atomic<bool> no_space{false};
  std::atomic<int> kind{kNone};
  std::mutex mu;
  std::string why;  // guarded by mu
  std::function<void()> on_stop;  // set once before the first open; not called once closing
  std::atomic<bool> closing{false};
  // The flush gate (RocksKv::FlushGate): RocksDB's own flushes are held (memtables may grow past
  // their flush size) because the disk has no room for them. Only with a space guard (`gate`).
  bool gate = false;
  std::atomic<bool> hold{false};
  void Stop(const std::string& what, bool space, Kind k) {
    {
      std::lock_guard l(mu);
      why = what;
    }
    no_space = space;
    // The worse of the two wins until the engine is back.
    int cur = kind.load();
    while (cur < k && !kind.compare_exchange_weak(cur, k)) {
    }
    bool was = stopped.exchange(true);
    if (!was)
      spdlog::error("database: {}; {}", what,
                    k == kCompaction ? "background work paused" : "writes fail until it is reopened");
    if (on_stop && !closing) on_stop();
  }
  std::string Why() {
    std::lock_guard l(mu);
    return why;
  }
};

class Listener : public rocksdb::EventListener {
 public:
  explicit Listener(std::shared_ptr<Health> h) : health_(std::move(h)) {}
  void OnBackgroundError(rocksdb::BackgroundErrorReason reason, rocksdb::Status* bg_error) override {
    if (!bg_error || bg_error->ok()) return;
    bool space = bg_error->IsNoSpace() || bg_error->ToString().find("No space") != std::string::npos;
    // A flush that failed for space anyway (the disk filled from outside while it ran): the
    // reopen holds flushes, so the replayed memtables do not run into the same wall at once.
    if (space && health_->gate &&
        (reason == rocksdb::BackgroundErrorReason::kFlush || reason == rocksdb::BackgroundErrorReason::kFlushNoWAL))
      health_->hold = true;
    health_->Stop(fmt::format("{} failed: {}", ReasonName(reason), bg_error->ToString()), space,
                  reason == rocksdb::BackgroundErrorReason::kCompaction ? Health::kCompaction : Health::kOther);
  }
  // RocksDB's own recovery (DB::Resume, from its file manager's polling) is unsafe on this
  // build (above): the Kv reopens instead.
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason, rocksdb::Status, bool* auto_recovery) override {
    if (auto_recovery) *auto_recovery = false;
  }

 private:
  std::shared_ptr<Health> health_;
};

class RocksKv : public Kv {
 public:
  ~RocksKv() override {
    health_->closing = true;  // an instance a stray snapshot keeps open must not call back here
    {
      std::lock_guard l(rec_mu_);
      rec_stop_ = true;
    }
    rec_cv_.notify_all();
    if (rec_thread_.joinable()) rec_thread_.join();
    if (opts_.space) {
      opts_.space->SetPendingBytes(nullptr);
      opts_.space->SetRelieve(nullptr);
    }
    auto d = Use();
    // Flush so the WAL is obsolete and deleted: the next open has nothing to recover, and the
    // closed Store holds no copy of its recent writes in an uncompressed log. Skipped when there
    // is no room: the WAL keeps the writes, and the next open replays it.
    if (d && !d->read_only && !health_->stopped) {
      Status s = Flush();
      if (!s.ok() && s.code() != ENOSPC) spdlog::warn("database: flush at close: {}", s.message());
    }
    d.reset();
    {
      std::lock_guard l(db_mu_);
      db_.reset();
    }
    if (lock_fd_ >= 0) ::close(lock_fd_);
  }

  static Result<std::unique_ptr<Kv>> Open(const std::string& path, const RocksOptions& ro) {
    auto kv = std::unique_ptr<RocksKv>(new RocksKv());
    kv->path_ = path;
    kv->opts_ = ro;
    kv->cache_ = rocksdb::NewLRUCache(ro.block_cache_bytes);
    // The database's files, bottom up (kv.h, RocksOptions::io): RocksDB's file system; the
    // Store's FileIo (tests: a power-loss layer, kv/power_loss.h); the tests' faults; the data
    // log synced before any sync of a database file (kv/rocks_sync_order.h); table, log and
    // manifest files in the Store's mode (RocksDB would make them 0644).
    std::shared_ptr<rocksdb::FileSystem> fs = rocksdb::FileSystem::Default();
    if (ro.io) fs = ro.io->RocksFileSystem(std::move(fs));
    if (ro.faults) fs = rocks::FaultFileSystem(std::move(fs), ro.faults);
    if (ro.before_sync) fs = SyncOrderedFileSystem(std::move(fs), ro.before_sync);
    kv->env_ = rocksdb::NewCompositeEnv(PrivateFileSystem(std::move(fs), ro.file_mode));
    RocksKv* raw = kv.get();
    kv->health_->on_stop = [raw] { raw->WakeRecovery(); };
    kv->health_->gate = ro.space != nullptr && !ro.read_only;
    std::vector<std::string> existing;
    (void)rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &existing);
    kv->legacy_ = std::find(existing.begin(), existing.end(), CfName(Cf::kTrees)) != existing.end();
    // A database made now gets the chunks family; one made before keeps its chunks in blobs.
    kv->chunks_ = !kv->legacy_ && (existing.empty() ||
                                   std::find(existing.begin(), existing.end(), CfName(Cf::kChunks)) != existing.end());
    if (ro.read_only) LFS_TRY(kv->LockForReading());
    const auto before = ro.read_only ? std::set<std::string>() : kv->Files();
    rocksdb::Status rs;
    auto d = kv->OpenDb(ro.read_only, &rs);
    if (!d && rs.IsCorruption()) {
      // A damaged table file (truncated, a bad footer) fails the paranoid open; without the
      // checks the database opens and only reads of that file fail (EIO naming it).
      spdlog::warn("database {}: {}; opened without paranoid checks: reads of the damaged file fail", path,
                   rs.ToString());
      kv->paranoid_ = false;
      d = kv->OpenDb(ro.read_only, &rs);
    }
    if (!d && !ro.read_only && ro.space && ro.release_reserve_to_open && FromRocks(rs, "").code() == ENOSPC &&
        ro.space->reserve_held()) {
      ro.space->ReleaseReserve("the database could not open for lack of space");
      d = kv->OpenDb(false, &rs);
    }
    if (!d) {
      Status st = FromRocks(rs, "open database " + path);
      if (!ro.read_only && st.code() == ENOSPC) kv->RemoveWhatAFailedOpenLeft(before);
      return st;
    }
    kv->db_ = std::move(d);
    if (ro.space && !ro.read_only) {
      ro.space->SetPendingBytes([raw] { return raw->PendingBytes(); });
      ro.space->SetRelieve([raw] { return raw->FlushWhatFits(); });
    }
    if (kv->health_->hold) kv->ReleaseHoldOrWait();
    return std::unique_ptr<Kv>(std::move(kv));
  }

  bool read_only() const override { return opts_.read_only; }

  Result<std::optional<std::string>> Get(Cf cf, std::string_view key, const Snapshot* snap) override {
    auto d = snap ? static_cast<const RocksSnapshot*>(snap)->db() : Use();
    if (!d) return Unavailable();
    rocksdb::ReadOptions ro;
    if (snap) ro.snapshot = static_cast<const RocksSnapshot*>(snap)->get();
    std::string v;
    auto s = d->db->Get(ro, h(*d, cf), Key(cf, key), &v);
    if (s.IsNotFound()) return std::optional<std::string>();
    if (!s.ok()) return FromRocks(s, "read");
    return std::optional<std::string>(std::move(v));
  }

  Status Write(const Batch& batch, bool sync) override {
    if (opts_.read_only) return Status::Error(EROFS, "the Store is open read-only");
    for (const auto& e : batch.entries())
      if (e.op == Batch::Op::kPatch) LFS_TRY(CheckPatch(e.cf, e.value));
    if (opts_.space) {
      const uint64_t bytes = batch.ApproximateBytes();
      auto use = batch.space_exempt()            ? SpaceGuard::Use::kFree
                 : bytes < SpaceGuard::kSmallBytes ? SpaceGuard::Use::kSmall
                                                   : SpaceGuard::Use::kGrow;
      // The WAL now, a table at the flush: twice the batch.
      LFS_TRY(opts_.space->Admit(2 * bytes, use));
    }
    for (int attempt = 0;; attempt++) {
      if (health_->stopped) (void)Recover();
      auto d = Use();
      if (!d || d->read_only || health_->stopped) return StoppedStatus();
      if (health_->gate) LFS_TRY(FlushGate(*d, batch));
      // Sized once: a commit's batch carries the changed files' bytes, and a batch grown by
      // doubling copies them again at every step.
      size_t reserve = 12;
      for (const auto& e : batch.entries()) reserve += e.key.size() + e.value.size() + 16;
      rocksdb::WriteBatch wb(reserve);
      for (const auto& e : batch.entries()) {
        rocksdb::Status s;
        switch (e.op) {
          case Batch::Op::kPut: s = wb.Put(h(*d, e.cf), Key(e.cf, e.key), e.value); break;
          case Batch::Op::kDelete: s = wb.Delete(h(*d, e.cf), Key(e.cf, e.key)); break;
          case Batch::Op::kDeleteRange:
            s = wb.DeleteRange(h(*d, e.cf), Key(e.cf, e.key), End(e.cf, e.value));
            break;
          case Batch::Op::kPatch: s = wb.Merge(h(*d, e.cf), Key(e.cf, e.key), e.value); break;
        }
        if (!s.ok()) return FromRocks(s, "batch");
      }
      rocksdb::WriteOptions wo;
      wo.sync = sync;
      // Cleared before a synced write: a write that completes after this point sets it again.
      if (sync) unsynced_ = false;
      rocksdb::Status s;
      {
        std::shared_lock wl(write_mu_);
        [[maybe_unused]] EngineCall engine;
        s = d->db->Write(wo, &wb);
      }
      if (s.ok()) {
        if (!sync) unsynced_ = true;
        return Status::Ok();
      }
      if (sync) unsynced_ = true;
      // This very write stopped the engine (its WAL append failed): nothing of it is applied,
      // and its torn bytes at the end of the WAL are dropped when the database reopens. Reopen
      // and try once more (a write applied twice is the same write).
      if (attempt == 0 && health_->stopped) continue;
      return FromRocks(s, "write");
    }
  }

  Status Scan(Cf cf, std::string_view begin, std::string_view end,
              const std::function<bool(std::string_view, std::string_view)>& fn, const Snapshot* snap) override {
    return ScanWith(cf, begin, end, fn, snap, true);
  }

  Status ScanOnce(Cf cf, std::string_view begin, std::string_view end,
                  const std::function<bool(std::string_view, std::string_view)>& fn, const Snapshot* snap) override {
    return ScanWith(cf, begin, end, fn, snap, false);
  }

  std::shared_ptr<const Snapshot> GetSnapshot() override {
    auto d = Use();
    if (!d) return nullptr;
    return std::make_shared<RocksSnapshot>(std::move(d));
  }

  Status Flush() override {
    auto d = Use();
    if (!d) return Unavailable();
    if (opts_.read_only) return Status::Ok();  // nothing of this process to flush
    if (d->read_only || health_->stopped) return StoppedStatus();
    if (opts_.space) {
      uint64_t pending = PendingBytes(), free = opts_.space->FreeBytes();
      if (free < pending + (1 << 20))
        return Status::Errorf(ENOSPC, "no space to flush the database's memtables ({:.1f} MiB, {:.1f} MiB free)",
                              pending / 1048576.0, free / 1048576.0);
    }
    rocksdb::FlushOptions fo;
    for (auto* hd : d->handles) LFS_TRY(FromRocks(d->db->Flush(fo, hd), "flush"));
    return Status::Ok();
  }

  // Makes the writes so far durable. DB::SyncWAL aborts the process on an assertion in this
  // build if called after a failed WAL append, so it runs only with no write in flight (the
  // write lock) and the engine healthy: a failed append stops the engine (the listener) before
  // its Write returns. It needs no room: the WAL's bytes are written already. Nothing to do if
  // no write came since the last sync.
  Status SyncWal() override {
    if (opts_.read_only) return Status::Ok();
    if (health_->stopped) (void)Recover();
    auto d = Use();
    if (!d || d->read_only || health_->stopped) return StoppedStatus();
    if (!unsynced_.exchange(false)) return Status::Ok();
    Status st;
    {
      std::unique_lock wl(write_mu_);
      st = health_->stopped ? StoppedStatus() : FromRocks(d->db->SyncWAL(), "sync");
    }
    if (!st.ok()) unsynced_ = true;
    return st;
  }

  Status Compact(Cf cf) override {
    auto d = Use();
    if (!d) return Unavailable();
    if (d->read_only || health_->stopped) return StoppedStatus();
    LFS_TRY(RoomToCompact(*d, h(*d, cf)));
    rocksdb::CompactRangeOptions co;
    co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
    co.exclusive_manual_compaction = false;  // runs beside automatic compactions of other families
    LFS_TRY(FromRocks(d->db->Flush(rocksdb::FlushOptions(), h(*d, cf)), "flush"));
    return FromRocks(d->db->CompactRange(co, h(*d, cf), nullptr, nullptr), "compact");
  }

  Status CompactAll() override {
    LFS_TRY(Flush());
    auto d = Use();
    if (!d) return Unavailable();
    rocksdb::CompactRangeOptions co;
    co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
    for (auto* hd : d->handles) {
      LFS_TRY(RoomToCompact(*d, hd));
      LFS_TRY(FromRocks(d->db->CompactRange(co, hd, nullptr, nullptr), "compact"));
    }
    return Status::Ok();
  }

  Result<CfStats> Stats(Cf cf) override {
    auto d = Use();
    if (!d) return Unavailable();
    if (Aliased(cf)) return CfStats{};  // its tables are kBlobs', counted there
    rocksdb::TablePropertiesCollection props;
    LFS_TRY(FromRocks(d->db->GetPropertiesOfAllTables(h(*d, cf), &props), "table properties"));
    CfStats st;
    for (const auto& [file, p] : props) {
      st.data_bytes += p->data_size;
      st.index_filter_bytes += p->index_size + p->filter_size;
      st.entries += p->num_entries;
      st.raw_key_bytes += p->raw_key_size;
      st.raw_value_bytes += p->raw_value_size;
    }
    st.sst_file_bytes = FamilyBytes(*d, h(*d, cf));
    if (!Prefixed(cf)) return st;
    // The shared family's tables hold several logical families: each gets the share of the table
    // figures that its live records' raw bytes make of all of them (kMeta takes the rounding
    // remainder, so the shares add up to the tables' figures).
    uint64_t raw[kNumCfs] = {}, keys[kNumCfs] = {}, n[kNumCfs] = {};
    std::unique_ptr<rocksdb::Iterator> it(d->db->NewIterator(rocksdb::ReadOptions(), h(*d, cf)));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      auto k = it->key();
      uint8_t f = k.empty() ? 0 : static_cast<uint8_t>(k[0]);
      if (f >= kNumCfs || !Prefixed(static_cast<Cf>(f))) continue;
      raw[f] += k.size() + it->value().size();
      keys[f] += k.size() - 1;
      n[f]++;
    }
    LFS_TRY(FromRocks(it->status(), "scan"));
    uint64_t total = 0;
    for (int i = 0; i < kNumCfs; i++) total += raw[i];
    const int me = static_cast<int>(cf), meta = static_cast<int>(Cf::kMeta);
    auto part = [&](uint64_t v, int f) -> uint64_t {
      return total == 0 ? 0 : static_cast<uint64_t>(static_cast<long double>(v) * raw[f] / total);
    };
    auto share = [&](uint64_t v) -> uint64_t {
      if (me != meta) return part(v, me);
      uint64_t others = 0;
      for (int i = 0; i < kNumCfs; i++)
        if (i != meta) others += part(v, i);
      return v > others ? v - others : 0;
    };
    st.sst_file_bytes = share(st.sst_file_bytes);
    st.data_bytes = share(st.data_bytes);
    st.index_filter_bytes = share(st.index_filter_bytes);
    st.entries = n[me];
    st.raw_key_bytes = keys[me];
    st.raw_value_bytes = raw[me] - keys[me] - n[me];
    return st;
  }

  // Brings a stopped engine back. After a failed compaction: DB::Resume, which in that case only
  // clears the error (no flush, no WAL), and automatic compactions pause until the filesystem
  // has room again. Otherwise: closes the stopped instance and opens the database again, if
  // nothing holds the instance (a call in flight or a snapshot: EBUSY, try later); a reopen that
  // fails leaves a read-only instance, so reads go on.
  Status Recover() override {
    if (!health_->stopped) return Status::Ok();
    std::lock_guard rl(reopen_mu_);
    if (!health_->stopped) return Status::Ok();
    if (health_->kind == Health::kCompaction) {
      auto d = Use();
      if (d && !d->read_only) {
        PauseCompactions(*d, true);
        health_->stopped = false;
        health_->kind = Health::kNone;
        auto rs = d->db->Resume();
        if (rs.ok()) {
          spdlog::info("database: resumed after the failed compaction; automatic compactions wait for room");
          return Status::Ok();
        }
        health_->Stop("resume after a failed compaction: " + rs.ToString(), health_->no_space, Health::kOther);
      }
    }
    // The reserve first (lock order: the guard's lock before db_mu_): room for the new MANIFEST,
    // OPTIONS file and WAL.
    if (opts_.space && health_->no_space) opts_.space->ReleaseReserve("the database ran out of space");
    std::unique_lock l(db_mu_);
    if (db_ && db_.use_count() > 1) return Status::Error(EBUSY, "the database is in use; it reopens once released");
    const auto t0 = std::chrono::steady_clock::now();
    db_.reset();  // closes it: its WAL keeps every acknowledged write
    health_->stopped = false;
    health_->kind = Health::kNone;
    rocksdb::Status rs;
    auto d = OpenDb(false, &rs);
    if (d) {
      if (paused_) PauseCompactions(*d, true);
      db_ = std::move(d);
      health_->no_space = false;
      unsynced_ = true;
      spdlog::info("database: reopened after the failure in {} ms; writes are taken again",
                   std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count());
      l.unlock();
      if (health_->hold) ReleaseHoldOrWait();
      return Status::Ok();
    }
    Status st = FromRocks(rs, "reopen database");
    health_->stopped = true;
    health_->kind = Health::kOther;
    {
      std::lock_guard hl(health_->mu);
      health_->why = st.message();
    }
    health_->no_space = st.code() == ENOSPC;
    rocksdb::Status ro_rs;
    db_ = OpenDb(true, &ro_rs);  // reads go on; null if even that fails
    if (!db_) spdlog::error("database: {}; read-only open failed too: {}", st.message(), ro_rs.ToString());
    return st;
  }

 private:
  RocksKv() : health_(std::make_shared<Health>()) {}

  std::shared_ptr<Db> Use() {
    std::lock_guard l(db_mu_);
    return db_;
  }

  Status Unavailable() {
    return Status::Errorf(EIO, "database unavailable: {}", health_->Why());
  }

  Status StoppedStatus() {
    if (opts_.read_only) return Status::Error(EROFS, "the Store is open read-only");
    return Status::Errorf(health_->no_space ? ENOSPC : EIO, "database stopped taking writes ({}); it reopens once it can",
                          health_->Why());
  }

  // Opens an instance (read-only: OpenForReadOnly). Null with *rs set on failure.
  std::shared_ptr<Db> OpenDb(bool read_only, rocksdb::Status* rs) {
    rocksdb::DBOptions dbo = rocks::DbOptions();
    dbo.create_if_missing = opts_.create_if_missing && !read_only;
    dbo.error_if_exists = opts_.error_if_exists && !read_only;
    dbo.paranoid_checks = paranoid_;
    if (env_) dbo.env = env_.get();
    if (!read_only) dbo.listeners.push_back(std::make_shared<Listener>(health_));
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    if (legacy_) {
      for (int i = 0; i < kNumCfs; i++)
        if (static_cast<Cf>(i) != Cf::kChunks)
          cfs.emplace_back(CfName(static_cast<Cf>(i)), rocks::CfOptions(static_cast<Cf>(i), cache_));
    } else {
      cfs.emplace_back(CfName(Cf::kMeta), rocks::CfOptions(Cf::kMeta, cache_));
      cfs.emplace_back(CfName(Cf::kBlobs), rocks::CfOptions(Cf::kBlobs, cache_));
      cfs.emplace_back(CfName(Cf::kWorkspace), rocks::CfOptions(Cf::kWorkspace, cache_));
      if (chunks_) cfs.emplace_back(CfName(Cf::kChunks), rocks::CfOptions(Cf::kChunks, cache_));
    }
    // Flushes held (the flush gate) or a WAL of more than half a memtable to replay: the families'
    // flush size is raised, so recovery replays it into memtables without a flush in the middle
    // (avoid_flush_during_recovery covers only the flush at its end), which a full disk fails.
    const bool hold = !read_only && health_->gate && (health_->hold || WalBytes() >= WriteBufferBytes() / 2);
    for (auto& c : cfs) c.options.write_buffer_size = hold ? kHeldWriteBuffer : WriteBufferBytes();
    auto d = std::make_shared<Db>();
    d->read_only = read_only;
    if (opts_.workspace_replay_ok) {
      // A fresh filter per instance: a reopen replays a WAL that grew since the last one.
      d->replay_filter = NewReplayFilter(opts_.workspace_replay_ok);
      dbo.wal_filter = d->replay_filter.get();
    }
    rocksdb::DB* db = nullptr;
    *rs = read_only ? rocksdb::DB::OpenForReadOnly(dbo, path_, cfs, &d->handles, &db)
                    : rocksdb::DB::Open(dbo, path_, cfs, &d->handles, &db);
    if (!rs->ok()) return nullptr;
    d->db.reset(db);
    if (!read_only && d->replay_filter && ReplayStopped(*d->replay_filter)) {
      // The logs keep the batches the replay stopped at (recovery does not flush here), and the
      // next open would stop at the same batch again, dropping every write made after this
      // one. Flushing every family now makes those logs obsolete before anything is written.
      rocksdb::FlushOptions fo;
      fo.wait = true;
      fo.allow_write_stall = true;
      *rs = db->Flush(fo, d->handles);
      if (!rs->ok()) return nullptr;
    }
    if (hold) health_->hold = true;
    return d;
  }

  // The names of the database's files.
  std::set<std::string> Files() const {
    std::set<std::string> out;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(path_, ec), end; !ec && it != end; it.increment(ec))
      out.insert(it->path().filename().string());
    return out;
  }

  // An open that failed for space leaves what it began: an empty WAL, a new MANIFEST that
  // CURRENT does not name, a temporary file. They are removed (so a failed writable verb on a
  // full disk changes nothing); anything CURRENT names, and every file that was there before, stays.
  void RemoveWhatAFailedOpenLeft(const std::set<std::string>& before) {
    std::string current;
    if (FILE* f = std::fopen((path_ + "/CURRENT").c_str(), "r")) {
      char buf[256];
      size_t n = std::fread(buf, 1, sizeof buf, f);
      std::fclose(f);
      current.assign(buf, n);
      while (!current.empty() && (current.back() == '\n' || current.back() == '\r')) current.pop_back();
    }
    for (const auto& name : Files()) {
      if (before.count(name)) continue;
      const std::string file = path_ + "/" + name;
      std::error_code ec;
      const bool empty_wal = name.size() > 4 && name.compare(name.size() - 4, 4, ".log") == 0 &&
                             std::filesystem::file_size(file, ec) == 0 && !ec;
      const bool stray_manifest = name.rfind("MANIFEST-", 0) == 0 && !current.empty() && name != current;
      const bool temp = name.size() > 6 && name.compare(name.size() - 6, 6, ".dbtmp") == 0;
      if (!empty_wal && !stray_manifest && !temp) continue;
      if (::unlink(file.c_str()) == 0) spdlog::info("database: removed {} left by the failed open", file);
    }
  }

  // A read-only open takes no lock of RocksDB's: an OFD read lock on its LOCK file keeps a
  // writer (whose open takes a write lock there) out while this process reads.
  Status LockForReading() {
    lock_fd_ = ::open((path_ + "/LOCK").c_str(), O_RDONLY | O_CLOEXEC);
    if (lock_fd_ < 0) return Status::Ok();  // nothing to lock: no writer has ever opened it
    struct flock fl {};
    fl.l_type = F_RDLCK;
    fl.l_whence = SEEK_SET;
    if (fcntl(lock_fd_, F_OFD_SETLK, &fl) != 0)
      return Status::Errorf(EBUSY, "open database {}: in use by another process", path_);
    return Status::Ok();
  }

  // The space guard's relief: flushes each family whose memtables fit in the free space (a flush
  // writes only the latest value of each key, so it may free room the memtables' size claimed).
  // True if one was flushed.
  bool FlushWhatFits() {
    auto d = Use();
    if (!d || d->read_only || opts_.read_only || health_->stopped || !opts_.space) return false;
    int flushed = 0;
    uint64_t before = PendingBytes();
    for (auto* hd : d->handles) {
      uint64_t size = 0;
      if (!d->db->GetIntProperty(hd, rocksdb::DB::Properties::kCurSizeAllMemTables, &size) || size < (1 << 20))
        continue;
      if (opts_.space->FreeBytes() < size + (1 << 20)) continue;
      if (!d->db->Flush(rocksdb::FlushOptions(), hd).ok()) break;
      flushed++;
    }
    if (flushed)
      spdlog::info("space: flushed {} memtable families to make room ({:.1f} MiB before, {:.1f} MiB after)", flushed,
                   before / 1048576.0, PendingBytes() / 1048576.0);
    return flushed > 0;
  }

  uint64_t PendingBytes() {
    auto d = Use();
    if (!d || d->read_only) return 0;
    uint64_t v = 0;
    if (!d->db->GetAggregatedIntProperty(rocksdb::DB::Properties::kCurSizeAllMemTables, &v)) return 0;
    return v;
  }

  uint64_t FamilyBytes(Db& d, rocksdb::ColumnFamilyHandle* hd) {
    std::vector<rocksdb::LiveFileMetaData> files;
    d.db->GetLiveFilesMetaData(&files);
    uint64_t n = 0;
    for (const auto& f : files)
      if (f.column_family_name == hd->GetName()) n += f.size;
    return n;
  }

  // A full compaction of a family writes its tables anew before it deletes the old ones.
  Status RoomToCompact(Db& d, rocksdb::ColumnFamilyHandle* hd) {
    if (!opts_.space) return Status::Ok();
    uint64_t need = FamilyBytes(d, hd) + PendingBytes() + opts_.space->options().floor_bytes / 2;
    uint64_t free = opts_.space->FreeBytes();
    if (free >= need) return Status::Ok();
    return Status::Errorf(ENOSPC, "no space to compact the {} family: it needs {:.1f} MiB, {:.1f} MiB free",
                          hd->GetName(), need / 1048576.0, free / 1048576.0);
  }

  // Automatic compactions off (or back on) in every family. Off after a compaction failed for
  // space, so it is not retried every second into the same wall: until the filesystem has the
  // floor's worth more room than it had then (RecoveryLoop checks). Write stalls that wait on
  // compactions are off with them, so writers are never held up by the pause.
  void PauseCompactions(Db& d, bool pause) {
    for (auto* hd : d.handles)
      (void)d.db->SetOptions(hd, {{"disable_auto_compactions", pause ? "true" : "false"}});
    if (pause && !paused_.exchange(true)) {
      paused_free_ = opts_.space ? opts_.space->FreeBytes() : 0;
      WakeRecovery();
    }
    if (!pause) paused_ = false;
  }

  // The flush gate. RocksDB flushes a family by itself once its active memtable reaches its flush
  // size, and a flush that fails for space stops the engine (a reopen, with the reserve). The
  // space guard counts the memtables on top of its floor, so growth it admits leaves room for
  // their flush; but exempt writes (deletions) and a disk filled from outside can reach the
  // flush without room. So, when a write would bring a family near its flush size and the disk
  // lacks room for the memtables, flushes are held: every family's flush size is raised
  // (kHeldWriteBuffer), exempt writes go on into the memtables (up to kHeldLimit), others are
  // ENOSPC. The hold ends (flush sizes back; RocksDB then flushes what is over) once the disk has
  // the memtables plus half the floor free: checked by admitted writes and every second by the
  // recovery thread. Every write stays in the WAL meanwhile, as always.
  static constexpr uint64_t kHeldWriteBuffer = uint64_t{1} << 30;
  static constexpr uint64_t kHeldLimit = uint64_t{256} << 20;
  static constexpr uint64_t kFlushRoom = 1 << 20;

  uint64_t WriteBufferBytes() const { return opts_.write_buffer_bytes ? opts_.write_buffer_bytes : 64 << 20; }

  Status FlushGate(Db& d, const Batch& batch) {
    const bool exempt = batch.space_exempt();
    const uint64_t bytes = batch.ApproximateBytes();
    if (health_->hold && !exempt) (void)TryReleaseHold(d);
    if (!health_->hold) {
      if (!NearFlush(d, batch, bytes)) return Status::Ok();
      const uint64_t pending = PendingBytes(), free = opts_.space->FreeBytes();
      if (free >= pending + 2 * bytes + kFlushRoom) return Status::Ok();
      Hold(d, free, pending);
    }
    const uint64_t pending = PendingBytes();
    if (exempt && pending + bytes <= kHeldLimit) return Status::Ok();
    return Status::Errorf(ENOSPC,
                          "no space left on device: the database's memtables ({:.1f} MiB) wait for room to be written",
                          pending / 1048576.0);
  }

  // True if `batch` may bring a family it writes to its flush size (RocksDB flushes a memtable a
  // little before it is full: the last arena block, an eighth).
  bool NearFlush(Db& d, const Batch& batch, uint64_t bytes) {
    const uint64_t wbs = WriteBufferBytes();
    rocksdb::ColumnFamilyHandle* seen[kNumCfs] = {};
    int n = 0;
    for (const auto& e : batch.entries()) {
      auto* hd = h(d, e.cf);
      if (std::find(seen, seen + n, hd) != seen + n) continue;
      seen[n++] = hd;
      uint64_t active = 0;
      if (!d.db->GetIntProperty(hd, rocksdb::DB::Properties::kCurSizeActiveMemTable, &active)) return true;
      if (active + 2 * bytes + wbs / 8 >= wbs) return true;
    }
    return false;
  }

  void Hold(Db& d, uint64_t free, uint64_t pending) {
    std::lock_guard l(hold_mu_);
    if (health_->hold) return;
    SetWriteBuffers(d, kHeldWriteBuffer);
    health_->hold = true;
    spdlog::warn("database: {:.1f} MiB free, {:.1f} MiB in memtables: flushes held until there is room; "
                 "writes other than deletions fail with ENOSPC",
                 free / 1048576.0, pending / 1048576.0);
    WakeRecovery();
  }

  // Ends the hold if the disk has room for the memtables' flush. True if not held any more.
  bool TryReleaseHold(Db& d) {
    std::lock_guard l(hold_mu_);
    if (!health_->hold) return true;
    const uint64_t pending = PendingBytes(), free = opts_.space->FreeBytes();
    if (free < pending + opts_.space->options().floor_bytes / 2 + kFlushRoom) return false;
    SetWriteBuffers(d, WriteBufferBytes());
    health_->hold = false;
    spdlog::info("database: {:.1f} MiB free: flushes go on ({:.1f} MiB in memtables)", free / 1048576.0,
                 pending / 1048576.0);
    return true;
  }

  void ReleaseHoldOrWait() {
    auto d = Use();
    if (d && !d->read_only && TryReleaseHold(*d)) return;
    WakeRecovery();
  }

  // Sets every family's flush size. It persists an OPTIONS file; on a full disk that fails and
  // the new size still applies (fail_if_options_file_error is off), so the status is logged only.
  void SetWriteBuffers(Db& d, uint64_t bytes) {
    for (auto* hd : d.handles) {
      auto s = d.db->SetOptions(hd, {{"write_buffer_size", std::to_string(bytes)}});
      if (!s.ok()) spdlog::warn("database: set the flush size of {}: {}", hd->GetName(), s.ToString());
    }
  }

  // The bytes of the WAL files: what an open replays.
  uint64_t WalBytes() const {
    namespace fs = std::filesystem;
    std::error_code ec;
    uint64_t n = 0;
    for (fs::directory_iterator it(path_, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().extension() != ".log") continue;
      std::error_code sec;
      uint64_t size = it->file_size(sec);
      if (!sec) n += size;
    }
    return n;
  }

  void WakeRecovery() {
    std::lock_guard l(rec_mu_);
    if (rec_stop_) return;
    if (!rec_thread_.joinable()) rec_thread_ = std::thread([this] { RecoveryLoop(); });
    rec_cv_.notify_all();
  }

  // Retries Recover with a backoff while the engine is stopped (writers also retry as they come),
  // and turns automatic compactions back on once there is room for them.
  void RecoveryLoop() {
    std::unique_lock l(rec_mu_);
    auto delay = std::chrono::milliseconds(50);
    while (!rec_stop_) {
      if (!health_->stopped && !paused_ && !health_->hold) {
        delay = std::chrono::milliseconds(50);
        rec_cv_.wait(l, [&] { return rec_stop_ || health_->stopped.load() || paused_.load() || health_->hold.load(); });
        continue;
      }
      rec_cv_.wait_for(l, health_->stopped ? delay : std::chrono::milliseconds(1000), [&] { return rec_stop_; });
      if (rec_stop_) break;
      l.unlock();
      if (health_->stopped) {
        Status s = Recover();
        if (!s.ok()) delay = std::min(delay * 2, std::chrono::milliseconds(2000));
      } else if (health_->hold) {
        if (auto d = Use(); d && !d->read_only) (void)TryReleaseHold(*d);
      }
      if (!health_->stopped && paused_) {
        uint64_t free = opts_.space ? opts_.space->FreeBytes() : UINT64_MAX;
        uint64_t want = paused_free_ + (opts_.space ? opts_.space->options().floor_bytes : 0);
        auto d = Use();
        if (free >= want && d && !d->read_only) {
          PauseCompactions(*d, false);
          spdlog::info("database: {:.1f} MiB free: automatic compactions resumed", free / 1048576.0);
        }
      }
      l.lock();
    }
  }

  Status ScanWith(Cf cf, std::string_view begin, std::string_view end,
                  const std::function<bool(std::string_view, std::string_view)>& fn, const Snapshot* snap,
                  bool fill_cache) {
    auto d = snap ? static_cast<const RocksSnapshot*>(snap)->db() : Use();
    if (!d) return Unavailable();
    rocksdb::ReadOptions ro;
    ro.fill_cache = fill_cache;
    if (snap) ro.snapshot = static_cast<const RocksSnapshot*>(snap)->get();
    std::string lo = Key(cf, begin), hi = End(cf, end);
    rocksdb::Slice upper(hi);
    if (!hi.empty()) ro.iterate_upper_bound = &upper;
    size_t strip = Prefixed(cf) ? 1 : 0;
    std::unique_ptr<rocksdb::Iterator> it(d->db->NewIterator(ro, h(*d, cf)));
    for (it->Seek(lo); it->Valid(); it->Next()) {
      auto k = it->key(), v = it->value();
      if (!fn(std::string_view(k.data() + strip, k.size() - strip), std::string_view(v.data(), v.size()))) break;
    }
    return FromRocks(it->status(), "scan");
  }

  bool Prefixed(Cf cf) const { return !legacy_ && cf != Cf::kBlobs && cf != Cf::kWorkspace && cf != Cf::kChunks; }
  bool Aliased(Cf cf) const override { return cf == Cf::kChunks && !chunks_; }
  rocksdb::ColumnFamilyHandle* h(const Db& d, Cf cf) const {
    if (Aliased(cf)) cf = Cf::kBlobs;
    if (legacy_) return d.handles[static_cast<int>(cf)];
    return d.handles[cf == Cf::kBlobs ? 1 : cf == Cf::kWorkspace ? 2 : cf == Cf::kChunks ? 3 : 0];
  }
  // The physical key of a logical one.
  std::string Key(Cf cf, std::string_view key) const {
    if (!Prefixed(cf)) return std::string(key);
    std::string k(1, static_cast<char>(cf));
    k.append(key);
    return k;
  }
  // The physical exclusive end of a range: an empty logical end is the end of the family.
  std::string End(Cf cf, std::string_view end) const {
    if (!end.empty() || !Prefixed(cf)) return Key(cf, end);
    return std::string(1, static_cast<char>(static_cast<uint8_t>(cf) + 1));
  }

  std::string path_;
  RocksOptions opts_;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::unique_ptr<rocksdb::Env> env_;  // the Store-mode file system (and the tests' faults); outlives db_
  bool legacy_ = false;
  bool chunks_ = false;  // the database has the chunks family (else Cf::kChunks is kBlobs')
  bool paranoid_ = true;
  int lock_fd_ = -1;
  std::shared_ptr<Health> health_;
  // Writes hold it shared while RocksDB writes; SyncWal exclusively, so it never syncs a WAL
  // whose append just failed (above).
  std::shared_mutex write_mu_;
  std::atomic<bool> unsynced_{true};  // a write came since the last sync
  std::mutex reopen_mu_;  // one Recover at a time; lock order: before db_mu_
  std::mutex db_mu_;      // guards db_ (the pointer, not the instance)
  std::shared_ptr<Db> db_;
  std::mutex hold_mu_;  // Hold and TryReleaseHold; lock order: before the guard's lock and db_mu_
  std::atomic<bool> paused_{false};  // automatic compactions paused (PauseCompactions)
  std::atomic<uint64_t> paused_free_{0};
  std::mutex rec_mu_;  // the recovery thread
  std::condition_variable rec_cv_;
  bool rec_stop_ = false;
  std::thread rec_thread_;
};

}  // namespace

Result<std::unique_ptr<Kv>> OpenRocksKv(const std::string& path, const RocksOptions& opts) {
  return RocksKv::Open(path, opts);
}

}  // namespace layerfs::kv
