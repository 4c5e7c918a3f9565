// RocksKv: Kv on RocksDB. Tuning (docs/design.md, "Storage engine"): 64 KiB blocks compressed
// with zstd and a per-file trained dictionary, so small records (deltas, tree listings) compress
// together (a 16 KiB dictionary: each file stores its own, so a larger one costs more than it
// saves); level-19 zstd at the bottom level, where history settles, and fast zstd above.
// Universal compaction: every CLI process reopens the database and flushes the recovered WAL
// into small files; universal compaction merges those (level compaction trivially moved
// non-overlapping one-key files down and kept them forever, each costing a 4 KiB block) and
// rewrites the large bottom run only on a full compaction, so commits do not stall on it.
// No info log: its files would count against the Store's allocated bytes.
// Three physical column families: "blobs" holds Cf::kBlobs as is, "workspace" holds
// Cf::kWorkspace as is (tuned for live data); "default" holds every other logical family, each key prefixed with the family's byte (the Cf value), so the small families
// share table files (each file costs a 4 KiB block plus index, filter and properties) and the
// OPTIONS files describe two families, not six. A database made with one physical family per
// logical one (all six names present) is opened in that layout, unprefixed.
#include <algorithm>
#include <cstdarg>

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/merge_operator.h>
#include <rocksdb/table.h>
#include <rocksdb/table_properties.h>
#include <rocksdb/utilities/options_util.h>

#include "kv/rocks_private_fs.h"
#include "kv/kv.h"

namespace layerfs::kv {

const char* CfName(Cf cf) {
  static const char* kNames[kNumCfs] = {"default", "blobs", "trees", "commits", "index", "workspace"};
  return kNames[static_cast<int>(cf)];
}

namespace {

class NullLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char*, va_list) override {}
};

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::Ok();
  int code = EIO;
  if (s.IsNoSpace()) code = ENOSPC;
  else if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) code = EBUSY;
  else if (s.IsNotFound()) code = ENOENT;
  else if (s.IsInvalidArgument()) code = EINVAL;
  return Status::Errorf(code, "{}: {}", what, s.ToString());
}

class RocksSnapshot : public Snapshot {
 public:
  RocksSnapshot(rocksdb::DB* db) : db_(db), snap_(db->GetSnapshot()) {}
  ~RocksSnapshot() override { db_->ReleaseSnapshot(snap_); }
  const rocksdb::Snapshot* get() const { return snap_; }

 private:
  rocksdb::DB* db_;
  const rocksdb::Snapshot* snap_;
};

// Batch::Patch on the workspace family: operands are EncodePatch() ranges applied in order over
// the existing value (absent = empty). FORMAT: the name is persisted with the family's options.
class PatchOperator : public rocksdb::MergeOperator {
 public:
  bool FullMergeV2(const MergeOperationInput& in, MergeOperationOutput* out) const override {
    std::string v = in.existing_value ? in.existing_value->ToString() : std::string();
    for (const auto& op : in.operand_list) {
      if (!ApplyPatch(std::string_view(op.data(), op.size()), &v)) return false;  // Corruption
    }
    out->new_value = std::move(v);
    return true;
  }
  const char* Name() const override { return "layerfs.patch"; }
};

