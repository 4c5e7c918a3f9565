#include "kv/power_loss.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include <fmt/format.h>
#include <rocksdb/file_system.h>

namespace layerfs::kv {

struct PowerLoss::Node {
  uint64_t id = 0;
  bool dir = false;
  uint64_t size = 0, synced = 0;
  std::string shadow;  // files: a hard link outside root
};

// One change of names: each step sets `path` to `node` (null: removes it).
struct PowerLoss::NsOp {
  std::vector<std::pair<std::string, std::shared_ptr<Node>>> steps;
  std::string dir;  // whose fsync makes it durable
  bool durable = false;
  bool after_cut = false;  // done after the power went off: never on the disk
};

namespace {

namespace fs = std::filesystem;

std::string Parent(const std::string& p) {
  auto slash = p.rfind('/');
  return slash == std::string::npos || slash == 0 ? std::string("/") : p.substr(0, slash);
}

bool Exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

// ---- RocksDB's files ----

class PlFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  PlFile(std::unique_ptr<rocksdb::FSWritableFile> f, std::shared_ptr<PowerLoss> pl,
         std::shared_ptr<PowerLoss::Node> node, uint64_t pos)
      : FSWritableFileOwnerWrapper(std::move(f)), pl_(std::move(pl)), node_(std::move(node)), pos_(pos) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& d, const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
    pl_->Step();
    auto s = target()->Append(d, o, g);
    if (s.ok()) Advance(d.size());
    return s;
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& d, const rocksdb::IOOptions& o,
                           const rocksdb::DataVerificationInfo& v, rocksdb::IODebugContext* g) override {
    pl_->Step();
    auto s = target()->Append(d, o, v, g);
    if (s.ok()) Advance(d.size());
    return s;
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& d, uint64_t off, const rocksdb::IOOptions& o,
                                     rocksdb::IODebugContext* g) override {
    pl_->Step();
    auto s = target()->PositionedAppend(d, off, o, g);
    if (s.ok()) pl_->Appended(node_.get(), off + d.size());
    return s;
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& d, uint64_t off, const rocksdb::IOOptions& o,
                                     const rocksdb::DataVerificationInfo& v, rocksdb::IODebugContext* g) override {
    pl_->Step();
    auto s = target()->PositionedAppend(d, off, o, v, g);
    if (s.ok()) pl_->Appended(node_.get(), off + d.size());
    return s;
  }
  rocksdb::IOStatus Truncate(uint64_t size, const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
    pl_->Step();
    auto s = target()->Truncate(size, o, g);
    if (s.ok()) pl_->Truncated(node_.get(), size);
    return s;
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
    pl_->Step();
    auto s = target()->Sync(o, g);
    if (s.ok()) pl_->Synced(node_.get());
    return s;
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
    pl_->Step();
    auto s = target()->Fsync(o, g);
    if (s.ok()) pl_->Synced(node_.get());
    return s;
  }
  // A hint to start writeback: not durable.
  rocksdb::IOStatus RangeSync(uint64_t off, uint64_t n, const rocksdb::IOOptions& o,
                              rocksdb::IODebugContext* g) override {
    return target()->RangeSync(off, n, o, g);
  }
  rocksdb::IOStatus Flush(const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
    return target()->Flush(o, g);
  }

 private:
  void Advance(uint64_t n) {
    std::lock_guard l(mu_);
    pos_ += n;
    pl_->Appended(node_.get(), pos_);
  }
  std::shared_ptr<PowerLoss> pl_;
  std::shared_ptr<PowerLoss::Node> node_;
  std::mutex mu_;
  uint64_t pos_;
};

class PlDir : public rocksdb::FSDirectoryWrapper {
 public:
  PlDir(std::unique_ptr<rocksdb::FSDirectory> d, std::shared_ptr<PowerLoss> pl, std::string name)
      : FSDirectoryWrapper(std::move(d)), pl_(std::move(pl)), name_(std::move(name)) {}
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
    pl_->Step();
    auto s = FSDirectoryWrapper::Fsync(o, g);
    if (s.ok()) pl_->DirSynced(name_);
    return s;
  }
  rocksdb::IOStatus FsyncWithDirOptions(const rocksdb::IOOptions& o, rocksdb::IODebugContext* g,
                                        const rocksdb::DirFsyncOptions& d) override {
    pl_->Step();
    auto s = FSDirectoryWrapper::FsyncWithDirOptions(o, g, d);
    if (s.ok()) pl_->DirSynced(name_);
    return s;
  }

 private:
  std::shared_ptr<PowerLoss> pl_;
  std::string name_;
};

