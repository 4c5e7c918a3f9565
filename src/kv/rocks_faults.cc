// The fault-injecting file system under a RocksKv in tests (kv/file_faults.h): RocksDB's own
// FileSystem (or the file system given, kv.h: RocksOptions::io) with a wrapper on every
// writable file that spends the armed space budget.
#include <rocksdb/env.h>

#include "kv/rocks_internal.h"

namespace layerfs::kv::rocks {

namespace {

bool EndsWith(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

class FaultFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultFile(std::unique_ptr<rocksdb::FSWritableFile> f, std::shared_ptr<FileFaults> faults, const std::string& name)
      : FSWritableFileOwnerWrapper(std::move(f)), faults_(std::move(faults)) {
    kind_ = EndsWith(name, ".log") ? FileFaults::kWal : EndsWith(name, ".sst") ? FileFaults::kTables : -1;
  }

  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                           rocksdb::IODebugContext* dbg) override {
    size_t fits = data.size();
    if (!Spend(data.size(), &fits)) {
      if (fits > 0) (void)target()->Append(rocksdb::Slice(data.data(), fits), o, dbg);
      return rocksdb::IOStatus::NoSpace("injected: no space left on device");
    }
    return target()->Append(data, o, dbg);
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                           const rocksdb::DataVerificationInfo& info, rocksdb::IODebugContext* dbg) override {
    size_t fits = data.size();
    if (!Spend(data.size(), &fits)) {
      if (fits > 0) (void)target()->Append(rocksdb::Slice(data.data(), fits), o, dbg);
      return rocksdb::IOStatus::NoSpace("injected: no space left on device");
    }
    return target()->Append(data, o, info, dbg);
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override {
    if (faults_->fail_syncs) {
      faults_->syncs_failed++;
      return rocksdb::IOStatus::IOError("injected: sync failed");
    }
    return target()->Sync(o, dbg);
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* dbg) override {
    if (faults_->fail_syncs) {
      faults_->syncs_failed++;
      return rocksdb::IOStatus::IOError("injected: sync failed");
    }
    return target()->Fsync(o, dbg);
  }

 private:
  // Takes n bytes of the budget; false (with what still fits) if they do not fit.
  bool Spend(size_t n, size_t* fits) {
    int which = faults_->files.load();
    if (which != FileFaults::kAll && which != kind_) return true;
    int64_t left = faults_->space.load();
    while (left >= 0) {
      if (static_cast<int64_t>(n) > left) {
        *fits = static_cast<size_t>(left);
        faults_->space = 0;
        faults_->appends_failed++;
        return false;
      }
      if (faults_->space.compare_exchange_weak(left, left - static_cast<int64_t>(n))) return true;
    }
    return true;
  }

  std::shared_ptr<FileFaults> faults_;
  int kind_;
};

class FaultFs : public rocksdb::FileSystemWrapper {
 public:
  FaultFs(std::shared_ptr<rocksdb::FileSystem> base, std::shared_ptr<FileFaults> faults)
      : FileSystemWrapper(std::move(base)), faults_(std::move(faults)) {}
  const char* Name() const override { return "LayerFSFaultFs"; }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r, rocksdb::IODebugContext* dbg) override {
    auto s = target()->NewWritableFile(f, o, r, dbg);
    if (s.ok()) *r = std::make_unique<FaultFile>(std::move(*r), faults_, f);
    return s;
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* dbg) override {
    auto s = target()->ReopenWritableFile(f, o, r, dbg);
    if (s.ok()) *r = std::make_unique<FaultFile>(std::move(*r), faults_, f);
    return s;
  }

 private:
  std::shared_ptr<FileFaults> faults_;
};

}  // namespace

std::shared_ptr<rocksdb::FileSystem> FaultFileSystem(std::shared_ptr<rocksdb::FileSystem> base,
                                                     std::shared_ptr<FileFaults> faults) {
  return std::make_shared<FaultFs>(std::move(base), std::move(faults));
}

}  // namespace layerfs::kv::rocks