// In the merged layout, cf == kMeta stands for the shared family.
rocksdb::ColumnFamilyOptions CfOptions(Cf cf, const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions o;
  rocksdb::BlockBasedTableOptions t;
  t.block_cache = cache;
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  t.format_version = 5;
  // XXH3 block checksums: this RocksDB build computes crc32c in software (10% of the daemon's
  // CPU in a profile of a sequential write). Each table records its checksum type, so tables
  // written before stay readable.
  t.checksum = rocksdb::kXXH3;
  bool history = cf == Cf::kBlobs || cf == Cf::kTrees || cf == Cf::kCommits || cf == Cf::kMeta;
  t.block_size = history ? 64 << 10 : 16 << 10;
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  o.compression = rocksdb::kZSTD;
  o.compression_opts.level = history ? 9 : 3;
  if (history) {
    o.compression_opts.max_dict_bytes = 16 << 10;
    o.compression_opts.zstd_max_train_bytes = 4 << 20;
    // A table buffers this much before training its dictionary, then compresses the buffer in
    // one go that a shutdown cannot interrupt: at level 19, incompressible data compresses at
    // ~2.5 MB/s here, so 64 MiB held a daemon's exit for ~25 s. Training samples at most 16 MiB.
    o.compression_opts.max_dict_buffer_bytes = 8 << 20;
    o.bottommost_compression = rocksdb::kZSTD;
    o.bottommost_compression_opts = o.compression_opts;
    o.bottommost_compression_opts.level = 19;
    o.bottommost_compression_opts.enabled = true;
    // At the bottom (the bulk of a Store), a larger dictionary: measured on 157 npm eslint
    // releases (bench/dsh-dedup, the Store recompacted by gc), 16 KiB -> 4.50 MB, 64 KiB -> 4.29,
    // 112 KiB -> 4.24, 160 KiB -> 4.22, 256 KiB -> 4.24 (each table stores its dictionary).
    // Upper levels keep 16 KiB: their tables are small, and a dictionary may be as large as the
    // data it was trained on. Reads are unchanged (one dictionary per table, cached with it).
    o.bottommost_compression_opts.max_dict_bytes = 112 << 10;
    o.bottommost_compression_opts.zstd_max_train_bytes = 16 << 20;
  }
  if (cf == Cf::kWorkspace) {
    // Live file data: written often, folded into history and deleted at the next commit. Not
    // compressed (LZ4 cost the flushes, compactions and every cold read CPU for data that lives
    // until the next commit); compacted when the daemon closes the Store, so a closed Store keeps
    // no dead blocks (blob files were tried: dead ones outlived their data and inflated the Store).
    o.compression = rocksdb::kNoCompression;
    o.level_compaction_dynamic_level_bytes = true;
    o.write_buffer_size = 64 << 20;
    o.target_file_size_base = 64 << 20;
    // Small writes are patches (merges); a block patched this often in the memtable is folded
    // into one value there, so reads never apply long operand lists.
    o.merge_operator = std::make_shared<PatchOperator>();
    o.max_successive_merges = 32;
    return o;
  }
  o.compaction_style = rocksdb::kCompactionStyleUniversal;
  o.compaction_options_universal.allow_trivial_move = false;
  o.level0_file_num_compaction_trigger = 4;
  o.write_buffer_size = 64 << 20;
  o.target_file_size_base = 64 << 20;
  return o;
}

class RocksKv : public Kv {
 public:
  ~RocksKv() override {
    if (!db_) return;  // Open failed
    // Flush so the WAL is obsolete and deleted: the next open has nothing to recover, and the
    // closed Store holds no copy of its recent writes in an uncompressed log.
    (void)Flush();
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
    (void)db_->Close();
  }

