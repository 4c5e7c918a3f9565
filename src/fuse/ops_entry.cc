// Names and inode attributes: lookup, forget, getattr, setattr, mknod, mkdir, symlink, link,
// unlink, rmdir, rename, readlink.
#include <stdio.h>  // RENAME_EXCHANGE

#include "fuse/ops_table.h"

namespace layerfs::fuse {
namespace {

// The kernel has applied the umask unless FUSE_CAP_DONT_MASK is set; applying it again is a
// no-op then, and correct if it ever is set.
uint32_t Masked(fuse_req_t req, mode_t mode) {
  return (mode & S_IFMT) | (mode & 07777 & ~fuse_req_ctx(req)->umask);
}

int NoteDir(Adapter& ad, Ino parent, const workspace::Attr& a) {
  if (S_ISDIR(a.mode)) ad.SetParent(a.ino, parent);
  return 0;
}

// A directory moved to another parent: its ".." changed, and a listing the kernel cached for it
// (fi->cache_readdir) would still name the old one. The kernel drops a cached listing when the
// directory itself changes, which a move does not count as; so drop it here (the moved inode's
// pages only: no directory lock is taken, so the rename the kernel holds locks for cannot wait
// on it).
void MovedDir(Adapter& ad, Ino parent, const workspace::Attr& a) {
  if (!S_ISDIR(a.mode)) return;
  ad.SetParent(a.ino, parent);
  if (ad.cache_dirs && ad.se != nullptr) (void)fuse_lowlevel_notify_inval_inode(ad.se, a.ino, 0, 0);
}

int DoLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Adapter& ad = Ctx(req, Op::kLookup);
  auto a = ad.ws->Lookup(parent, name);
  if (!a.ok() && a.status().code() == ENOENT) {
    // A negative entry the kernel may cache for the entry timeout, as it caches positive ones:
    // a name missed again (a compiler's include search, a module resolver's probes) costs no
    // round trip (measured: 3 x 1,000 stats of missing names, 3,000 -> 1,000 requests). O_EXCL
    // creates still look up again (the kernel revalidates for them). Every change of this
    // namespace comes through this mount (a reset remounts), which updates the cached entry.
    fuse_entry_param e{};
    e.ino = 0;
    e.entry_timeout = ad.timeout;
    fuse_reply_entry(req, &e);
    return 0;
  }
  if (!a.ok()) return ErrnoAt(ad, parent, fmt::format("lookup of '{}' in", name), a.status());
  NoteDir(ad, parent, *a);
  return ReplyEntry(ad, req, *a);
}

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) noexcept {
  Run(req, [&] { return DoLookup(req, parent, name); });
}

void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) noexcept {
  try {
    Ctx(req, Op::kForget).Forget(ino, nlookup);
  } catch (...) {
  }
  fuse_reply_none(req);  // forget has no reply but must release the request
}

void ForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) noexcept {
  try {
    Adapter& ad = Ctx(req, Op::kBatchForget);
    for (size_t i = 0; i < count; ++i) ad.Forget(forgets[i].ino, forgets[i].nlookup);
  } catch (...) {
  }
  fuse_reply_none(req);
}

void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) noexcept {
  Run(req, [&] {
    auto a = Ctx(req, Op::kGetattr).ws->GetAttr(ino);
    if (!a.ok()) return Errno(a.status());
    return ReplyAttr(req, *a);
  });
}

int DoSetAttr(fuse_req_t req, fuse_ino_t ino, const struct stat* attr, int to_set) {
  workspace::AttrChange ch;
  if (to_set & FUSE_SET_ATTR_MODE) ch.mode = attr->st_mode & 07777;
  if (to_set & FUSE_SET_ATTR_UID) ch.uid = attr->st_uid;
  if (to_set & FUSE_SET_ATTR_GID) ch.gid = attr->st_gid;
  if (to_set & FUSE_SET_ATTR_SIZE) {
    if (attr->st_size < 0) return EINVAL;
    ch.size = static_cast<uint64_t>(attr->st_size);
  }
  if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW)) {
    const timespec now = Now();
    if (to_set & FUSE_SET_ATTR_ATIME_NOW) ch.atime = now;
    else if (to_set & FUSE_SET_ATTR_ATIME) ch.atime = attr->st_atim;
    if (to_set & FUSE_SET_ATTR_MTIME_NOW) ch.mtime = now;
    else if (to_set & FUSE_SET_ATTR_MTIME) ch.mtime = attr->st_mtim;
  }
  if (to_set & FUSE_SET_ATTR_CTIME) ch.ctime = attr->st_ctim;  // the kernel's, under writeback cache
  if (UringTransport::KillSuidgidAsked()) ch.kill_suidgid = CallerOf(req);
  auto a = Ctx(req, Op::kSetattr).ws->SetAttr(ino, ch);
  if (!a.ok()) return Errno(a.status());
  return ReplyAttr(req, *a);
}

