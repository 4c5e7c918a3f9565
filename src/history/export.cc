// Store::Export: writes a Commit's tree into a directory, faithfully (types, modes, owners when
// root, mtimes, hard links, user xattrs) and safely: every call is relative to a directory fd we
// created, with O_NOFOLLOW / AT_SYMLINK_NOFOLLOW, and names are validated when trees are decoded,
// so no stored name or link target can make it write outside DIR.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <map>

#include "layerfs/store.h"
#include "history/file_content.h"
#include "objects/tree.h"

namespace layerfs {

namespace {

Status Err(std::string_view what, const std::string& path) {
  int e = errno;
  return Status::Errorf(e, "{} {}: {}", what, path, strerror(e));
}

Status WriteAllAt(int fd, std::string_view data, uint64_t off, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = pwrite(fd, data.data(), data.size(), static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Err("write", path);
    }
    data.remove_prefix(n);
    off += n;
  }
  return Status::Ok();
}

bool AllZero(std::string_view d) {
  return d.empty() || (d[0] == 0 && memcmp(d.data(), d.data() + 1, d.size() - 1) == 0);
}

// True if `dir` has no entries; sets errno and returns false when it cannot be read.
bool IsEmptyDir(const std::string& dir, bool* readable) {
  DIR* d = opendir(dir.c_str());
  *readable = d != nullptr;
  if (!d) return false;
  bool empty = true;
  while (dirent* e = readdir(d))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = false;
  closedir(d);
  return empty;
}

}  // namespace

Status Store::Export(const ObjectId& commit, const std::string& dir, const ProgressFn& progress) {
  LFS_ASSIGN(auto c, GetCommit(commit));
  ProgressMeter meter(progress, "export");
  meter.state().objects_total = c.files;
  meter.state().bytes_total = c.logical_bytes;
  struct stat sb;
  if (stat(dir.c_str(), &sb) == 0) {
    if (!S_ISDIR(sb.st_mode)) return Status::Error(ENOTDIR, fmt::format("{} is not a directory", dir));
    bool readable;
    if (!IsEmptyDir(dir, &readable)) {
      if (!readable) return Err("open", dir);
      return Status::Exists(fmt::format("{} is not empty", dir));
    }
  } else if (mkdir(dir.c_str(), 0755) != 0) {
    return Err("create", dir);
  }
  int root = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return Err("open", dir);
  bool is_root = geteuid() == 0;
  std::map<uint64_t, std::pair<int, std::string>> links;  // link group -> (dirfd, name) of the first
  // Directories are closed once written, except those holding the first name of a link group
  // (later names are linked from it), so the number of open descriptors stays small.
  std::vector<int> open_dirs;
  // The Commit says how many entries its tree holds (verify checks it): a tree that holds more
  // (a crafted one of a few trees that names 2^60 paths) stops here instead of filling the disk.
  uint64_t written = 0;
  // Returns in *keep whether `dfd` must stay open for later links.
  std::function<Status(int, const std::string&, const ObjectId&, bool*, size_t)> write_dir =
      [&](int dfd, const std::string& path, const ObjectId& tree, bool* keep, size_t depth) -> Status {
    if (depth > objects::kMaxTreeDepth)
      return Status::Corrupt(fmt::format("{}: directories nested deeper than {}", path, objects::kMaxTreeDepth));
    LFS_ASSIGN(auto entries, ReadTree(tree));
    for (const auto& e : entries) {
      std::string p = path + "/" + e.name;
      if (++written > c.files)
        return Status::Corrupt(fmt::format("{}: the tree holds more entries than its commit's {}", p, c.files));
      const char* n = e.name.c_str();
      meter.state().objects++;
      if (e.type == EntryType::kFile) meter.state().bytes += e.size;
      meter.Update();
      timespec times[2] = {{0, UTIME_OMIT}, {e.mtime_sec, static_cast<long>(e.mtime_nsec)}};
      if (e.link_group && e.type != EntryType::kDir) {
        auto it = links.find(e.link_group);
        if (it != links.end()) {
          if (linkat(it->second.first, it->second.second.c_str(), dfd, n, 0) != 0) return Err("link", p);
          continue;
        }
        links[e.link_group] = {dfd, e.name};
        *keep = true;
      }
      switch (e.type) {
        case EntryType::kDir: {
          if (mkdirat(dfd, n, 0700) != 0) return Err("create", p);
          int sub = openat(dfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub < 0) return Err("open", p);
          bool keep_sub = false;
          Status ws = write_dir(sub, p, e.id, &keep_sub, depth + 1);
          if (keep_sub) open_dirs.push_back(sub);
          else close(sub);
          LFS_TRY(ws);
          break;
        }
        case EntryType::kFile: {
          int fd = openat(dfd, n, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
          if (fd < 0) return Err("create", p);
          // Piecewise (a chunked file a chunk at a time); runs of zeros become holes.
          uint64_t off = 0;
          auto sink = [&](std::string_view d) -> Status {
            Status ws = AllZero(d) ? Status::Ok() : WriteAllAt(fd, d, off, p);
            off += d.size();
            return ws;
          };
          auto n_read = history::ReadContentTo(objects(), e.id, e.chunked, sink);
          Status s = n_read.ok() ? Status::Ok() : n_read.status().Context(p);
          if (s.ok() && *n_read != e.size) s = Status::Corrupt(fmt::format("{}: size does not match its entry", p));
          if (s.ok() && ftruncate(fd, static_cast<off_t>(e.size)) != 0) s = Err("truncate", p);
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
      // A directory is complete here (its children were written above), so its mtime holds.
      if (utimensat(dfd, n, times, AT_SYMLINK_NOFOLLOW) != 0) return Err("set times on", p);
    }
    return Status::Ok();
  };
  bool keep_root = false;
  Status s = write_dir(root, dir, c.root, &keep_root, 0);
  if (s.ok() && written != c.files)
    s = Status::Corrupt(fmt::format("commit {} declares {} entries, its tree holds {}", commit.Hex().substr(0, 12),
                                    c.files, written));
  for (int fd : open_dirs) close(fd);
  close(root);
  if (s.ok()) meter.Done();
  return s;
}

}  // namespace layerfs