  static Result<std::unique_ptr<Kv>> Open(const std::string& path, const RocksOptions& ro) {
    auto kv = std::unique_ptr<RocksKv>(new RocksKv());
    auto cache = rocksdb::NewLRUCache(ro.block_cache_bytes);
    rocksdb::DBOptions dbo;
    dbo.create_if_missing = ro.create_if_missing;
    dbo.error_if_exists = ro.error_if_exists;
    dbo.create_missing_column_families = true;
    // One flush and up to three compactions: the workspace family's compaction at daemon exit
    // need not queue behind a long level-19 compaction of history (nor a flush behind either).
    dbo.max_background_jobs = 4;
    dbo.keep_log_file_num = 3;
    dbo.max_manifest_file_size = 4 << 20;
    dbo.recycle_log_file_num = 0;
    // Preallocation would count as allocated bytes the Store does not use.
    dbo.allow_fallocate = false;
    dbo.max_log_file_size = 1 << 20;
    dbo.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
    dbo.info_log = std::make_shared<NullLogger>();
    // Table, log and manifest files in the Store's mode (RocksDB would make them 0644).
    kv->env_ = rocksdb::NewCompositeEnv(PrivateFileSystem(rocksdb::FileSystem::Default(), ro.file_mode));
    dbo.env = kv->env_.get();
    std::vector<std::string> existing;
    (void)rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &existing);
    kv->legacy_ = std::find(existing.begin(), existing.end(), CfName(Cf::kTrees)) != existing.end();
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    if (kv->legacy_) {
      for (int i = 0; i < kNumCfs; i++)
        cfs.emplace_back(CfName(static_cast<Cf>(i)), CfOptions(static_cast<Cf>(i), cache));
    } else {
      cfs.emplace_back(CfName(Cf::kMeta), CfOptions(Cf::kMeta, cache));
      cfs.emplace_back(CfName(Cf::kBlobs), CfOptions(Cf::kBlobs, cache));
      cfs.emplace_back(CfName(Cf::kWorkspace), CfOptions(Cf::kWorkspace, cache));
    }
    rocksdb::DB* db = nullptr;
    auto s = rocksdb::DB::Open(dbo, path, cfs, &kv->handles_, &db);
    if (!s.ok()) return FromRocks(s, "open database " + path);
    kv->db_.reset(db);
    return std::unique_ptr<Kv>(std::move(kv));
  }

  Result<std::optional<std::string>> Get(Cf cf, std::string_view key, const Snapshot* snap) override {
    rocksdb::ReadOptions ro;
    if (snap) ro.snapshot = static_cast<const RocksSnapshot*>(snap)->get();
    std::string v;
    std::string pk = Key(cf, key);
    auto s = db_->Get(ro, h(cf), pk, &v);
    if (s.IsNotFound()) return std::optional<std::string>();
    if (!s.ok()) return FromRocks(s, "read");
    return std::optional<std::string>(std::move(v));
  }

  Status Write(const Batch& batch, bool sync) override {
    rocksdb::WriteBatch wb;
    for (const auto& e : batch.entries()) {
      rocksdb::Status s;
      switch (e.op) {
        case Batch::Op::kPut: s = wb.Put(h(e.cf), Key(e.cf, e.key), e.value); break;
        case Batch::Op::kDelete: s = wb.Delete(h(e.cf), Key(e.cf, e.key)); break;
        case Batch::Op::kDeleteRange: s = wb.DeleteRange(h(e.cf), Key(e.cf, e.key), End(e.cf, e.value)); break;
        case Batch::Op::kPatch:
          LFS_TRY(CheckPatch(e.cf, e.value));
          s = wb.Merge(h(e.cf), Key(e.cf, e.key), e.value);
          break;
      }
      if (!s.ok()) return FromRocks(s, "batch");
    }
    rocksdb::WriteOptions wo;
    wo.sync = sync;
    return FromRocks(db_->Write(wo, &wb), "write");
  }

  Status Scan(Cf cf, std::string_view begin, std::string_view end,
              const std::function<bool(std::string_view, std::string_view)>& fn,
              const Snapshot* snap) override {
    return ScanWith(cf, begin, end, fn, snap, true);
  }

  Status ScanOnce(Cf cf, std::string_view begin, std::string_view end,
                  const std::function<bool(std::string_view, std::string_view)>& fn,
                  const Snapshot* snap) override {
    return ScanWith(cf, begin, end, fn, snap, false);
  }

  std::shared_ptr<const Snapshot> GetSnapshot() override {
    return std::make_shared<RocksSnapshot>(db_.get());
  }

  Status Flush() override {
    rocksdb::FlushOptions fo;
    for (auto* hd : handles_) LFS_TRY(FromRocks(db_->Flush(fo, hd), "flush"));
    return Status::Ok();
  }

  Status SyncWal() override { return FromRocks(db_->SyncWAL(), "sync"); }

  Status Compact(Cf cf) override {
    rocksdb::CompactRangeOptions co;
    co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
    co.exclusive_manual_compaction = false;  // runs beside automatic compactions of other families
    LFS_TRY(FromRocks(db_->Flush(rocksdb::FlushOptions(), h(cf)), "flush"));
    return FromRocks(db_->CompactRange(co, h(cf), nullptr, nullptr), "compact");
  }

  Status CompactAll() override {
    LFS_TRY(Flush());
    rocksdb::CompactRangeOptions co;
    co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
    for (auto* hd : handles_) LFS_TRY(FromRocks(db_->CompactRange(co, hd, nullptr, nullptr), "compact"));
    return Status::Ok();
  }

  Result<CfStats> Stats(Cf cf) override {
    rocksdb::TablePropertiesCollection props;
    LFS_TRY(FromRocks(db_->GetPropertiesOfAllTables(h(cf), &props), "table properties"));
    CfStats st;
    for (const auto& [file, p] : props) {
      st.data_bytes += p->data_size;
      st.index_filter_bytes += p->index_size + p->filter_size;
      st.entries += p->num_entries;
      st.raw_key_bytes += p->raw_key_size;
      st.raw_value_bytes += p->raw_value_size;
    }
    std::vector<rocksdb::LiveFileMetaData> files;
    db_->GetLiveFilesMetaData(&files);
    for (const auto& f : files)
      if (f.column_family_name == h(cf)->GetName()) st.sst_file_bytes += f.size;
    if (!Prefixed(cf)) return st;
    // The shared family's tables hold several logical families: each gets the share of the table
    // figures that its live records' raw bytes make of all of them (kMeta takes the rounding
    // remainder, so the shares add up to the tables' figures).
    uint64_t raw[kNumCfs] = {}, keys[kNumCfs] = {}, n[kNumCfs] = {};
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), h(cf)));
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

 private:
  // Scan and ScanOnce: `fill_cache` off leaves RocksDB's block cache as it was.
  Status ScanWith(Cf cf, std::string_view begin, std::string_view end,
                  const std::function<bool(std::string_view, std::string_view)>& fn,
                  const Snapshot* snap, bool fill_cache) {
    rocksdb::ReadOptions ro;
    ro.fill_cache = fill_cache;
    if (snap) ro.snapshot = static_cast<const RocksSnapshot*>(snap)->get();
    std::string lo = Key(cf, begin), hi = End(cf, end);
    rocksdb::Slice upper(hi);
    if (!hi.empty()) ro.iterate_upper_bound = &upper;
    size_t strip = Prefixed(cf) ? 1 : 0;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, h(cf)));
    for (it->Seek(lo); it->Valid(); it->Next()) {
      auto k = it->key(), v = it->value();
      if (!fn(std::string_view(k.data() + strip, k.size() - strip), std::string_view(v.data(), v.size()))) break;
    }
    return FromRocks(it->status(), "scan");
  }

  RocksKv() = default;
  bool Prefixed(Cf cf) const { return !legacy_ && cf != Cf::kBlobs && cf != Cf::kWorkspace; }
  rocksdb::ColumnFamilyHandle* h(Cf cf) {
    if (legacy_) return handles_[static_cast<int>(cf)];
    return handles_[cf == Cf::kBlobs ? 1 : cf == Cf::kWorkspace ? 2 : 0];
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
  bool legacy_ = false;
  std::unique_ptr<rocksdb::Env> env_;  // outlives db_
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

}  // namespace

Result<std::unique_ptr<Kv>> OpenRocksKv(const std::string& path, const RocksOptions& opts) {
  return RocksKv::Open(path, opts);
}

}  // namespace layerfs::kv
