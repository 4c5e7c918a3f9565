// SyscallLog: runs syscalls under one root directory and writes down what they returned, so the
// same sequence on a LayerFS mount and on a host directory can be compared line by line.
// Recorded: return values, errno names, contents, and attributes (type, permission bits, size,
// nlink, uid, gid, rdev); never inode numbers, and times only where a case sets them.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace layerfs::itest {

inline std::string ErrName(int e) {
  const char* n = strerrorname_np(e);
  return n ? n : fmt::format("errno{}", e);
}

// Short contents verbatim (escaped), longer ones as length and FNV-1a digest.
inline std::string Digest(std::string_view data) {
  if (data.size() <= 48) {
    std::string out = "\"";
    for (unsigned char c : data) {
      if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') out.push_back(static_cast<char>(c));
      else out += fmt::format("\\x{:02x}", c);
    }
    return out + "\"";
  }
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : data) h = (h ^ c) * 0x100000001b3ull;
  return fmt::format("len={} fnv={:016x}", data.size(), h);
}

inline const char* TypeName(mode_t m) {
  switch (m & S_IFMT) {
    case S_IFREG: return "reg";
    case S_IFDIR: return "dir";
    case S_IFLNK: return "lnk";
    case S_IFIFO: return "fifo";
    case S_IFCHR: return "chr";
    case S_IFBLK: return "blk";
    case S_IFSOCK: return "sock";
    default: return "?";
  }
}

inline std::string Describe(const struct stat& st) {
  // Directory sizes are file-system specific (ext4: blocks of entries), so not compared.
  std::string size = S_ISDIR(st.st_mode) ? "-" : std::to_string(st.st_size);
  std::string s = fmt::format("{} mode={:04o} size={} nlink={} uid={} gid={}", TypeName(st.st_mode),
                              st.st_mode & 07777, size, st.st_nlink, st.st_uid, st.st_gid);
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) s += fmt::format(" rdev={}:{}", major(st.st_rdev), minor(st.st_rdev));
  return s;
}

// Reads a whole file; sets *err to the failing call's errno (0 on success).
inline std::string ReadWholeFile(const std::string& path, int* err) {
  *err = 0;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return *err = errno, std::string();
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      *err = errno;
      break;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

class SyscallLog {
 public:
  explicit SyscallLog(std::string root) : root_(std::move(root)) {}
  ~SyscallLog() { CloseAll(); }
  SyscallLog(const SyscallLog&) = delete;
  SyscallLog& operator=(const SyscallLog&) = delete;

  std::string P(std::string_view rel) const { return rel.empty() ? root_ : root_ + "/" + std::string(rel); }
  const std::string& root() const { return root_; }
  std::vector<std::string> lines;

  // Records `what` and a syscall's result: the value, or the errno name for -1. Pass the result
  // directly (nothing may run between the call and this, to keep errno).
  long R(const char* what, long rc) {
    int e = errno;
    lines.push_back(fmt::format("{} -> {}", what, rc < 0 ? ErrName(e) : std::to_string(rc)));
    errno = e;
    return rc;
  }
  // As R, for calls returning a descriptor: records "fd" (numbers may differ) and keeps it to
  // close at the end.
  int Fd(const char* what, int fd) {
    int e = errno;
    lines.push_back(fmt::format("{} -> {}", what, fd < 0 ? ErrName(e) : "fd"));
    if (fd >= 0) fds_.push_back(fd);
    errno = e;
    return fd;
  }
  void Note(std::string_view what, std::string_view value) { lines.push_back(fmt::format("{} = {}", what, value)); }

  int Open(const char* what, std::string_view rel, int flags, mode_t mode = 0644) {
    std::string p = P(rel);
    return Fd(what, open(p.c_str(), flags | O_CLOEXEC, mode));
  }
  long Write(const char* what, int fd, std::string_view data) { return R(what, write(fd, data.data(), data.size())); }
  long Pwrite(const char* what, int fd, std::string_view data, off_t off) {
    return R(what, pwrite(fd, data.data(), data.size(), off));
  }
  void Pread(const char* what, int fd, size_t n, off_t off) {
    std::string buf(n, '\0');
    ssize_t got = pread(fd, buf.data(), n, off);
    if (got < 0) return (void)R(what, got);
    buf.resize(static_cast<size_t>(got));
    Note(what, fmt::format("{} bytes {}", got, Digest(buf)));
  }
  void Close(int fd) {
    if (fd < 0) return;
    fds_.erase(std::remove(fds_.begin(), fds_.end(), fd), fds_.end());
    R("close", close(fd));
  }
  void CloseAll() {
    for (int fd : fds_) close(fd);
    fds_.clear();
  }

  // Writes a whole file (create/truncate) without logging each step, then logs the result.
  void Put(std::string_view rel, std::string_view data, mode_t mode = 0644) {
    std::string p = P(rel);
    int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    bool ok = fd >= 0 && write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
    int e = errno;
    if (fd >= 0) ok = close(fd) == 0 && ok;
    lines.push_back(fmt::format("put {} -> {}", rel, ok ? "ok" : ErrName(e)));
  }
  std::string Slurp(std::string_view rel, int* err) { return ReadWholeFile(P(rel), err); }
  void Content(std::string_view rel) {
    int err;
    std::string c = Slurp(rel, &err);
    Note(fmt::format("content {}", rel), err ? ErrName(err) : Digest(c));
  }
  void Stat(std::string_view rel) { StatImpl("stat", rel, false); }
  void Lstat(std::string_view rel) { StatImpl("lstat", rel, true); }
  void Fstat(int fd) {
    struct stat st {};
    if (fstat(fd, &st) != 0) return (void)R("fstat", -1);
    Note("fstat", Describe(st));
  }
  // Sorted "name:type" of a directory, including "." and "..".
  void List(std::string_view rel) {
    std::string p = P(rel);
    DIR* d = opendir(p.c_str());
    if (!d) return Note(fmt::format("list {}", rel), ErrName(errno));
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) names.push_back(fmt::format("{}:{}", e->d_name, static_cast<int>(e->d_type)));
    closedir(d);
    std::sort(names.begin(), names.end());
    Note(fmt::format("list {}", rel), fmt::format("{}", fmt::join(names, " ")));
  }

 private:
  void StatImpl(const char* what, std::string_view rel, bool l) {
    std::string p = P(rel);
    struct stat st {};
    int rc = l ? lstat(p.c_str(), &st) : stat(p.c_str(), &st);
    if (rc != 0) return Note(fmt::format("{} {}", what, rel), ErrName(errno));
    Note(fmt::format("{} {}", what, rel), Describe(st));
  }

  std::string root_;
  std::vector<int> fds_;
};

}  // namespace layerfs::itest
