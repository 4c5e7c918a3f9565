#include "kv/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace layerfs::kv {

int FileIo::Open(const std::string& path, int flags, mode_t mode) { return ::open(path.c_str(), flags, mode); }
int FileIo::Close(int fd) { return ::close(fd); }
ssize_t FileIo::Pwrite(int fd, const void* buf, size_t n, off_t off) { return ::pwrite(fd, buf, n, off); }
int FileIo::Fdatasync(int fd) { return ::fdatasync(fd); }

int FileIo::SyncDir(const std::string& dir) {
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return -1;
  int r = ::fsync(dfd);
  int e = errno;
  ::close(dfd);
  errno = e;
  return r;
}

int FileIo::Mkdir(const std::string& path, mode_t mode) { return ::mkdir(path.c_str(), mode); }
int FileIo::Rmdir(const std::string& path) { return ::rmdir(path.c_str()); }
int FileIo::Unlink(const std::string& path) { return ::unlink(path.c_str()); }

std::shared_ptr<FileIo> FileIo::Posix() {
  static const auto io = std::make_shared<FileIo>();
  return io;
}

}  // namespace layerfs::kv