class PlFs : public rocksdb::FileSystemWrapper {
 public:
  PlFs(std::shared_ptr<rocksdb::FileSystem> base, std::shared_ptr<PowerLoss> pl)
      : FileSystemWrapper(std::move(base)), pl_(std::move(pl)) {}
  const char* Name() const override { return "LayerfsPowerLossFs"; }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r, rocksdb::IODebugContext* g) override {
    pl_->Step();
    // A file written over is a new file in the model (its old bytes come back if the creation
    // is not made durable): remove the old name first.
    if (Exists(f)) {
      auto s = target()->DeleteFile(f, rocksdb::IOOptions(), g);
      if (!s.ok()) return s;
      pl_->Removed(f);
    }
    auto s = target()->NewWritableFile(f, o, r, g);
    if (s.ok()) *r = std::make_unique<PlFile>(std::move(*r), pl_, pl_->Created(f), 0);
    return s;
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* g) override {
    pl_->Step();
    const bool existed = Exists(f);
    auto s = target()->ReopenWritableFile(f, o, r, g);
    if (!s.ok()) return s;
    struct stat st{};
    (void)::stat(f.c_str(), &st);
    auto node = existed ? pl_->Existing(f) : pl_->Created(f);
    *r = std::make_unique<PlFile>(std::move(*r), pl_, node, static_cast<uint64_t>(st.st_size));
    return s;
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string&, const std::string&, const rocksdb::FileOptions&,
                                      std::unique_ptr<rocksdb::FSWritableFile>*, rocksdb::IODebugContext*) override {
    return rocksdb::IOStatus::NotSupported("power-loss layer: recycled logs are not modelled");
  }
  rocksdb::IOStatus NewRandomRWFile(const std::string&, const rocksdb::FileOptions&,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>*, rocksdb::IODebugContext*) override {
    // Writes in place cannot be undone by a size; RocksDB does not use these files here.
    return rocksdb::IOStatus::NotSupported("power-loss layer: random-write files are not modelled");
  }
  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& o,
                                 std::unique_ptr<rocksdb::FSDirectory>* r, rocksdb::IODebugContext* g) override {
    auto s = target()->NewDirectory(name, o, r, g);
    if (s.ok()) *r = std::make_unique<PlDir>(std::move(*r), pl_, name);
    return s;
  }
  rocksdb::IOStatus DeleteFile(const std::string& f, const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
    pl_->Step();
    auto s = target()->DeleteFile(f, o, g);
    if (s.ok()) pl_->Removed(f);
    return s;
  }
  rocksdb::IOStatus Truncate(const std::string& f, size_t size, const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* g) override {
    pl_->Step();
    auto s = target()->Truncate(f, size, o, g);
    if (s.ok()) pl_->Truncated(pl_->Existing(f).get(), size);
    return s;
  }
  rocksdb::IOStatus CreateDir(const std::string& d, const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
    pl_->Step();
    auto s = target()->CreateDir(d, o, g);
    if (s.ok()) pl_->DirCreated(d);
    return s;
  }
  rocksdb::IOStatus CreateDirIfMissing(const std::string& d, const rocksdb::IOOptions& o,
                                       rocksdb::IODebugContext* g) override {
    if (Exists(d)) return target()->CreateDirIfMissing(d, o, g);
    pl_->Step();
    auto s = target()->CreateDirIfMissing(d, o, g);
    if (s.ok()) pl_->DirCreated(d);
    return s;
  }
  rocksdb::IOStatus DeleteDir(const std::string& d, const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
    pl_->Step();
    auto s = target()->DeleteDir(d, o, g);
    if (s.ok()) pl_->Removed(d);
    return s;
  }
  rocksdb::IOStatus RenameFile(const std::string& from, const std::string& to, const rocksdb::IOOptions& o,
                               rocksdb::IODebugContext* g) override {
    pl_->Step();
    auto s = target()->RenameFile(from, to, o, g);
    if (s.ok()) pl_->Renamed(from, to);
    return s;
  }
  rocksdb::IOStatus LinkFile(const std::string& from, const std::string& to, const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* g) override {
    pl_->Step();
    auto s = target()->LinkFile(from, to, o, g);
    if (s.ok()) pl_->Linked(from, to);
    return s;
  }
  rocksdb::IOStatus LockFile(const std::string& f, const rocksdb::IOOptions& o, rocksdb::FileLock** l,
                             rocksdb::IODebugContext* g) override {
    const bool existed = Exists(f);
    if (!existed) pl_->Step();
    auto s = target()->LockFile(f, o, l, g);
    if (s.ok() && !existed) pl_->Created(f);
    return s;
  }

 private:
  std::shared_ptr<PowerLoss> pl_;
};

}  // namespace

