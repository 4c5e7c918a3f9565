// RocksKv: Kv on RocksDB. Tuning (docs/design.md, "Storage engine"): 64 KiB blocks compressed
// with zstd and a per-file trained dictionary, so small records (deltas, tree listings) compress
// together (a 16 KiB dictionary: each file stores its own, so a larger one costs more than it
// saves); level-19 zstd at the bottom level, where history settles, and fast zstd above.
// Universal compaction: every CLI process reopens the database and flushes the recovered WAL
// into small files; universal compaction merges those (level compaction trivially moved
// non-overlapping one-key files down and kept them forever, each costing a 4 KiB block) and
// rewrites the large bottom run only on a full compaction, so commits do not stall on it.
// No info log: its files would count against the Store's allocated bytes.
#include <cstdarg>

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <rocksdb/table_properties.h>
#include <rocksdb/utilities/options_util.h>

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

rocksdb::ColumnFamilyOptions CfOptions(Cf cf, const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions o;
  rocksdb::BlockBasedTableOptions t;
  t.block_cache = cache;
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  t.format_version = 5;
  bool history = cf == Cf::kBlobs || cf == Cf::kTrees || cf == Cf::kCommits;
  t.block_size = history ? 64 << 10 : 16 << 10;
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  o.compression = rocksdb::kZSTD;
  o.compression_opts.level = 3;
  if (history) {
    o.compression_opts.max_dict_bytes = 16 << 10;
    o.compression_opts.zstd_max_train_bytes = 4 << 20;
    o.compression_opts.max_dict_buffer_bytes = 64 << 20;
    o.bottommost_compression = rocksdb::kZSTD;
    o.bottommost_compression_opts = o.compression_opts;
    o.bottommost_compression_opts.level = 19;
    o.bottommost_compression_opts.enabled = true;
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
    dbo.max_background_jobs = 2;
    dbo.keep_log_file_num = 3;
    dbo.max_manifest_file_size = 4 << 20;
    dbo.recycle_log_file_num = 0;
    // Preallocation would count as allocated bytes the Store does not use.
    dbo.allow_fallocate = false;
    dbo.max_log_file_size = 1 << 20;
    dbo.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
    dbo.info_log = std::make_shared<NullLogger>();
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (int i = 0; i < kNumCfs; i++)
      cfs.emplace_back(CfName(static_cast<Cf>(i)), CfOptions(static_cast<Cf>(i), cache));
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
    auto s = db_->Get(ro, h(cf), rocksdb::Slice(key.data(), key.size()), &v);
    if (s.IsNotFound()) return std::optional<std::string>();
    if (!s.ok()) return FromRocks(s, "read");
    return std::optional<std::string>(std::move(v));
  }

  Status Write(const Batch& batch, bool sync) override {
    rocksdb::WriteBatch wb;
    for (const auto& e : batch.entries()) {
      rocksdb::Status s;
      switch (e.op) {
        case Batch::Op::kPut: s = wb.Put(h(e.cf), e.key, e.value); break;
        case Batch::Op::kDelete: s = wb.Delete(h(e.cf), e.key); break;
        case Batch::Op::kDeleteRange: s = wb.DeleteRange(h(e.cf), e.key, e.value); break;
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
    rocksdb::ReadOptions ro;
    if (snap) ro.snapshot = static_cast<const RocksSnapshot*>(snap)->get();
    rocksdb::Slice upper(end.data(), end.size());
    if (!end.empty()) ro.iterate_upper_bound = &upper;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, h(cf)));
    for (it->Seek(rocksdb::Slice(begin.data(), begin.size())); it->Valid(); it->Next()) {
      auto k = it->key(), v = it->value();
      if (!fn(std::string_view(k.data(), k.size()), std::string_view(v.data(), v.size()))) break;
    }
    return FromRocks(it->status(), "scan");
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
      if (f.column_family_name == CfName(cf)) st.sst_file_bytes += f.size;
    return st;
  }

 private:
  RocksKv() = default;
  rocksdb::ColumnFamilyHandle* h(Cf cf) { return handles_[static_cast<int>(cf)]; }
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

}  // namespace

Result<std::unique_ptr<Kv>> OpenRocksKv(const std::string& path, const RocksOptions& opts) {
  return RocksKv::Open(path, opts);
}

}  // namespace layerfs::kv
