// FileIo: the file system calls a Store makes on its own files, through one interface, so a test
// can stand a layer under all of them (kv/power_loss.h records what was made durable and drops
// the rest, as a power cut does).
//
// Two users: the data log (kv/data_log.h) makes its segment calls through the POSIX-shaped
// methods below; RocksDB's files go through the rocksdb::FileSystem that RocksFileSystem()
// returns, stacked by OpenRocksKv under its own wrappers. Reads are not routed: the bytes a
// layer lets through are in the real files, and a layer only decides what a crash keeps of them.
// The default (Posix()) is the plain system calls and RocksDB's default file system.
//
// The methods return what the system calls return (-1 with errno set on failure). Thread-safe:
// implementations are called from any thread, the data log's and RocksDB's background threads
// included.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>

namespace rocksdb {
class FileSystem;
}

namespace layerfs::kv {

class FileIo {
 public:
  virtual ~FileIo() = default;

  virtual int Open(const std::string& path, int flags, mode_t mode);
  virtual int Close(int fd);
  virtual ssize_t Pwrite(int fd, const void* buf, size_t n, off_t off);
  // Makes the file's bytes durable (fdatasync).
  virtual int Fdatasync(int fd);
  // Makes the names created, renamed and removed in directory `dir` durable (fsync of the
  // directory).
  virtual int SyncDir(const std::string& dir);
  virtual int Mkdir(const std::string& path, mode_t mode);
  virtual int Rmdir(const std::string& path);
  virtual int Unlink(const std::string& path);

  // The file system RocksDB runs on, given RocksDB's default one.
  virtual std::shared_ptr<rocksdb::FileSystem> RocksFileSystem(std::shared_ptr<rocksdb::FileSystem> base) {
    return base;
  }

  // The plain system calls (shared, stateless).
  static std::shared_ptr<FileIo> Posix();
};

}  // namespace layerfs::kv