// ---- Recording ----

static bool Trace2() {
  static const bool on = getenv("LAYERFS_POWER_LOSS_TRACE") && std::string(getenv("LAYERFS_POWER_LOSS_TRACE")) == "2";
  return on;
}

std::string PowerLoss::Normal(const std::string& path) {
  std::string p = fs::path(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

Result<std::shared_ptr<PowerLoss>> PowerLoss::Start(const std::string& root, const std::string& shadow) {
  auto pl = std::shared_ptr<PowerLoss>(new PowerLoss());
  pl->root_ = Normal(fs::absolute(root).string());
  pl->shadow_ = Normal(fs::absolute(shadow).string());
  std::error_code ec;
  std::vector<std::string> paths;
  for (auto it = fs::recursive_directory_iterator(pl->root_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    paths.push_back(Normal(it->path().string()));
  if (ec) return Status::Errorf(EIO, "power loss: walk {}: {}", pl->root_, ec.message());
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) continue;
    std::shared_ptr<Node> n;
    if (S_ISDIR(st.st_mode)) {
      n = pl->NewNode(true, 0, 0);
    } else if (S_ISREG(st.st_mode)) {
      n = pl->NewNode(false, st.st_size, st.st_size);
      if (::link(p.c_str(), n->shadow.c_str()) != 0)
        return Status::Errorf(EIO, "power loss: link {} {}: {}", p, n->shadow, strerror(errno));
    } else {
      continue;  // sockets, pid files' symlinks: not the Store's data
    }
    pl->initial_[p] = n;
    pl->names_[p] = n;
  }
  return pl;
}

PowerLoss::~PowerLoss() = default;

std::shared_ptr<PowerLoss::Node> PowerLoss::NewNode(bool dir, uint64_t size, uint64_t synced) {
  auto n = std::make_shared<Node>();
  n->id = next_id_++;
  n->dir = dir;
  n->size = size;
  n->synced = synced;
  if (!dir) n->shadow = fmt::format("{}/{}", shadow_, n->id);
  return n;
}

void PowerLoss::CutAt(uint64_t n) { cut_at_ = n == 0 ? 0 : ops_.load() + n; }
void PowerLoss::Cut() { cut_ = true; }

bool PowerLoss::Step() {
  if (cut_) return false;
  uint64_t n = ops_.fetch_add(1) + 1;
  uint64_t at = cut_at_.load();
  if (at != 0 && n >= at && !cut_) {
    cut_ = true;
    if (Trace2()) fprintf(stderr, "pl op %lu: CUT\n", (unsigned long)n);
  }
  return !cut_;
}


void PowerLoss::AddOp(std::vector<std::pair<std::string, std::shared_ptr<Node>>> steps, const std::string& dir) {
  if (Trace2())
    for (auto& [p, n] : steps) fprintf(stderr, "pl op %lu%s: %s %s\n", (unsigned long)ops_.load(), cut_ ? " (cut)" : "", n ? "add" : "remove", p.c_str());
  ops_log_.push_back(NsOp{std::move(steps), dir, false, cut_.load()});
}

std::shared_ptr<PowerLoss::Node> PowerLoss::Created(const std::string& path) {
  std::lock_guard l(mu_);
  const std::string p = Normal(path);
  auto n = NewNode(false, 0, 0);
  struct stat st;
  if (!cut_ && ::stat(p.c_str(), &st) == 0) n->size = st.st_size;
  (void)::link(p.c_str(), n->shadow.c_str());
  names_[p] = n;
  AddOp({{p, n}}, Parent(p));
  return n;
}

std::shared_ptr<PowerLoss::Node> PowerLoss::Existing(const std::string& path) {
  std::lock_guard l(mu_);
  const std::string p = Normal(path);
  auto it = names_.find(p);
  if (it != names_.end()) return it->second;
  // Not seen before (made outside the layer): durable as it is.
  struct stat st{};
  (void)::stat(p.c_str(), &st);
  auto n = NewNode(false, st.st_size, st.st_size);
  (void)::link(p.c_str(), n->shadow.c_str());
  names_[p] = n;
  initial_[p] = n;
  return n;
}

void PowerLoss::Appended(Node* n, uint64_t end) {
  std::lock_guard l(mu_);
  if (cut_) return;
  n->size = std::max(n->size, end);
}

void PowerLoss::Truncated(Node* n, uint64_t size) {
  std::lock_guard l(mu_);
  if (cut_) return;
  n->size = size;
  n->synced = std::min(n->synced, size);
}

void PowerLoss::Synced(Node* n) {
  // The size before the sync returned: bytes appended meanwhile by another thread are not
  // covered, so this may undercount (safe), never overcount.
  std::lock_guard l(mu_);
  if (cut_) return;
  if (Trace2()) fprintf(stderr, "pl op %lu: sync node %lu size %lu\n", (unsigned long)ops_.load(), (unsigned long)n->id, (unsigned long)n->size);
  n->synced = std::max(n->synced, n->size);
}

void PowerLoss::Renamed(const std::string& from, const std::string& to) {
  std::lock_guard l(mu_);
  const std::string f = Normal(from), t = Normal(to);
  auto it = names_.find(f);
  if (it == names_.end()) return;
  auto n = it->second;
  names_.erase(it);
  names_[t] = n;
  AddOp({{t, n}, {f, nullptr}}, Parent(t));
}

void PowerLoss::Linked(const std::string& from, const std::string& to) {
  std::lock_guard l(mu_);
  const std::string f = Normal(from), t = Normal(to);
  auto it = names_.find(f);
  if (it == names_.end()) return;
  names_[t] = it->second;
  AddOp({{t, it->second}}, Parent(t));
}

void PowerLoss::Removed(const std::string& path) {
  std::lock_guard l(mu_);
  const std::string p = Normal(path);
  names_.erase(p);
  AddOp({{p, nullptr}}, Parent(p));
}

void PowerLoss::DirCreated(const std::string& path) {
  std::lock_guard l(mu_);
  const std::string p = Normal(path);
  auto n = NewNode(true, 0, 0);
  names_[p] = n;
  AddOp({{p, n}}, Parent(p));
}

void PowerLoss::DirSynced(const std::string& dir) {
  std::lock_guard l(mu_);
  if (cut_) return;
  const std::string d = Normal(dir);
  if (Trace2()) fprintf(stderr, "pl op %lu: dirsync %s\n", (unsigned long)ops_.load(), d.c_str());
  for (auto& op : ops_log_)
    if (op.dir == d) op.durable = true;
}

// ---- The data log's calls ----

int PowerLoss::Open(const std::string& path, int flags, mode_t mode) {
  const bool create = (flags & O_CREAT) != 0 && !Exists(path);
  if (create) Step();
  int fd = ::open(path.c_str(), flags, mode);
  if (fd < 0) return fd;
  auto n = create ? Created(path) : Existing(path);
  std::lock_guard l(mu_);
  fds_[fd] = n;
  return fd;
}

int PowerLoss::Close(int fd) {
  {
    std::lock_guard l(mu_);
    fds_.erase(fd);
  }
  return ::close(fd);
}

ssize_t PowerLoss::Pwrite(int fd, const void* buf, size_t n, off_t off) {
  std::shared_ptr<Node> node;
  {
    std::lock_guard l(mu_);
    auto it = fds_.find(fd);
    if (it != fds_.end()) node = it->second;
  }
  Step();
  ssize_t r = ::pwrite(fd, buf, n, off);
  if (r > 0 && node) Appended(node.get(), static_cast<uint64_t>(off) + r);
  return r;
}

int PowerLoss::Fdatasync(int fd) {
  std::shared_ptr<Node> node;
  {
    std::lock_guard l(mu_);
    auto it = fds_.find(fd);
    if (it != fds_.end()) node = it->second;
  }
  Step();
  int r = ::fdatasync(fd);
  if (r == 0 && node) Synced(node.get());
  return r;
}

int PowerLoss::SyncDir(const std::string& dir) {
  Step();
  int r = FileIo::SyncDir(dir);
  if (r == 0) DirSynced(dir);
  return r;
}

int PowerLoss::Mkdir(const std::string& path, mode_t mode) {
  if (Exists(path)) {
    errno = EEXIST;
    return -1;
  }
  Step();
  int r = ::mkdir(path.c_str(), mode);
  if (r == 0) DirCreated(path);
  return r;
}

int PowerLoss::Rmdir(const std::string& path) {
  Step();
  int r = ::rmdir(path.c_str());
  if (r == 0) Removed(path);
  return r;
}

int PowerLoss::Unlink(const std::string& path) {
  Step();
  int r = ::unlink(path.c_str());
  if (r == 0) Removed(path);
  return r;
}

std::shared_ptr<rocksdb::FileSystem> PowerLoss::RocksFileSystem(std::shared_ptr<rocksdb::FileSystem> base) {
  return std::make_shared<PlFs>(std::move(base), shared_from_this());
}

// ---- The cut ----

Result<PowerLoss::Loss> PowerLoss::Apply(Mode mode, uint64_t seed) {
  cut_ = true;
  std::lock_guard l(mu_);
  if (applied_) return Status::Invalid("power loss: applied twice");
  applied_ = true;
  std::mt19937_64 rng(seed);
  Loss loss;

  // Bytes: every file the model knows, whatever its names now.
  std::set<Node*> seen;
  std::vector<std::shared_ptr<Node>> files;
  auto note = [&](const std::shared_ptr<Node>& n) {
    if (n && !n->dir && seen.insert(n.get()).second) files.push_back(n);
  };
  for (auto& [p, n] : initial_) note(n);
  for (auto& [p, n] : names_) note(n);
  for (auto& op : ops_log_)
    for (auto& [p, n] : op.steps) note(n);
  for (auto& n : files) {
    loss.files++;
    uint64_t keep = n->synced;
    if (n->size > n->synced && mode == Mode::kRandom) keep += rng() % (n->size - n->synced + 1);
    // The file as the process left it: its size then, and what it appended after the cut.
    struct stat st;
    if (::stat(n->shadow.c_str(), &st) != 0) continue;
    const uint64_t now = static_cast<uint64_t>(st.st_size);
    if (now > keep) {
      if (::truncate(n->shadow.c_str(), static_cast<off_t>(keep)) != 0)
        return Status::Errorf(EIO, "power loss: truncate {}: {}", n->shadow, strerror(errno));
      loss.files_cut++;
      loss.bytes_dropped += now - keep;
    }
    loss.bytes_kept += keep - n->synced;
  }

  // Names: the durable operations, and with kRandom a prefix of the others.
  size_t pending = 0;
  for (auto& op : ops_log_) pending += !op.durable && !op.after_cut;
  size_t take = mode == Mode::kRandom ? rng() % (pending + 1) : 0;
  std::map<std::string, std::shared_ptr<Node>> want = initial_;
  size_t i = 0;
  for (auto& op : ops_log_) {
    if (!op.durable) {
      if (op.after_cut || i++ >= take) {
        loss.names_undone++;
        if (getenv("LAYERFS_POWER_LOSS_TRACE"))
          for (auto& [p, n] : op.steps) fprintf(stderr, "power loss: undone: %s %s\n", n ? "add" : "remove", p.c_str());
        continue;
      }
      loss.names_kept++;
    }
    for (auto& [p, n] : op.steps) {
      if (n) want[p] = n;
      else want.erase(p);
    }
  }
  // A name inside a directory that is not there is not there either.
  for (auto it = want.begin(); it != want.end();) {
    std::string parent = Parent(it->first);
    bool ok = true;
    while (parent.size() > root_.size()) {
      auto d = want.find(parent);
      if (d == want.end() || !d->second->dir) {
        ok = false;
        break;
      }
      parent = Parent(parent);
    }
    it = ok ? std::next(it) : want.erase(it);
  }

  // Make the names under root those: remove what differs (deepest first), then add (parents
  // first) from the shadow links.
  std::error_code ec;
  for (auto it = names_.rbegin(); it != names_.rend(); ++it) {
    auto w = want.find(it->first);
    if (w != want.end() && w->second == it->second) continue;
    if (it->second->dir) fs::remove_all(it->first, ec);
    else if (::unlink(it->first.c_str()) != 0 && errno != ENOENT)
      return Status::Errorf(EIO, "power loss: unlink {}: {}", it->first, strerror(errno));
  }
  for (auto& [p, n] : want) {
    auto c = names_.find(p);
    if (c != names_.end() && c->second == n && Exists(p)) continue;
    if (n->dir) {
      if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST)
        return Status::Errorf(EIO, "power loss: mkdir {}: {}", p, strerror(errno));
    } else {
      (void)::unlink(p.c_str());
      if (::link(n->shadow.c_str(), p.c_str()) != 0)
        return Status::Errorf(EIO, "power loss: link {} {}: {}", n->shadow, p, strerror(errno));
    }
  }
  return loss;
}

}  // namespace layerfs::kv
