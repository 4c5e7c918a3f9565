// Directories: opendir, readdir, readdirplus, releasedir, fsyncdir.
//
// An open directory holds a listing taken when reading starts at offset 0 (so rewinddir sees
// changes); an entry's offset is its index + 1 in that listing, stable across calls.
#include <memory>
#include <string>
#include <vector>

#include "fuse/ops_table.h"

namespace layerfs::fuse {
namespace {

struct DirHandle {
  std::mutex mu;
  bool loaded = false;
  std::vector<workspace::DirEntry> entries;  // ".", "..", then the Workspace's
};

DirHandle* HandleOf(const fuse_file_info* fi) { return reinterpret_cast<DirHandle*>(fi->fh); }

int Load(Adapter& ad, Ino ino, DirHandle& h) {
  auto list = ad.ws->ReadDir(ino);
  if (!list.ok()) return ErrnoAt(ad, ino, "readdir", list.status());
  h.entries.clear();
  h.entries.reserve(list->size() + 2);
  h.entries.push_back({".", ino, S_IFDIR});
  h.entries.push_back({"..", ad.ParentOf(ino), S_IFDIR});
  for (auto& e : *list) h.entries.push_back(std::move(e));
  h.loaded = true;
  return 0;
}

bool IsDot(const std::string& n) { return n == "." || n == ".."; }

int DoOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Adapter& ad = Ctx(req, Op::kOpendir);
  auto a = ad.ws->GetAttr(ino);
  if (!a.ok()) return Errno(a.status());
  if (!S_ISDIR(a->mode)) return ENOTDIR;
  auto h = std::make_unique<DirHandle>();
  fi->fh = reinterpret_cast<uint64_t>(h.get());
  // The kernel may keep the listing in its page cache and serve the next opendir/readdir of the
  // directory from it: it drops it itself when an entry is made or removed through the mount,
  // and a change made in place by the daemon invalidates the directory's inode.
  fi->cache_readdir = ad.cache_dirs;
  fi->keep_cache = ad.cache_dirs;
  ad.open_handles.fetch_add(1);
  if (fuse_reply_open(req, fi) != 0) {
    ad.open_handles.fetch_sub(1);
    return 0;  // the kernel will not release it; h is freed here
  }
  h.release();  // owned by the kernel's handle until releasedir
  return 0;
}

void Opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) noexcept {
  Run(req, [&] { return DoOpendir(req, ino, fi); });
}

int DoReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi, bool plus) {
  Adapter& ad = Ctx(req, plus ? Op::kReaddirplus : Op::kReaddir);
  DirHandle& h = *HandleOf(fi);
  std::unique_lock lock(h.mu);
  if (off < 0) return EINVAL;
  if (off == 0 || !h.loaded) {
    if (int err = Load(ad, ino, h)) return err;
  }
  std::string buf(size, '\0');
  size_t used = 0;
  std::vector<Ino> counted;  // entries the kernel will hold a lookup on (readdirplus)
  for (size_t i = static_cast<size_t>(off); i < h.entries.size(); ++i) {
    const workspace::DirEntry& d = h.entries[i];
    const off_t next = static_cast<off_t>(i + 1);
    size_t n;
    if (!plus) {
      struct stat st {};
      st.st_ino = d.ino;
      st.st_mode = d.mode;
      n = fuse_add_direntry(req, buf.data() + used, size - used, d.name.c_str(), &st, next);
    } else {
      fuse_entry_param e{};
      if (IsDot(d.name)) {
        e.attr.st_ino = d.ino;  // ino 0: the kernel makes no dentry and counts no lookup
        e.attr.st_mode = d.mode;
      } else {
        auto a = ad.ws->GetAttr(d.ino);
        if (!a.ok()) continue;  // removed since the listing was taken
        e.ino = a->ino;
        e.attr = ToStat(*a);
        e.attr_timeout = ad.timeout;
        e.entry_timeout = ad.timeout;
      }
      n = fuse_add_direntry_plus(req, buf.data() + used, size - used, d.name.c_str(), &e, next);
      if (n <= size - used && e.ino != 0) {
        ad.AddLookup(e.ino, 1);
        counted.push_back(e.ino);
        if (S_ISDIR(e.attr.st_mode)) ad.SetParent(e.ino, ino);
      }
    }
    if (n > size - used) break;
    used += n;
  }
  // Unlocked before the reply: once it is sent, the kernel may release the handle (and another
  // thread free it) while we would still hold its mutex.
  lock.unlock();
  if (fuse_reply_buf(req, buf.data(), used) != 0) {
    for (Ino c : counted) ad.Forget(c, 1);
  }
  return 0;
}

void Readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) noexcept {
  Run(req, [&] { return DoReaddir(req, ino, size, off, fi, false); });
}

void Readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) noexcept {
  Run(req, [&] { return DoReaddir(req, ino, size, off, fi, true); });
}

void Releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) noexcept {
  delete HandleOf(fi);
  Ctx(req, Op::kReleasedir).open_handles.fetch_sub(1);
  fuse_reply_err(req, 0);
}

void Fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info*) noexcept {
  Run(req, [&] {
    Status s = Ctx(req, Op::kFsyncdir).ws->Fsync(ino, datasync != 0);
    if (!s.ok()) return Errno(s);
    fuse_reply_err(req, 0);
    return 0;
  });
}

}  // namespace

void AddDirOps(fuse_lowlevel_ops& ops) {
  ops.opendir = Opendir;
  ops.readdir = Readdir;
  ops.readdirplus = Readdirplus;
  ops.releasedir = Releasedir;
  ops.fsyncdir = Fsyncdir;
}

}  // namespace layerfs::fuse
