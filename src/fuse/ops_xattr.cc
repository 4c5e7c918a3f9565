// Extended attributes (setxattr, getxattr, listxattr, removexattr) and statfs.
//
// getxattr and listxattr follow the size probe protocol: size 0 asks for the length; a buffer
// too small for the value is ERANGE.
#include <string>

#include "fuse/ops_table.h"

namespace layerfs::fuse {
namespace {

int ReplySized(fuse_req_t req, const std::string& value, size_t size) {
  if (size == 0) {
    fuse_reply_xattr(req, value.size());
    return 0;
  }
  if (value.size() > size) return ERANGE;
  fuse_reply_buf(req, value.data(), value.size());
  return 0;
}

void SetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
              int flags) noexcept {
  Run(req, [&] {
    Status s = Ctx(req, Op::kSetxattr).ws->SetXattr(ino, name, std::string_view(value, size), flags);
    if (!s.ok()) return Errno(s);
    fuse_reply_err(req, 0);
    return 0;
  });
}

void GetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) noexcept {
  Run(req, [&] {
    auto v = Ctx(req, Op::kGetxattr).ws->GetXattr(ino, name);
    if (!v.ok()) return Errno(v.status());
    return ReplySized(req, *v, size);
  });
}

void ListXattr(fuse_req_t req, fuse_ino_t ino, size_t size) noexcept {
  Run(req, [&] {
    auto names = Ctx(req, Op::kListxattr).ws->ListXattr(ino);
    if (!names.ok()) return Errno(names.status());
    std::string packed;  // NUL-terminated names, back to back
    for (const std::string& n : *names) {
      packed += n;
      packed.push_back('\0');
    }
    return ReplySized(req, packed, size);
  });
}

void RemoveXattr(fuse_req_t req, fuse_ino_t ino, const char* name) noexcept {
  Run(req, [&] {
    Status s = Ctx(req, Op::kRemovexattr).ws->RemoveXattr(ino, name);
    if (!s.ok()) return Errno(s);
    fuse_reply_err(req, 0);
    return 0;
  });
}

void Statfs(fuse_req_t req, fuse_ino_t) noexcept {
  Run(req, [&] {
    auto st = Ctx(req, Op::kStatfs).ws->Statfs();
    if (!st.ok()) return Errno(st.status());
    fuse_reply_statfs(req, &*st);
    return 0;
  });
}

}  // namespace

void AddXattrOps(fuse_lowlevel_ops& ops) {
  ops.setxattr = SetXattr;
  ops.getxattr = GetXattr;
  ops.listxattr = ListXattr;
  ops.removexattr = RemoveXattr;
  ops.statfs = Statfs;
}

}  // namespace layerfs::fuse
