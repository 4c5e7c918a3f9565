#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <climits>
#include <cstdio>

#include "cli/cli.h"
#include "kv/space_guard.h"
#include "remote/lazy.h"

namespace layerfs::cli {

Result<Store*> Context::GetStore(bool read_only_ok) {
  if (store) return store;
  if (store_path.empty()) return Status::Invalid("no store given: use --store PATH or set LAYERFS_STORE");
  // A daemon that just served its last unmount closes the Store a moment after it stops
  // listening: wait for it rather than fail.
  // On a disk too full for the database to open (below the Store's floor), the read-only verbs
  // do not even try: a failed open leaves empty WAL and MANIFEST files behind.
  if (read_only_ok) {
    struct statvfs sv;
    if (statvfs(store_path.c_str(), &sv) == 0 &&
        static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize < kv::SpaceGuard::DefaultOptions().floor_bytes) {
      auto ro = Store::Open(store_path, {.read_only = true});
      if (ro.ok()) {
        // Only a CLI process opens a Store here (the daemon's Context has its own): a note on
        // its stderr.
        fprintf(stderr, "layerfs: store opened read-only (its disk is full: %llu bytes free)\n",
                static_cast<unsigned long long>(sv.f_bavail) * sv.f_frsize);
        owned_store = std::move(*ro);
        store = owned_store.get();
        return store;
      }
    }
  }
  for (int i = 0;; i++) {
    // The reserve is left for a daemon (StoreOpenOptions): on a full disk the read-only verbs
    // read read-only, the others fail.
    auto st = Store::Open(store_path);
    if (st.ok()) {
      owned_store = std::move(*st);
      break;
    }
    const int code = st.status().code();
    if (read_only_ok && (code == ENOSPC || code == EROFS || code == EACCES || code == EDQUOT)) {
      auto ro = Store::Open(store_path, {.read_only = true});
      if (!ro.ok()) return st.status();
      fprintf(stderr, "layerfs: store opened read-only (%s)\n", st.status().message().c_str());
      owned_store = std::move(*ro);
      break;
    }
    if (code == ENOSPC)
      return Status::Errorf(ENOSPC, "{} (read-only verbs still work; a mount can use the Store's reserve to open it)",
                            st.status().message());
    if (code != EBUSY || i >= 100) return st.status();
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

std::string Context::Head() {
  if (!mounts || cwd.empty()) return "main";
  std::string mp;
  (void)StoreOfMount(cwd, &mp);
  if (mp.empty()) return "main";
  if (auto b = mounts->BranchAt(mp)) return *b;
  for (const auto& m : mounts->List())
    if (m.mountpoint == mp) return m.commit.Hex();
  return "main";
}

std::string Context::ExpandHead(const std::string& spec) {
  const size_t dots = spec.find("...");
  if (dots != std::string::npos) return ExpandHead(spec.substr(0, dots)) + "..." + ExpandHead(spec.substr(dots + 3));
  // Git's A..B; a side left out is HEAD (`main..`, `..feature`).
  const size_t two = spec.find("..");
  if (two != std::string::npos) {
    const std::string l = spec.substr(0, two), r = spec.substr(two + 2);
    return (l.empty() ? Head() : ExpandHead(l)) + ".." + (r.empty() ? Head() : ExpandHead(r));
  }
  if (spec.compare(0, 4, "HEAD") == 0 && (spec.size() == 4 || spec[4] == '~' || spec[4] == '^' || spec[4] == ':'))
    return Head() + spec.substr(4);
  return spec;
}

Result<std::vector<std::string>> Context::TreePaths(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::string base;  // the tree path `p` is relative to
    std::string rest = p;
    std::string mp;
    if (!p.empty() && p[0] == '/') {
      // Its nearest existing ancestor tells the mount (the path itself may be gone: log of a
      // removed file).
      std::string at = p, tail;
      char real[PATH_MAX] = "/";
      while (!realpath(at.c_str(), real)) {
        const size_t slash = at.find_last_of('/');
        if (slash == std::string::npos || at == "/") break;
        tail = at.substr(slash) + tail;
        at = slash == 0 ? "/" : at.substr(0, slash);
      }
      const std::string full = std::string(real) + tail;
      (void)StoreOfMount(real, &mp);
      if (mp.empty()) return Status::Invalid(fmt::format("{}: an absolute path must lie in a mount", p));
      rest = full.substr(mp.size());
    } else if (!cwd.empty()) {
      (void)StoreOfMount(cwd, &mp);
      if (!mp.empty() && cwd.size() > mp.size()) base = cwd.substr(mp.size() + 1);
    }
    std::vector<std::string> parts;
    for (const std::string& s : {base, rest}) {
      size_t pos = 0;
      while (pos <= s.size()) {
        size_t end = s.find('/', pos);
        if (end == std::string::npos) end = s.size();
        std::string name = s.substr(pos, end - pos);
        pos = end + 1;
        if (name.empty() || name == ".") continue;
        if (name == "..") {
          if (parts.empty()) return Status::Invalid(fmt::format("{}: outside the tree", p));
          parts.pop_back();
        } else {
          parts.push_back(name);
        }
      }
    }
    std::string joined;
    for (const auto& part : parts) joined += (joined.empty() ? "" : "/") + part;
    out.push_back(joined);
  }
  return out;
}

const ArgSpec kRenames = {"renames", ArgType::kBool, "-M,--find-renames",
                          "A file moved (the same or at least half similar) as one change R with from_path and "
                          "similarity, as Git's -M, instead of D and A"};

Status FindRenamesIf(const Args& a, std::vector<DiffEntry>* changes, const merge::ChangeContent& read) {
  if (!a.Bool("renames")) return Status::Ok();
  return merge::DetectRenames(changes, read);
}

const ArgSpec kPaths = {"paths", ArgType::kStrings, "--path",
                        "Only these paths, files or directories (also as -- PATH...; relative to the working "
                        "directory in a mount, as Git reads them)"};

Status KeepPaths(Context& ctx, const Args& a, std::vector<DiffEntry>* changes) {
  if (!a.Has("paths")) return Status::Ok();
  LFS_ASSIGN(auto paths, ctx.TreePaths(a.Strings("paths")));
  std::erase_if(*changes, [&](const DiffEntry& d) { return !PathSelected(d.path, paths); });
  return Status::Ok();
}

bool PathSelected(const std::string& path, const std::vector<std::string>& under) {
  for (const auto& u : under)
    if (u.empty() || path == u || (path.size() > u.size() && path.compare(0, u.size(), u) == 0 && path[u.size()] == '/'))
      return true;
  return false;
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

Status SettleMount(Context& ctx, const std::string& branch, const std::string& mp) {
  std::string at = mp;
  if (at.empty() && ctx.mounts) {
    if (auto m = ctx.mounts->MountpointOf(branch)) at = *m;
  }
  if (at.empty()) return Status::Ok();
  if (ctx.mounts) {
    Status s = ctx.mounts->SettleWrites(at);
    if (s.code() != ENOENT) return s;
  }
  return SyncMount(at);
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
