// Store::Export: writes a Commit's tree into a directory, faithfully (types, modes, owners when
// root, mtimes, hard links, user xattrs) and safely: every call is relative to a directory fd we
// created, with O_NOFOLLOW / AT_SYMLINK_NOFOLLOW, and names are validated when trees are decoded,
// so no stored name or link target can make it write outside DIR.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <functional>
#include <map>

#include "layerfs/store.h"

namespace layerfs {

namespace {

Status Err(std::string_view what, const std::string& path) {
  int e = errno;
  return Status::Errorf(e, "{} {}: {}", what, path, strerror(e));
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Err("write", path);
    }
    data.remove_prefix(n);
  }
  return Status::Ok();
}

}  // namespace

Status Store::Export(const ObjectId& commit, const std::string& dir) {
  LFS_ASSIGN(auto c, GetCommit(commit));
  struct stat sb;
  if (stat(dir.c_str(), &sb) == 0) {
    if (!S_ISDIR(sb.st_mode)) return Status::Error(ENOTDIR, fmt::format("{} is not a directory", dir));
  } else if (mkdir(dir.c_str(), 0755) != 0) {
    return Err("create", dir);
  }
  int root = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return Err("open", dir);
  bool is_root = geteuid() == 0;
  std::map<uint64_t, std::pair<int, std::string>> links;  // link group -> (dirfd, name) of the first
  std::vector<int> open_dirs;
  // Directory mtimes are set after their children are written.
  std::vector<std::function<void()>> finish;
  std::function<Status(int, const std::string&, const ObjectId&)> write_dir =
      [&](int dfd, const std::string& path, const ObjectId& tree) -> Status {
    LFS_ASSIGN(auto entries, ReadTree(tree));
    for (const auto& e : entries) {
      std::string p = path + "/" + e.name;
      const char* n = e.name.c_str();
      timespec times[2] = {{0, UTIME_OMIT}, {e.mtime_sec, static_cast<long>(e.mtime_nsec)}};
      if (e.link_group && e.type != EntryType::kDir) {
        auto it = links.find(e.link_group);
        if (it != links.end()) {
          if (linkat(it->second.first, it->second.second.c_str(), dfd, n, 0) != 0) return Err("link", p);
          continue;
        }
        links[e.link_group] = {dfd, e.name};
      }
      switch (e.type) {
        case EntryType::kDir: {
          if (mkdirat(dfd, n, 0700) != 0) return Err("create", p);
          int sub = openat(dfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub < 0) return Err("open", p);
          open_dirs.push_back(sub);
          LFS_TRY(write_dir(sub, p, e.id));
          break;
        }
        case EntryType::kFile: {
          int fd = openat(dfd, n, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
          if (fd < 0) return Err("create", p);
          auto data = ReadFile(e);
          Status s = data.ok() ? WriteAll(fd, *data, p) : data.status().Context(p);
          close(fd);
          LFS_TRY(s);
          break;
        }
        case EntryType::kSymlink:
          if (symlinkat(e.target.c_str(), dfd, n) != 0) return Err("create symlink", p);
          break;
        default: {
          mode_t t = e.type == EntryType::kChar ? S_IFCHR
                     : e.type == EntryType::kBlock ? S_IFBLK
                     : e.type == EntryType::kFifo ? S_IFIFO
                                                  : S_IFSOCK;
          if (mknodat(dfd, n, t | 0600, e.rdev) != 0) return Err("create node", p);
        }
      }
      if (e.type != EntryType::kSymlink) {
        // Open by path relative to dfd without following: the entry we just made.
        for (const auto& [k, v] : e.xattrs) {
          std::string full = "/proc/self/fd/" + std::to_string(dfd) + "/" + e.name;
          if (lsetxattr(full.c_str(), k.c_str(), v.data(), v.size(), 0) != 0) return Err("set xattr on", p);
        }
      }
      if (is_root && fchownat(dfd, n, e.uid, e.gid, AT_SYMLINK_NOFOLLOW) != 0) return Err("chown", p);
      if (e.type != EntryType::kSymlink && fchmodat(dfd, n, e.mode, 0) != 0) return Err("chmod", p);
      if (e.type == EntryType::kDir) {
        finish.push_back([dfd, name = e.name, t0 = times[0], t1 = times[1]] {
          timespec ts[2] = {t0, t1};
          (void)utimensat(dfd, name.c_str(), ts, AT_SYMLINK_NOFOLLOW);
        });
      } else if (utimensat(dfd, n, times, AT_SYMLINK_NOFOLLOW) != 0) {
        return Err("set times on", p);
      }
    }
    return Status::Ok();
  };
  Status s = write_dir(root, dir, c.root);
  for (auto it = finish.rbegin(); it != finish.rend(); ++it) (*it)();
  for (int fd : open_dirs) close(fd);
  close(root);
  return s;
}

}  // namespace layerfs
