// Internal to the FUSE adapter: the per-mount context every callback reaches through
// fuse_req_userdata, the reply helpers, and the tables of low-level operations, one file per
// group (ops_entry.cc, ops_file.cc, ops_dir.cc, ops_xattr.cc).
//
// Every callback is a noexcept trampoline: its body returns 0 after it has replied, or an errno
// for Run() to reply with; exceptions become ENOMEM (bad_alloc) or EIO. A body replies last, so
// each request is answered exactly once.
#pragma once

#define FUSE_USE_VERSION 314
#include <fcntl.h>
#include <fuse_lowlevel.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <new>
#include <unordered_map>

#include "fuse/cpu_follow.h"
#include "fuse/mount.h"
#include "fuse/uring.h"
#include "workspace/workspace.h"

namespace layerfs::fuse {

using workspace::Ino;

// How long the kernel may keep names (negative ones too) and attributes without asking again.
// Every change of a Workspace comes through its mount, where the kernel updates or drops what it
// holds, except changes made in place by the daemon (merges, file verbs), which tell the kernel
// through an invalidation, and a reset, which remounts; so the kernel keeps them as long as it
// likes (docs/design.md, "Speed of real work"). LAYERFS_FUSE_TIMEOUT (seconds) overrides it,
// for measurements.
constexpr double kCacheTimeout = 86400.0;
constexpr unsigned kMaxWrite = 1 << 20;
// Read requests of 512 KiB. Chosen when data-log blocks were spliced into replies (a reply had
// to fit a 1 MiB pipe; measured: cold 2 GiB read 2.5-2.7 s at 1 MiB, 1.3-1.6 s at 512 KiB);
// kept since (the ring's reader thread measured no better at larger sizes, docs/design.md).
constexpr unsigned kMaxReadahead = 512 << 10;

struct Adapter {
  Adapter(workspace::Workspace* w, MountOptions o) : ws(w), opts(std::move(o)) {}

  workspace::Workspace* ws;
  MountOptions opts;
  std::string mountpoint;  // for the log
  std::atomic<size_t> open_handles{0};
  // Regular files open for writing, with how many such handles each: a shared writable mmap
  // of one may hold dirty pages whose writeback syncfs does not wait for (Mount::SettleWrites).
  std::mutex writers_mu;
  std::unordered_map<fuse_ino_t, uint32_t> writers;
  void AddWriter(fuse_ino_t ino, int flags) {
    if ((flags & O_ACCMODE) == O_RDONLY) return;
    std::lock_guard l(writers_mu);
    writers[ino]++;
  }
  void DropWriter(fuse_ino_t ino, int flags) {
    if ((flags & O_ACCMODE) == O_RDONLY) return;
    std::lock_guard l(writers_mu);
    auto it = writers.find(ino);
    if (it != writers.end() && --it->second == 0) writers.erase(it);
  }
  double timeout = kCacheTimeout;  // entry and attribute timeout of every reply
  // Measurement switches (environment, read at mount): LAYERFS_FUSE_KEEP_CACHE=0 keeps the page
  // cache across opens for read-only opens only, as before; LAYERFS_FUSE_CACHE_DIR=0 does not
  // let the kernel cache directory listings.
  bool keep_cache_writers = true;
  bool cache_dirs = true;
  // LAYERFS_FUSE_WRITEBACK=1: the kernel's writeback cache, measured and not taken (docs/design.md,
  // "Speed of real work": slower random writes, SEEK_DATA and st_blocks wrong while pages are dirty).
  bool writeback = false;
  // LAYERFS_FUSE_COPY_RANGE=0: copy_file_range answered ENOSYS, so the kernel copies through
  // READs and WRITEs as it did before the daemon served it (for A/B measurements).
  bool copy_range = true;
  // Requests served, per operation (Mount::RequestCounts): one relaxed increment per request.
  std::array<std::atomic<uint64_t>, kOpCount> requests{};
  void Count(Op op) { requests[static_cast<size_t>(op)].fetch_add(1, std::memory_order_relaxed); }
  UringTransport* uring = nullptr;  // the session's transport (io_uring or /dev/fuse)
  fuse_session* se = nullptr;       // for notifications (set once mounted)

  // Lookup counts: every entry the kernel is told about counts one; forget subtracts. At zero
  // the Workspace may drop the inode (and free an unlinked file's data).
  void AddLookup(Ino ino, uint64_t n);
  void Forget(Ino ino, uint64_t n);
  size_t tracked_inodes();

  // Parent of a directory the kernel has seen, for the ".." entry of readdir.
  void SetParent(Ino dir, Ino parent);
  Ino ParentOf(Ino dir);

  // The FUSE_INIT handshake, so Mount::Start returns once the kernel can send requests.
  void SignalInit(bool ok);
  bool WaitInit(int timeout_ms);

 private:
  std::mutex mu_;
  std::unordered_map<Ino, uint64_t> lookups_;
  std::unordered_map<Ino, Ino> parents_;
  std::mutex init_mu_;
  std::condition_variable init_cv_;
  bool init_signalled_ = false, init_ok_ = false;
};

// Counts the request as `op` and returns the mount's adapter.
inline Adapter& Ctx(fuse_req_t req, Op op) {
  Adapter& ad = *static_cast<Adapter*>(fuse_req_userdata(req));
  ad.Count(op);
  return ad;
}
inline Adapter& Ctx(fuse_req_t req) { return *static_cast<Adapter*>(fuse_req_userdata(req)); }

// The errno of a failed Status (EIO if it carries none). An EIO is logged (rate-limited) with its
// message, which names the damaged Store file.
int Errno(const Status& s);
// As Errno, and an EIO's log line names the path of `ino` in the mount and the operation.
int ErrnoAt(Adapter& ad, Ino ino, std::string_view what, const Status& s);
struct stat ToStat(const workspace::Attr& a);
workspace::Caller CallerOf(fuse_req_t req);
timespec Now();

// Replies with an entry and counts the lookup (undone if the kernel did not take the reply).
int ReplyEntry(Adapter& ad, fuse_req_t req, const workspace::Attr& a);
int ReplyCreate(Adapter& ad, fuse_req_t req, const workspace::Attr& a, const fuse_file_info* fi);
int ReplyAttr(fuse_req_t req, const workspace::Attr& a);

template <typename Body>
void Run(fuse_req_t req, Body&& body) noexcept {
  // A ring thread is pinned to its queue's CPU, which is already the caller's.
  if (Ctx(req).opts.follow_cpu && !UringTransport::InRingThread()) FollowCallerCpu(fuse_req_ctx(req)->pid);
  int err;
  try {
    err = body();
  } catch (const std::bad_alloc&) {
    err = ENOMEM;
  } catch (...) {
    err = EIO;
  }
  if (err != 0) fuse_reply_err(req, err);
}

void AddEntryOps(fuse_lowlevel_ops& ops);
void AddFileOps(fuse_lowlevel_ops& ops);
void AddDirOps(fuse_lowlevel_ops& ops);
void AddXattrOps(fuse_lowlevel_ops& ops);  // and statfs

}  // namespace layerfs::fuse
