// Open files: open, create, read, write, write_buf, flush, release, fsync, fallocate, lseek,
// copy_file_range.
// Locks (flock, fcntl) are not implemented, so the kernel keeps them locally.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

#include "fuse/ops_table.h"
#include "kv/data_log.h"

namespace layerfs::fuse {
namespace {

// A READ this large is readahead of a file read in order (the kernel sends smaller ones for
// random reads). The kernel keeps what it returns in the mount's page cache, so the host's copy
// of those data log ranges is a second one: once replied, it goes, and the next readahead reuses
// warm pages instead of touching fresh memory (docs/design.md, "Reads drop what they read").
constexpr size_t kStreamingRead = 128 << 10;

void DropStreamed(size_t size, const workspace::ReadReply& r) {
  if (size < kStreamingRead) return;
  for (const auto& p : r.pieces) {
    if (p.fd >= 0) kv::DataLog::DropReadBehind(p.fd, p.offset, p.length);
  }
}

// A read that failed: damaged data (EIO) is logged with the file's path in the mount and the
// Store file at fault (the message names it), so the log says what to restore or delete.
int ReadFailed(Adapter& ad, fuse_ino_t ino, off_t off, const Status& s) {
  return ErrnoAt(ad, ino, fmt::format("read at offset {}", off), s);
}

// Page cache kept across opens. Every write and truncate comes through the kernel, which keeps
// its pages current; a change made in place by the daemon (a merge, a file verb) invalidates
// the inode's pages, and auto_inval_data drops them when a fresh mtime or size differs.
void SetOpenFlags(const Adapter& ad, fuse_file_info* fi) {
  fi->keep_cache = ad.keep_cache_writers || ((fi->flags & O_ACCMODE) == O_RDONLY && !(fi->flags & O_TRUNC));
  fi->direct_io = 0;
  // Flush has nothing to do (writes are in the Workspace when they are answered), so close()
  // skips that round trip. Dirty pages of a shared mmap are written back by the kernel as
  // usual, and at the latest by sync, msync or munmap.
  fi->noflush = 1;
  fi->fh = 0;
}

int DoOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Adapter& ad = Ctx(req, Op::kOpen);
  auto a = ad.ws->GetAttr(ino);
  if (!a.ok()) return Errno(a.status());
  if (S_ISDIR(a->mode)) return EISDIR;
  // O_TRUNC arrives as a separate setattr (atomic_o_trunc is off); O_APPEND is the kernel's.
  SetOpenFlags(ad, fi);
  ad.open_handles.fetch_add(1);
  ad.AddWriter(ino, fi->flags);
  if (fuse_reply_open(req, fi) != 0) {
    ad.open_handles.fetch_sub(1);
    ad.DropWriter(ino, fi->flags);
  }
  return 0;
}

void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) noexcept {
  Run(req, [&] { return DoOpen(req, ino, fi); });
}

int DoCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  Adapter& ad = Ctx(req, Op::kCreate);
  const uint32_t perm = mode & 07777 & ~fuse_req_ctx(req)->umask;
  auto a = ad.ws->Mknod(parent, name, S_IFREG | perm, 0, CallerOf(req));
  if (!a.ok() && a.status().code() == EEXIST && !(fi->flags & O_EXCL)) {
    // Created by someone else since the kernel's lookup: open the existing file.
    a = ad.ws->Lookup(parent, name);
    if (a.ok() && S_ISDIR(a->mode)) return EISDIR;
    if (a.ok() && (fi->flags & O_TRUNC) && a->size != 0) {
      workspace::AttrChange ch;
      ch.size = 0;
      a = ad.ws->SetAttr(a->ino, ch);
    }
  }
  if (!a.ok()) return Errno(a.status());
  SetOpenFlags(ad, fi);
  return ReplyCreate(ad, req, *a, fi);
}

void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) noexcept {
  Run(req, [&] { return DoCreate(req, parent, name, mode, fi); });
}

void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) noexcept {
  Run(req, [&] {
    if (off < 0) return EINVAL;
    Adapter& ad = Ctx(req, Op::kRead);
    auto r = ad.ws->ReadPieces(ino, static_cast<uint64_t>(off), size);
    if (!r.ok()) return ReadFailed(ad, ino, off, r.status());
    if (r->pieces.empty()) {
      fuse_reply_buf(req, nullptr, 0);
      return 0;
    }
    if (r->pieces.size() == 1 && r->pieces[0].fd < 0) {
      fuse_reply_buf(req, r->pieces[0].bytes.data(), r->pieces[0].bytes.size());
      return 0;
    }
    // Data-log blocks: read and checked block by block (Workspace::FillRead), straight into the
    // io_uring entry's reply buffer when served from one, else into memory. (They were spliced
    // before the blocks had checksums: a spliced byte is never seen, so never checked.)
    std::string storage;
    char* dst = UringTransport::ReplyBuffer(r->size);
    if (!dst) {
      storage.resize(r->size);
      dst = storage.data();
    }
    Status s = ad.ws->FillRead(*r, dst);
    if (!s.ok()) return ReadFailed(ad, ino, off, s);
    fuse_reply_buf(req, dst, r->size);
    DropStreamed(size, *r);
    return 0;
  });
}

int DoWrite(fuse_req_t req, fuse_ino_t ino, std::string_view data, off_t off) {
  if (off < 0) return EINVAL;
  Adapter& ad = Ctx(req, Op::kWrite);
  bool killed = false;
  std::optional<workspace::Caller> kill;
  if (UringTransport::KillSuidgidAsked()) kill = CallerOf(req);
  auto n = ad.ws->Write(ino, static_cast<uint64_t>(off), data, kill, &killed);
  if (!n.ok()) return Errno(n.status());
  // The kernel keeps the mode it had (a write only refreshes size and times): make it ask again.
  // Attributes only, no pages, so it takes no lock the writer holds.
  if (killed && ad.se != nullptr) (void)fuse_lowlevel_notify_inval_inode(ad.se, ino, -1, 0);
  fuse_reply_write(req, *n);
  return 0;
}

