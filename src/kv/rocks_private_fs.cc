#include "kv/rocks_private_fs.h"

#include <sys/stat.h>

namespace layerfs::kv {
namespace {

class PrivateFs : public rocksdb::FileSystemWrapper {
 public:
  PrivateFs(std::shared_ptr<rocksdb::FileSystem> base, mode_t mode)
      : FileSystemWrapper(std::move(base)), file_mode_(mode), dir_mode_(mode | ((mode & 0444) >> 2)) {}
  const char* Name() const override { return "LayerfsPrivateFs"; }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r, rocksdb::IODebugContext* d) override {
    return Set(f, target()->NewWritableFile(f, o, r, d));
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* d) override {
    return Set(f, target()->ReopenWritableFile(f, o, r, d));
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old, const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* d) override {
    return Set(f, target()->ReuseWritableFile(f, old, o, r, d));
  }
  rocksdb::IOStatus NewRandomRWFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>* r, rocksdb::IODebugContext* d) override {
    return Set(f, target()->NewRandomRWFile(f, o, r, d));
  }
  rocksdb::IOStatus LockFile(const std::string& f, const rocksdb::IOOptions& o, rocksdb::FileLock** l,
                             rocksdb::IODebugContext* d) override {
    return Set(f, target()->LockFile(f, o, l, d));
  }
  rocksdb::IOStatus CreateDir(const std::string& dir, const rocksdb::IOOptions& o, rocksdb::IODebugContext* d) override {
    rocksdb::IOStatus s = target()->CreateDir(dir, o, d);
    if (s.ok()) chmod(dir.c_str(), dir_mode_);
    return s;
  }
  rocksdb::IOStatus CreateDirIfMissing(const std::string& dir, const rocksdb::IOOptions& o,
                                       rocksdb::IODebugContext* d) override {
    struct stat st;
    const bool existed = stat(dir.c_str(), &st) == 0;
    rocksdb::IOStatus s = target()->CreateDirIfMissing(dir, o, d);
    if (s.ok() && !existed) chmod(dir.c_str(), dir_mode_);
    return s;
  }

 private:
  rocksdb::IOStatus Set(const std::string& f, rocksdb::IOStatus s) {
    if (s.ok()) chmod(f.c_str(), file_mode_);
    return s;
  }
  const mode_t file_mode_, dir_mode_;
};

}  // namespace

std::shared_ptr<rocksdb::FileSystem> PrivateFileSystem(std::shared_ptr<rocksdb::FileSystem> base, mode_t file_mode) {
  return std::make_shared<PrivateFs>(std::move(base), file_mode);
}

}  // namespace layerfs::kv
