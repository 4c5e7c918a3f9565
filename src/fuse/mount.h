// Mount: one FUSE session serving one Workspace at one mountpoint, on its own thread.
//
// The adapter translates libfuse low-level requests into Workspace operations on stable inode
// numbers (the root is 1 = FUSE_ROOT_ID). The kernel checks permissions (default_permissions)
// and handles locks (flock, fcntl) locally; O_APPEND and O_TRUNC are the kernel's too (no
// writeback cache, no atomic_o_trunc). This header does not include fuse_lowlevel.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layerfs/status.h"

namespace layerfs::workspace { class Workspace; }

namespace layerfs::fuse {

// The FUSE requests a mount counts (Mount::RequestCounts), in the order OpName names them.
enum class Op : uint8_t {
  kLookup, kForget, kGetattr, kSetattr, kReadlink, kMknod, kMkdir, kUnlink, kRmdir, kSymlink,
  kRename, kLink, kOpen, kRead, kWrite, kStatfs, kRelease, kFsync, kSetxattr, kGetxattr,
  kListxattr, kRemovexattr, kFlush, kOpendir, kReaddir, kReleasedir, kFsyncdir, kCreate,
  kFallocate, kReaddirplus, kLseek, kBatchForget, kCopyFileRange, kCount
};
constexpr size_t kOpCount = static_cast<size_t>(Op::kCount);
// The kernel's name of the operation, lower case ("lookup", "getxattr", ...).
const char* OpName(Op op);

struct MountOptions {
  bool read_only = false;
  bool allow_other = false;
  bool multithreaded = false;
  bool follow_cpu = true;  // serve each request on its caller's core (fuse/cpu_follow.h)
  // Serve over io_uring when the kernel offers it (fuse/uring.h); LAYERFS_FUSE_URING=0 in the
  // environment turns it off for every mount.
  bool uring = true;
  std::string fsname = "layerfs";
};

class Mount {
 public:
  // Mounts `ws` (not owned; must outlive the Mount) at `mountpoint`, starts serving, returns once
  // the kernel has completed the FUSE handshake.
  static Result<std::unique_ptr<Mount>> Start(workspace::Workspace* ws, const std::string& mountpoint,
                                              const MountOptions& o);
  ~Mount();
  Mount(const Mount&) = delete;
  Mount& operator=(const Mount&) = delete;

  // Detaches the mount, stops the loop and joins its thread. Idempotent.
  Status Unmount();
  // False once the kernel unmounted us (e.g. fusermount3 -u) and the loop ended.
  bool serving() const;
  // Files and directories the kernel has open on this mount.
  size_t open_handles() const;
  // Makes sure every write the kernel still holds for this mount has reached the Workspace:
  // syncfs, then an fdatasync of each regular file open for writing (by its path in the mount).
  // A FUSE mount's syncfs starts the writeback of dirty pages (a shared mmap's) but does not
  // wait for the WRITE requests to be served; fsync of the file does. Call it from a thread
  // that serves no request of this mount.
  Status SettleWrites();
  const std::string& mountpoint() const { return mountpoint_; }
  // "io_uring" when requests are served from per-CPU rings, else "/dev/fuse".
  std::string transport() const;
  // Requests served since the mount started, per operation (OpName), nonzero ones only.
  std::vector<std::pair<std::string, uint64_t>> RequestCounts() const;

 private:
  Mount();
  struct State;
  std::unique_ptr<State> st_;
  std::string mountpoint_;
};

}  // namespace layerfs::fuse