void Write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, fuse_file_info*) noexcept {
  Run(req, [&] { return DoWrite(req, ino, std::string_view(buf, size), off); });
}

int DoWriteBuf(fuse_req_t req, fuse_ino_t ino, fuse_bufvec* in, off_t off) {
  const size_t size = fuse_buf_size(in);
  const fuse_buf& first = in->buf[in->idx];
  if (in->count - in->idx == 1 && !(first.flags & FUSE_BUF_IS_FD)) {
    return DoWrite(req, ino, std::string_view(static_cast<const char*>(first.mem) + in->off, size), off);
  }
  std::string data(size, '\0');  // a pipe or several pieces: gather into memory
  fuse_bufvec dst = FUSE_BUFVEC_INIT(size);
  dst.buf[0].mem = data.data();
  ssize_t got = fuse_buf_copy(&dst, in, fuse_buf_copy_flags{});
  if (got < 0) return static_cast<int>(-got);
  data.resize(static_cast<size_t>(got));
  return DoWrite(req, ino, data, off);
}

void WriteBuf(fuse_req_t req, fuse_ino_t ino, fuse_bufvec* in, off_t off, fuse_file_info*) noexcept {
  Run(req, [&] { return DoWriteBuf(req, ino, in, off); });
}

void Flush(fuse_req_t req, fuse_ino_t, fuse_file_info*) noexcept {
  Ctx(req, Op::kFlush);
  fuse_reply_err(req, 0);  // writes are already in the Workspace
}

void Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) noexcept {
  Adapter& ad = Ctx(req, Op::kRelease);
  ad.open_handles.fetch_sub(1);
  ad.DropWriter(ino, fi->flags);
  fuse_reply_err(req, 0);
}

void Fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info*) noexcept {
  Run(req, [&] {
    Status s = Ctx(req, Op::kFsync).ws->Fsync(ino, datasync != 0);
    if (!s.ok()) return Errno(s);
    fuse_reply_err(req, 0);
    return 0;
  });
}

void Fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, fuse_file_info*) noexcept {
  Run(req, [&] {
    if (off < 0 || len <= 0) return EINVAL;
    Status s = Ctx(req, Op::kFallocate).ws->Fallocate(ino, mode, static_cast<uint64_t>(off), static_cast<uint64_t>(len));
    if (!s.ok()) return Errno(s);
    fuse_reply_err(req, 0);
    return 0;
  });
}

// The kernel resolves SEEK_SET, SEEK_CUR and SEEK_END itself and sends only SEEK_DATA and
// SEEK_HOLE; the others are answered as the kernel would, in case one arrives.
int DoLseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence) {
  Adapter& ad = Ctx(req, Op::kLseek);
  if (off < 0 && whence != SEEK_END) return EINVAL;
  switch (whence) {
    case SEEK_DATA:
    case SEEK_HOLE: {
      auto r = ad.ws->Lseek(ino, static_cast<uint64_t>(off), whence);
      if (!r.ok()) return Errno(r.status());
      fuse_reply_lseek(req, static_cast<off_t>(*r));
      return 0;
    }
    case SEEK_SET:
      fuse_reply_lseek(req, off);
      return 0;
    case SEEK_END: {
      auto a = ad.ws->GetAttr(ino);
      if (!a.ok()) return Errno(a.status());
      const off_t pos = static_cast<off_t>(a->size) + off;
      if (pos < 0) return EINVAL;
      fuse_reply_lseek(req, pos);
      return 0;
    }
    default:
      return EINVAL;
  }
}

void Lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, fuse_file_info*) noexcept {
  Run(req, [&] { return DoLseek(req, ino, off, whence); });
}

// copy_file_range(2) between two files of this mount (cp, install, Rust's fs::copy): served in
// the daemon, one request instead of the READs and WRITEs the kernel's own copy would send; a
// committed file copied whole costs no bytes at all (Workspace::CopyRange). The kernel has
// checked the descriptors, the ranges and the limits, dropped setuid/setgid of the target
// (file_modified) and, once answered, drops the target's cached pages over the range and
// refreshes its size and times.
void CopyFileRange(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, fuse_file_info*, fuse_ino_t ino_out,
                   off_t off_out, fuse_file_info*, size_t len, int flags) noexcept {
  Run(req, [&] {
    Adapter& ad = Ctx(req, Op::kCopyFileRange);
    if (!ad.copy_range) return ENOSYS;
    if (flags != 0 || off_in < 0 || off_out < 0) return EINVAL;
    auto n = ad.ws->CopyRange(ino_in, static_cast<uint64_t>(off_in), ino_out, static_cast<uint64_t>(off_out), len);
    if (!n.ok()) return Errno(n.status());
    fuse_reply_write(req, static_cast<size_t>(*n));
    return 0;
  });
}

}  // namespace

void AddFileOps(fuse_lowlevel_ops& ops) {
  ops.open = Open;
  ops.create = Create;
  ops.read = Read;
  ops.write = Write;
  ops.write_buf = WriteBuf;
  ops.flush = Flush;
  ops.release = Release;
  ops.fsync = Fsync;
  ops.fallocate = Fallocate;
  ops.lseek = Lseek;
  ops.copy_file_range = CopyFileRange;
}

}  // namespace layerfs::fuse
