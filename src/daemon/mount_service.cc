#include "daemon/mount_service.h"

#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <spdlog/spdlog.h>

#include "kv/kv.h"

namespace layerfs::daemon {

MountTable::~MountTable() { UnmountAll(); }

Status MountTable::StartLocked(Entry& e) {
  fuse::MountOptions o;
  o.read_only = e.ws->read_only();
  o.allow_other = e.req.allow_other;
  o.multithreaded = e.req.multithreaded;
  o.follow_cpu = !e.req.no_follow_cpu;
  o.fsname = "layerfs:" + store_.path();
  LFS_ASSIGN(e.mount, fuse::Mount::Start(e.ws.get(), e.req.mountpoint, o));
  return Status::Ok();
}

Result<cli::MountInfo> MountTable::Mount(const Request& r) {
  char real[PATH_MAX];
  if (!realpath(r.mountpoint.c_str(), real))
    return Status::Errorf(errno, "mountpoint {}: {}", r.mountpoint, strerror(errno));
  struct stat sb;
  if (stat(real, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return Status::Error(ENOTDIR, fmt::format("mountpoint {} is not a directory", real));
  Entry e;
  e.req = r;
  e.req.mountpoint = real;
  LFS_ASSIGN(auto head, store_.BranchHead(r.ref));
  std::lock_guard l(mu_);
  if (mounts_.count(real)) return Status::Error(EBUSY, fmt::format("{} is already a layerfs mount", real));
  if (head && !r.read_only) {
    for (const auto& [mp, m] : mounts_)
      if (m.branch == r.ref) return Status::Error(EBUSY, fmt::format("branch '{}' is already mounted at {}", r.ref, mp));
    e.branch = r.ref;
    LFS_ASSIGN(e.ws, reg_.Get(r.ref));
  } else {
    ObjectId commit;
    if (head) {
      commit = *head;
    } else {
      LFS_ASSIGN(commit, store_.Resolve(r.ref));
    }
    LFS_ASSIGN(auto ws, workspace::Workspace::Open(store_, {.read_only = true, .branch = "", .commit = commit}));
    e.ws = std::move(ws);
  }
  LFS_TRY(StartLocked(e));
  spdlog::info("mounted {} at {} over {}", r.ref, real, e.mount->transport());
  cli::MountInfo info = Info(real, e);
  mounts_.emplace(real, std::move(e));
  return info;
}

Status MountTable::Unmount(const std::string& mountpoint) {
  char real[PATH_MAX];
  std::string mp = realpath(mountpoint.c_str(), real) ? real : mountpoint;
  Entry e;
  {
    std::lock_guard l(mu_);
    auto it = mounts_.find(mp);
    if (it == mounts_.end()) return Status::NotFound(fmt::format("{} is not mounted by this store's daemon", mp));
    e = std::move(it->second);
    mounts_.erase(it);
  }
  Status s = Finish(e);
  LFS_TRY(s);
  LFS_TRY(store_.kv().SyncWal());
  spdlog::info("unmounted {}", mp);
  return Status::Ok();
}

Status MountTable::Finish(Entry& e) {
  // The session is stopped before its Workspace can go: the mount serves from a plain pointer.
  Status s = e.mount ? e.mount->Unmount() : Status::Ok();
  e.mount.reset();
  e.ws.reset();
  if (!e.branch.empty()) reg_.Release(e.branch);
  return s;
}

std::optional<std::string> MountTable::BranchAt(const std::string& mountpoint) {
  std::lock_guard l(mu_);
  auto it = mounts_.find(mountpoint);
  if (it == mounts_.end() || it->second.branch.empty()) return std::nullopt;
  return it->second.branch;
}

Status MountTable::SettleWrites(const std::string& mountpoint) {
  // Held throughout so the mount cannot go meanwhile; what the kernel sends for the syncs is
  // served by the mount's own threads, which never take it.
  std::lock_guard l(mu_);
  auto it = mounts_.find(mountpoint);
  if (it == mounts_.end() || !it->second.mount) return Status::Errorf(ENOENT, "no mount at {}", mountpoint);
  return it->second.mount->SettleWrites();
}

std::optional<std::string> MountTable::MountpointOf(const std::string& branch) {
  std::lock_guard l(mu_);
  for (const auto& [mp, m] : mounts_)
    if (m.branch == branch) return mp;
  return std::nullopt;
}

Status MountTable::WithBranchUnmounted(const std::string& branch, const std::function<Status()>& fn) {
  std::lock_guard l(mu_);
  Entry* e = nullptr;
  for (auto& [mp, m] : mounts_)
    if (m.branch == branch) e = &m;
  if (!e) return fn();
  if (e->mount->open_handles() > 0)
    return Status::Error(EBUSY, fmt::format("{} has open files", e->req.mountpoint));
  LFS_TRY(e->mount->Unmount());
  Status s = fn();
  Status again = StartLocked(*e);
  if (!again.ok()) {
    mounts_.erase(e->req.mountpoint);
    return again.Context("remount after reset");
  }
  return s;
}

cli::MountInfo MountTable::Info(const std::string& mp, const Entry& e) {
  cli::MountInfo i;
  i.mountpoint = mp;
  i.ref = e.req.ref;
  i.branch = e.branch;
  i.commit = e.ws->base_commit();
  i.read_only = e.branch.empty();
  if (e.mount) {
    i.transport = e.mount->transport();
    i.requests = e.mount->RequestCounts();
  }
  return i;
}

std::vector<cli::MountInfo> MountTable::List() {
  std::lock_guard l(mu_);
  std::vector<cli::MountInfo> out;
  for (const auto& [mp, m] : mounts_) out.push_back(Info(mp, m));
  return out;
}

size_t MountTable::Reap() {
  std::lock_guard l(mu_);
  for (auto it = mounts_.begin(); it != mounts_.end();) {
    if (it->second.mount && !it->second.mount->serving()) {
      spdlog::info("{} was unmounted", it->first);
      (void)Finish(it->second);
      it = mounts_.erase(it);
    } else {
      ++it;
    }
  }
  return mounts_.size();
}

void MountTable::UnmountAll() {
  std::map<std::string, Entry> all;
  {
    std::lock_guard l(mu_);
    all.swap(mounts_);
  }
  for (auto& [mp, e] : all) (void)Finish(e);
  (void)store_.kv().SyncWal();
}

size_t MountTable::size() {
  std::lock_guard l(mu_);
  return mounts_.size();
}

}  // namespace layerfs::daemon
