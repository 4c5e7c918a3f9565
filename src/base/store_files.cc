#include "base/store_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace layerfs::base {

mode_t StoreFileMode(const std::string& store_dir) {
  struct stat st;
  mode_t mode = 0600;
  if (stat(store_dir.c_str(), &st) == 0) {
    if (st.st_mode & S_IXGRP) mode |= 0040;
    if (st.st_mode & S_IXOTH) mode |= 0004;
  }
  return mode;
}

namespace {
Status Errno(std::string_view what, const std::string& path) {
  int e = errno;
  return Status::Errorf(e, "{} {}: {}", what, path, strerror(e));
}

// Removes `path` unless it is a regular file.
Status ClearNonRegular(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return errno == ENOENT ? Status::Ok() : Errno("stat", path);
  if (S_ISREG(st.st_mode)) return Status::Ok();
  if (S_ISDIR(st.st_mode)) return Status::Errorf(EISDIR, "{} is a directory", path);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("remove", path);
  return Status::Ok();
}
}  // namespace

Status WriteStoreFile(const std::string& path, std::string_view content, mode_t mode) {
  LFS_TRY(ClearNonRegular(path));
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return Errno("write", path);
  while (!content.empty()) {
    ssize_t n = write(fd, content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = Errno("write", path);
      close(fd);
      return s;
    }
    content.remove_prefix(static_cast<size_t>(n));
  }
  close(fd);
  return Status::Ok();
}

Status PrepareStoreFile(const std::string& path, mode_t mode) {
  LFS_TRY(ClearNonRegular(path));
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return Errno("open", path);
  close(fd);
  return Status::Ok();
}

Status RefuseSymlink(const std::string& path, std::string_view what) {
  struct stat st;
  if (lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    return Status::Errorf(ELOOP, "{} is a symlink: a Store keeps its {} inside its own directory", path, what);
  return Status::Ok();
}

}  // namespace layerfs::base
