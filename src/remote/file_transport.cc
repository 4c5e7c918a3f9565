// FileTransport: a remote that is a directory (file:///PATH), on a second or shared disk.
//
// Layout (docs/format.md, "File remote"): key "a/b/c" is the regular file PATH/a+/b+/c. Every
// directory made for a key's leading components carries a '+' suffix, a character keys cannot
// hold, so "a" and "a/b" can both be keys (as branch names "x" and "x/y" can both exist), and
// temporary files ("NAME,tmpXXXXXXXX") and ref locks ("NAME,lock") can never be mistaken for
// keys: ',' is not a key character either.
//
// Blobs are written to a temporary file in the key's directory, fsync'ed, renamed over the key
// (or, for PutIfAbsent, renamed with RENAME_NOREPLACE, or linked where that is not supported),
// and the directory is fsync'ed: a reader sees the old blob, the new one or none.
//
// Refs are blobs that also have a lock file holding a version counter. CasRef takes the lock
// (flock, plus an in-process mutex for file systems whose flock is per process, like NFS),
// compares the counter with the caller's token, bumps it (synced) and only then renames the new
// value in. A crash between the two leaves a counter ahead of the value: callers holding the old
// token get ESTALE and read again; nothing moves under a stale token. Put and Delete of a key
// that has a lock bump its counter too, so every change of a ref changes its token.
//
// Every path is resolved from a directory fd of the root with openat(O_NOFOLLOW) one component
// at a time, so neither a key nor a symlink planted in the remote can reach outside the root.
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <random>

#include "remote/backends.h"