void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) noexcept {
  Run(req, [&] { return DoSetAttr(req, ino, attr, to_set); });
}

void Mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) noexcept {
  Run(req, [&] {
    Adapter& ad = Ctx(req, Op::kMknod);
    auto a = ad.ws->Mknod(parent, name, Masked(req, mode), rdev, CallerOf(req));
    if (!a.ok()) return Errno(a.status());
    return ReplyEntry(ad, req, *a);
  });
}

void Mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) noexcept {
  Run(req, [&] {
    Adapter& ad = Ctx(req, Op::kMkdir);
    auto a = ad.ws->Mkdir(parent, name, Masked(req, mode) & 07777, CallerOf(req));
    if (!a.ok()) return Errno(a.status());
    NoteDir(ad, parent, *a);
    return ReplyEntry(ad, req, *a);
  });
}

void Symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) noexcept {
  Run(req, [&] {
    Adapter& ad = Ctx(req, Op::kSymlink);
    auto a = ad.ws->Symlink(parent, name, link, CallerOf(req));
    if (!a.ok()) return Errno(a.status());
    return ReplyEntry(ad, req, *a);
  });
}

void Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) noexcept {
  Run(req, [&] {
    Adapter& ad = Ctx(req, Op::kLink);
    auto a = ad.ws->Link(ino, newparent, newname);
    if (!a.ok()) return Errno(a.status());
    return ReplyEntry(ad, req, *a);
  });
}

void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) noexcept {
  Run(req, [&] {
    Status s = Ctx(req, Op::kUnlink).ws->Unlink(parent, name);
    if (!s.ok()) return Errno(s);
    fuse_reply_err(req, 0);
    return 0;
  });
}

void Rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) noexcept {
  Run(req, [&] {
    Status s = Ctx(req, Op::kRmdir).ws->Rmdir(parent, name);
    if (!s.ok()) return Errno(s);
    fuse_reply_err(req, 0);
    return 0;
  });
}

int DoRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
             unsigned flags) {
  Adapter& ad = Ctx(req, Op::kRename);
  Status s = ad.ws->Rename(parent, name, newparent, newname, flags);
  if (!s.ok()) return Errno(s);
  if (parent != newparent) {  // keep ".." of moved directories right
    if (auto a = ad.ws->Lookup(newparent, newname); a.ok()) MovedDir(ad, newparent, *a);
    if (flags & RENAME_EXCHANGE) {
      if (auto a = ad.ws->Lookup(parent, name); a.ok()) MovedDir(ad, parent, *a);
    }
  }
  fuse_reply_err(req, 0);
  return 0;
}

void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
            unsigned flags) noexcept {
  Run(req, [&] { return DoRename(req, parent, name, newparent, newname, flags); });
}

void Readlink(fuse_req_t req, fuse_ino_t ino) noexcept {
  Run(req, [&] {
    auto t = Ctx(req, Op::kReadlink).ws->Readlink(ino);
    if (!t.ok()) return Errno(t.status());
    fuse_reply_readlink(req, t->c_str());
    return 0;
  });
}

}  // namespace

void AddEntryOps(fuse_lowlevel_ops& ops) {
  ops.lookup = Lookup;
  ops.forget = Forget;
  ops.forget_multi = ForgetMulti;
  ops.getattr = GetAttr;
  ops.setattr = SetAttr;
  ops.mknod = Mknod;
  ops.mkdir = Mkdir;
  ops.symlink = Symlink;
  ops.link = Link;
  ops.unlink = Unlink;
  ops.rmdir = Rmdir;
  ops.rename = Rename;
  ops.readlink = Readlink;
}

}  // namespace layerfs::fuse
