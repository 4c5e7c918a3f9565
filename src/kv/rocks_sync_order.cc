#include "kv/rocks_sync_order.h"

namespace layerfs::kv {
namespace {

class OrderedFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  OrderedFile(std::unique_ptr<rocksdb::FSWritableFile> f, const std::function<Status()>* before)
      : FSWritableFileOwnerWrapper(std::move(f)), before_(before) {}
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
    if (auto s = Before(); !s.ok()) return s;
    return target()->Sync(o, g);
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
    if (auto s = Before(); !s.ok()) return s;
    return target()->Fsync(o, g);
  }

 private:
  rocksdb::IOStatus Before() {
    Status s = (*before_)();
    if (s.ok()) return rocksdb::IOStatus::OK();
    return s.code() == ENOSPC ? rocksdb::IOStatus::NoSpace(s.ToString()) : rocksdb::IOStatus::IOError(s.ToString());
  }
  const std::function<Status()>* before_;  // owned by the file system, which outlives its files
};

class OrderedFs : public rocksdb::FileSystemWrapper {
 public:
  OrderedFs(std::shared_ptr<rocksdb::FileSystem> base, std::function<Status()> before)
      : FileSystemWrapper(std::move(base)), before_(std::move(before)) {}
  const char* Name() const override { return "LayerfsSyncOrderedFs"; }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r, rocksdb::IODebugContext* g) override {
    auto s = target()->NewWritableFile(f, o, r, g);
    if (s.ok()) *r = std::make_unique<OrderedFile>(std::move(*r), &before_);
    return s;
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* g) override {
    auto s = target()->ReopenWritableFile(f, o, r, g);
    if (s.ok()) *r = std::make_unique<OrderedFile>(std::move(*r), &before_);
    return s;
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old, const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* g) override {
    auto s = target()->ReuseWritableFile(f, old, o, r, g);
    if (s.ok()) *r = std::make_unique<OrderedFile>(std::move(*r), &before_);
    return s;
  }

 private:
  const std::function<Status()> before_;
};

}  // namespace

std::shared_ptr<rocksdb::FileSystem> SyncOrderedFileSystem(std::shared_ptr<rocksdb::FileSystem> base,
                                                           std::function<Status()> before_sync) {
  return std::make_shared<OrderedFs>(std::move(base), std::move(before_sync));
}

}  // namespace layerfs::kv