namespace layerfs::remote {
namespace {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

constexpr std::string_view kLockSuffix = ",lock";

std::string RandomHex() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:016x}", rng());
}

Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Error(errno, strerror(errno));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// Reads up to `len` bytes at `off` (fewer only at the end of the file).
Status PreadAll(int fd, uint64_t off, uint64_t len, std::string* out) {
  out->resize(len);
  uint64_t got = 0;
  while (got < len) {
    ssize_t n = pread(fd, out->data() + got, len - got, static_cast<off_t>(off + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Error(errno, strerror(errno));
    }
    if (n == 0) break;
    got += static_cast<uint64_t>(n);
  }
  out->resize(got);
  return Status::Ok();
}

class FileTransport : public Transport {
 public:
  FileTransport(RemoteUrl url, Fd root) : url_(std::move(url)), root_(std::move(root)) {}

  Status Put(std::string_view key, std::string_view data) override {
    LFS_TRY(CheckKey(key));
    return Write(key, data, false).Context(Where("put", key));
  }
  Status PutIfAbsent(std::string_view key, std::string_view data) override {
    LFS_TRY(CheckKey(key));
    return Write(key, data, true).Context(Where("put", key));
  }
  Result<std::string> Get(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    auto r = ReadWhole(key);
    if (!r.ok()) return r.status().Context(Where("get", key));
    return r;
  }
  Result<uint64_t> Size(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    auto f = OpenBlob(key);
    if (!f.ok()) return f.status().Context(Where("size", key));
    struct stat st;
    if (fstat(f->get(), &st) != 0) return Status::Error(errno, Where("size", key) + ": " + strerror(errno));
    return static_cast<uint64_t>(st.st_size);
  }
  Status ReadRanges(std::vector<RangeRead>* reads) override {
    Status first;
    for (auto& r : *reads) {
      r.data.clear();
      r.status = CheckKey(r.key);
      if (r.status.ok()) {
        auto f = OpenBlob(r.key);
        struct stat st;
        if (!f.ok()) {
          r.status = f.status();
        } else if (fstat(f->get(), &st) != 0) {
          r.status = Status::Error(errno, strerror(errno));
        } else {
          uint64_t size = static_cast<uint64_t>(st.st_size);
          uint64_t len = r.offset >= size ? 0 : std::min(r.length, size - r.offset);
          r.status = PreadAll(f->get(), r.offset, len, &r.data);
        }
        if (!r.status.ok()) r.status = r.status.Context(Where("read", r.key));
      }
      if (!r.status.ok() && first.ok()) first = r.status;
    }
    return first;
  }
  Result<std::vector<std::string>> List(std::string_view prefix) override {
    LFS_TRY(CheckPrefix(prefix));
    size_t slash = prefix.rfind('/');
    std::string_view dir_part = slash == std::string_view::npos ? std::string_view() : prefix.substr(0, slash);
    std::string_view name_part = slash == std::string_view::npos ? prefix : prefix.substr(slash + 1);
    std::vector<std::string> keys;
    auto dir = OpenDir(dir_part, false);
    if (!dir.ok()) {
      if (dir.status().code() == ENOENT) return keys;
      return dir.status().Context(Where("list", prefix));
    }
    std::string base = dir_part.empty() ? std::string() : std::string(dir_part) + "/";
    LFS_TRY(Walk(std::move(*dir), base, name_part, &keys).Context(Where("list", prefix)));
    std::sort(keys.begin(), keys.end());
    return keys;
  }
  Status Delete(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    auto dir = OpenDir(Parent(key), false);
    if (!dir.ok()) return dir.status().code() == ENOENT ? Status::Ok() : dir.status().Context(Where("delete", key));
    auto unlink = [&]() -> Status {
      if (unlinkat(dir->get(), std::string(Base(key)).c_str(), 0) != 0 && errno != ENOENT)
        return Status::Error(errno, strerror(errno));
      if (fsync(dir->get()) != 0) return Status::Error(errno, strerror(errno));
      return Status::Ok();
    };
    Status s = HasLock(dir->get(), key) ? WithRefLock(dir->get(), key, [&](uint64_t) { return unlink(); })
                                        : unlink();
    return s.Context(Where("delete", key));
  }

  Result<std::optional<RefValue>> GetRef(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    auto dir = OpenDir(Parent(key), false);
    if (!dir.ok()) {
      if (dir.status().code() == ENOENT) return std::optional<RefValue>();
      return dir.status().Context(Where("get ref", key));
    }
    std::lock_guard g(Stripe(key));
    std::string lock_name = std::string(Base(key)) + std::string(kLockSuffix);
    Fd lock(openat(dir->get(), lock_name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    uint64_t counter = 0;  // a ref written by Put alone has no lock yet: version 0
    if (lock.valid()) {
      if (flock(lock.get(), LOCK_SH) != 0) return Status::Error(errno, Where("get ref", key) + ": lock: " + strerror(errno));
      auto c = ReadCounter(lock.get());
      if (!c.ok()) return c.status().Context(Where("get ref", key));
      counter = *c;
    } else if (errno != ENOENT) {
      return Status::Error(errno, Where("get ref", key) + ": lock: " + strerror(errno));
    }
    auto v = ReadWhole(key);  // still under the shared lock, so value and counter agree
    if (!v.ok()) {
      if (v.status().code() == ENOENT) return std::optional<RefValue>();
      return v.status().Context(Where("get ref", key));
    }
    return std::optional<RefValue>(RefValue{std::move(*v), std::to_string(counter)});
  }

  Result<std::string> CasRef(std::string_view key, std::string_view value,
                             const std::optional<std::string>& expected) override {
    LFS_TRY(CheckKey(key));
    auto dir = OpenDir(Parent(key), true);
    if (!dir.ok()) return dir.status().Context(Where("set ref", key));
    std::string token;
    Status s = WithRefLock(dir->get(), key, [&](uint64_t counter) -> Status {
      struct stat st;
      bool present = fstatat(dir->get(), std::string(Base(key)).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
      if (!present && errno != ENOENT) return Status::Error(errno, strerror(errno));
      if (expected ? (!present || *expected != std::to_string(counter)) : present)
        return Status::Error(ESTALE, "ref moved since it was read (stale token)");
      token = std::to_string(counter + 1);
      return Status::Ok();
    }, [&]() { return WriteIn(dir->get(), key, value, false); });
    if (!s.ok()) return s.Context(Where("set ref", key));
    return token;
  }

  const std::string& url() const override { return url_.text; }

 private:
  std::string Where(std::string_view op, std::string_view key) const {
    return fmt::format("remote {}: {} '{}'", url_.text, op, key);
  }
  static std::string_view Parent(std::string_view key) {
    size_t s = key.rfind('/');
    return s == std::string_view::npos ? std::string_view() : key.substr(0, s);
  }
  static std::string_view Base(std::string_view key) {
    size_t s = key.rfind('/');
    return s == std::string_view::npos ? key : key.substr(s + 1);
  }
  std::mutex& Stripe(std::string_view key) { return stripes_[std::hash<std::string_view>()(key) % stripes_.size()]; }

  // Opens the directory holding keys under `dir` ("" is the root), one component at a time
  // without following symlinks; creates missing ones when `create`.
  Result<Fd> OpenDir(std::string_view dir, bool create) {
    // A fresh open of ".", not a dup: a dup would share its directory offset with root_.
    Fd cur(openat(root_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!cur.valid()) return Status::Error(errno, strerror(errno));
    while (!dir.empty()) {
      size_t s = dir.find('/');
      std::string name = std::string(dir.substr(0, s)) + "+";
      dir = s == std::string_view::npos ? std::string_view() : dir.substr(s + 1);
      int fd = openat(cur.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0 && errno == ENOENT && create) {
        if (mkdirat(cur.get(), name.c_str(), 0777) != 0 && errno != EEXIST) return Status::Error(errno, strerror(errno));
        if (fsync(cur.get()) != 0) return Status::Error(errno, strerror(errno));
        fd = openat(cur.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      }
      if (fd < 0) {
        if (errno == ELOOP || errno == ENOTDIR) return Status::Error(EIO, fmt::format("'{}' in the remote is not a directory", name));
        return Status::Error(errno, strerror(errno));
      }
      cur = Fd(fd);
    }
    return cur;
  }

  Result<Fd> OpenBlob(std::string_view key) {
    LFS_ASSIGN(Fd dir, OpenDir(Parent(key), false));
    int fd = openat(dir.get(), std::string(Base(key)).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ELOOP) return Status::Error(EIO, "not a regular file in the remote");
      return Status::Error(errno, strerror(errno));
    }
    Fd f(fd);
    struct stat st;
    if (fstat(f.get(), &st) != 0) return Status::Error(errno, strerror(errno));
    if (!S_ISREG(st.st_mode)) return Status::Error(EIO, "not a regular file in the remote");
    return f;
  }

  Result<std::string> ReadWhole(std::string_view key) {
    LFS_ASSIGN(Fd f, OpenBlob(key));
    struct stat st;
    if (fstat(f.get(), &st) != 0) return Status::Error(errno, strerror(errno));
    std::string out;
    LFS_TRY(PreadAll(f.get(), 0, static_cast<uint64_t>(st.st_size), &out));
    return out;
  }

  static bool HasLock(int dir, std::string_view key) {
    std::string name = std::string(Base(key)) + std::string(kLockSuffix);
    return faccessat(dir, name.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0;
  }

  static Result<uint64_t> ReadCounter(int lock) {
    std::string text;
    LFS_TRY(PreadAll(lock, 0, 64, &text));
    while (!text.empty() && text.back() == '\n') text.pop_back();
    if (text.empty()) return uint64_t{0};
    char* end = nullptr;
    uint64_t v = strtoull(text.c_str(), &end, 10);
    if (*end != '\0') return Status::Error(EIO, "damaged ref lock (counter unreadable)");
    return v;
  }

  // Under the key's exclusive lock: `check(counter)` decides, then the counter is bumped
  // (synced) and `apply()` runs. The one-function form is for Put and Delete.
  Status WithRefLock(int dir, std::string_view key, const std::function<Status(uint64_t)>& check,
                     const std::function<Status()>& apply) {
    std::lock_guard g(Stripe(key));
    std::string name = std::string(Base(key)) + std::string(kLockSuffix);
    Fd lock(openat(dir, name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!lock.valid()) return Status::Error(errno, fmt::format("lock: {}", strerror(errno)));
    while (flock(lock.get(), LOCK_EX) != 0)
      if (errno != EINTR) return Status::Error(errno, fmt::format("lock: {}", strerror(errno)));
    LFS_ASSIGN(uint64_t counter, ReadCounter(lock.get()));
    LFS_TRY(check(counter));
    std::string text = std::to_string(counter + 1) + "\n";
    if (pwrite(lock.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
        ftruncate(lock.get(), static_cast<off_t>(text.size())) != 0 || fdatasync(lock.get()) != 0)
      return Status::Error(errno ? errno : EIO, fmt::format("lock: {}", strerror(errno)));
    return apply();
  }
  Status WithRefLock(int dir, std::string_view key, const std::function<Status(uint64_t)>& apply) {
    return WithRefLock(dir, key, [](uint64_t) { return Status::Ok(); }, [&]() { return apply(0); });
  }

  Status Write(std::string_view key, std::string_view data, bool exclusive) {
    LFS_ASSIGN(Fd dir, OpenDir(Parent(key), true));
    if (HasLock(dir.get(), key)) {
      return WithRefLock(dir.get(), key, [&](uint64_t) { return WriteIn(dir.get(), key, data, exclusive); });
    }
    return WriteIn(dir.get(), key, data, exclusive);
  }

  // Temporary file, fsync, rename into place (exclusively: RENAME_NOREPLACE or link), fsync of
  // the directory.
  Status WriteIn(int dir, std::string_view key, std::string_view data, bool exclusive) {
    std::string name(Base(key)), tmp;
    Fd f;
    for (int i = 0; i < 16 && !f.valid(); i++) {
      tmp = name + ",tmp" + RandomHex();
      f = Fd(openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
      if (!f.valid() && errno != EEXIST) return Status::Error(errno, strerror(errno));
    }
    if (!f.valid()) return Status::Error(EEXIST, "no free temporary name");
    Status s = WriteAll(f.get(), data);
    if (s.ok() && fsync(f.get()) != 0) s = Status::Error(errno, strerror(errno));
    f.Reset();
    if (s.ok()) {
      if (!exclusive) {
        if (renameat(dir, tmp.c_str(), dir, name.c_str()) != 0) s = Status::Error(errno, strerror(errno));
      } else if (renameat2(dir, tmp.c_str(), dir, name.c_str(), RENAME_NOREPLACE) != 0) {
        if (errno == EINVAL || errno == ENOSYS) {  // no RENAME_NOREPLACE here: link refuses too
          if (linkat(dir, tmp.c_str(), dir, name.c_str(), 0) != 0) s = Status::Error(errno, strerror(errno));
        } else {
          s = Status::Error(errno, strerror(errno));
        }
      }
      if (s.code() == EEXIST) s = Status::Exists("already exists");
    }
    unlinkat(dir, tmp.c_str(), 0);  // gone already after a rename
    if (s.ok() && fsync(dir) != 0) s = Status::Error(errno, strerror(errno));
    return s;
  }

  // Collects keys under the open directory `dir` (whose keys start with `base`) whose next
  // component starts with `name_prefix`.
  Status Walk(Fd dir, const std::string& base, std::string_view name_prefix, std::vector<std::string>* out) {
    DIR* d = fdopendir(dir.get());
    if (!d) return Status::Error(errno, strerror(errno));
    int dfd = dir.Release();  // closedir closes it
    std::vector<std::pair<std::string, bool>> entries;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == ".." || !n.starts_with(name_prefix)) continue;
      if (n.find(',') != std::string::npos) continue;  // temporary files, locks
      bool is_dir = n.size() > 1 && n.back() == '+';
      if (is_dir) n.pop_back();
      if (n.find('+') != std::string::npos) continue;
      entries.emplace_back(std::move(n), is_dir);
    }
    for (auto& [n, is_dir] : entries) {
      if (!is_dir) {
        struct stat st;
        if (fstatat(dfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && CheckKey(base + n).ok())
          out->push_back(base + n);
        continue;
      }
      int sub = openat(dfd, (n + "+").c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) {
        if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue;
        Status s = Status::Error(errno, strerror(errno));
        closedir(d);
        return s;
      }
      Status s = Walk(Fd(sub), base + n + "/", "", out);
      if (!s.ok()) {
        closedir(d);
        return s;
      }
    }
    closedir(d);
    return Status::Ok();
  }

  RemoteUrl url_;
  Fd root_;
  std::array<std::mutex, 64> stripes_;
};

}  // namespace

Result<std::unique_ptr<Transport>> OpenFileTransport(const RemoteUrl& url, bool existing) {
  int fd = open(url.location.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && !existing) {
    std::error_code ec;
    std::filesystem::create_directories(url.location, ec);
    if (ec) return Status::Errorf(ec.value(), "remote {}: cannot create {}: {}", url.text, url.location, ec.message());
    fd = open(url.location.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  if (fd < 0) return Status::Errorf(errno, "remote {}: {}: {}", url.text, url.location, strerror(errno));
  return std::unique_ptr<Transport>(new FileTransport(url, Fd(fd)));
}

}  // namespace layerfs::remote
