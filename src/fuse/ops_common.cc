// The adapter's shared state and reply helpers (ops_table.h).
#include <time.h>

#include <chrono>

#include <spdlog/spdlog.h>

#include "fuse/ops_table.h"

namespace layerfs::fuse {

void Adapter::AddLookup(Ino ino, uint64_t n) {
  if (ino == workspace::kRootIno || n == 0) return;  // the root is never forgotten
  std::lock_guard lock(mu_);
  lookups_[ino] += n;
}

void Adapter::Forget(Ino ino, uint64_t n) {
  if (ino == workspace::kRootIno) return;
  std::lock_guard lock(mu_);
  auto it = lookups_.find(ino);
  if (it == lookups_.end()) return;
  it->second -= std::min(n, it->second);
  if (it->second != 0) return;
  lookups_.erase(it);
  parents_.erase(ino);
  // Under mu_, so a concurrent lookup of the same inode counts only after the Workspace forgot.
  ws->Forget(ino);
}

size_t Adapter::tracked_inodes() {
  std::lock_guard lock(mu_);
  return lookups_.size();
}

void Adapter::SetParent(Ino dir, Ino parent) {
  if (dir == workspace::kRootIno) return;
  std::lock_guard lock(mu_);
  parents_[dir] = parent;
}

Ino Adapter::ParentOf(Ino dir) {
  if (dir == workspace::kRootIno) return dir;
  std::lock_guard lock(mu_);
  auto it = parents_.find(dir);
  return it == parents_.end() ? dir : it->second;
}

void Adapter::SignalInit(bool ok) {
  {
    std::lock_guard lock(init_mu_);
    if (init_signalled_) return;
    init_signalled_ = true;
    init_ok_ = ok;
  }
  init_cv_.notify_all();
}

bool Adapter::WaitInit(int timeout_ms) {
  std::unique_lock lock(init_mu_);
  init_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return init_signalled_; });
  return init_signalled_ && init_ok_;
}

int Errno(const Status& s) {
  const int e = s.ToErrno();
  // EIO is damage or a failing disk: the log says which Store file (the message names it). At
  // most a few lines a second, so a scan over damage does not flood the log.
  if (e == EIO) {
    static std::atomic<int64_t> window{0};
    static std::atomic<int> lines{0};
    const int64_t sec = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::steady_clock::now().time_since_epoch()).count();
    if (window.exchange(sec) != sec) lines = 0;
    if (lines++ < 5) spdlog::error("fuse: {}", s.message());
  }
  return e;
}

int ErrnoAt(Adapter& ad, Ino ino, std::string_view what, const Status& s) {
  if (s.ToErrno() != EIO) return s.ToErrno();
  spdlog::error("{}: {} of {}: {}", ad.mountpoint, what, ad.ws->PathOf(ino), s.message());
  return EIO;
}

struct stat ToStat(const workspace::Attr& a) {
  struct stat st {};
  st.st_ino = a.ino;
  st.st_mode = a.mode;
  st.st_nlink = a.nlink;
  st.st_uid = a.uid;
  st.st_gid = a.gid;
  st.st_size = static_cast<off_t>(a.size);
  st.st_rdev = a.rdev;
  st.st_blksize = static_cast<blksize_t>(workspace::kBlockSize);
  st.st_blocks = static_cast<blkcnt_t>(a.blocks());
  st.st_atim = a.atime;
  st.st_mtim = a.mtime;
  st.st_ctim = a.ctime;
  return st;
}

workspace::Caller CallerOf(fuse_req_t req) {
  const fuse_ctx* c = fuse_req_ctx(req);
  return workspace::Caller{.uid = c->uid, .gid = c->gid};
}

timespec Now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts;
}

static fuse_entry_param EntryOf(const Adapter& ad, const workspace::Attr& a) {
  fuse_entry_param e{};
  e.ino = a.ino;
  e.attr = ToStat(a);
  e.attr_timeout = ad.timeout;
  e.entry_timeout = ad.timeout;
  return e;
}

int ReplyEntry(Adapter& ad, fuse_req_t req, const workspace::Attr& a) {
  fuse_entry_param e = EntryOf(ad, a);
  ad.AddLookup(a.ino, 1);
  if (fuse_reply_entry(req, &e) != 0) ad.Forget(a.ino, 1);  // interrupted: the kernel has no entry
  return 0;
}

int ReplyCreate(Adapter& ad, fuse_req_t req, const workspace::Attr& a, const fuse_file_info* fi) {
  fuse_entry_param e = EntryOf(ad, a);
  ad.AddLookup(a.ino, 1);
  ad.open_handles.fetch_add(1);
  ad.AddWriter(a.ino, fi->flags);
  if (fuse_reply_create(req, &e, fi) != 0) {
    ad.open_handles.fetch_sub(1);
    ad.DropWriter(a.ino, fi->flags);
    ad.Forget(a.ino, 1);
  }
  return 0;
}

int ReplyAttr(fuse_req_t req, const workspace::Attr& a) {
  struct stat st = ToStat(a);
  fuse_reply_attr(req, &st, Ctx(req).timeout);
  return 0;
}

}  // namespace layerfs::fuse
