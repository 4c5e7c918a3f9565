#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>

#include "cli/cli.h"
#include "remote/lazy.h"

namespace layerfs::cli {

Result<Store*> Context::GetStore() {
  if (store) return store;
  if (store_path.empty()) return Status::Invalid("no store given: use --store PATH or set LAYERFS_STORE");
  // A daemon that just served its last unmount closes the Store a moment after it stops
  // listening: wait for it rather than fail.
  for (int i = 0;; i++) {
    auto st = Store::Open(store_path);
    if (st.ok()) {
      owned_store = std::move(*st);
      break;
    }
    if (st.status().code() != EBUSY || i >= 100) return st.status();
    usleep(50000);
  }
  store = owned_store.get();
  // A lazy Store reads what it lacks from its lazy remotes.
  LFS_TRY(remote::AttachLazySource(*store).status());
  return store;
}

Result<workspace::WorkspaceRegistry*> Context::Workspaces() {
  if (workspaces) return workspaces;
  LFS_ASSIGN(Store * st, GetStore());
  owned_registry = std::make_unique<workspace::WorkspaceRegistry>(*st);
  workspaces = owned_registry.get();
  return workspaces;
}

std::string Context::Abs(const std::string& path) const {
  if (path.empty() || path[0] == '/') return path;
  return (cwd.empty() ? std::string(".") : cwd) + "/" + path;
}

Result<std::string> Context::BranchOfTarget(const std::string& target, std::string* mountpoint) {
  std::string t = target.empty() ? cwd : target;
  struct stat sb;
  bool is_path = !target.empty() ? (target.find('/') != std::string::npos || stat(Abs(target).c_str(), &sb) == 0) : true;
  if (is_path) {
    std::string mp;
    std::string st = StoreOfMount(Abs(t), &mp);
    if (!mp.empty() && mounts) {
      if (auto b = mounts->BranchAt(mp)) {
        if (mountpoint) *mountpoint = mp;
        return *b;
      }
      return Status::Error(EROFS, fmt::format("{} is a read-only mount of a commit", mp));
    }
    if (target.empty()) return Status::Invalid("the working directory is not in a layerfs mount; name a branch or mountpoint");
    if (!mp.empty()) return Status::Invalid(fmt::format("{} is mounted by a daemon that is not running", mp));
  }
  return t;
}

json MountJson(const MountInfo& m) {
  json j = {{"mountpoint", m.mountpoint}, {"ref", m.ref}, {"commit", m.commit.Hex()},
            {"read_only", m.read_only}, {"transport", m.transport}};
  if (!m.branch.empty()) j["branch"] = m.branch;
  json req = json::object();
  for (const auto& [op, n] : m.requests) req[op] = n;
  j["requests"] = std::move(req);
  return j;
}

Status SyncMount(const std::string& mp) {
  int fd = open(mp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::Errorf(errno, "open {}: {}", mp, strerror(errno));
  int rc = syncfs(fd);
  int e = errno;
  close(fd);
  if (rc != 0) return Status::Errorf(e, "sync {}: {}", mp, strerror(e));
  return Status::Ok();
}

std::string FormatTime(int64_t sec) {
  time_t t = sec;
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[64];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace layerfs::cli
