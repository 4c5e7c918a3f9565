#include "workspace/inode.h"

#include "history/keys.h"

namespace layerfs::workspace {

std::string Keys::history_end(std::string p) { return history::PrefixEnd(std::move(p)); }

uint32_t TypeBits(EntryType t) {
  switch (t) {
    case EntryType::kFile: return S_IFREG;
    case EntryType::kDir: return S_IFDIR;
    case EntryType::kSymlink: return S_IFLNK;
    case EntryType::kChar: return S_IFCHR;
    case EntryType::kBlock: return S_IFBLK;
    case EntryType::kFifo: return S_IFIFO;
    case EntryType::kSocket: return S_IFSOCK;
  }
  return S_IFREG;
}

EntryType TypeFromMode(uint32_t mode) {
  switch (mode & S_IFMT) {
    case S_IFDIR: return EntryType::kDir;
    case S_IFLNK: return EntryType::kSymlink;
    case S_IFCHR: return EntryType::kChar;
    case S_IFBLK: return EntryType::kBlock;
    case S_IFIFO: return EntryType::kFifo;
    case S_IFSOCK: return EntryType::kSocket;
    default: return EntryType::kFile;
  }
}

uint32_t Inode::ModeBits() const { return TypeBits(type) | perm; }

Attr Inode::ToAttr() const {
  Attr a;
  a.ino = ino;
  a.mode = ModeBits();
  a.nlink = nlink;
  a.uid = uid;
  a.gid = gid;
  a.size = is_dir() ? 4096 : size;
  a.holes_only = type == EntryType::kFile && !has_origin && !has_blocks && !has_refs && !has_overlays;
  a.rdev = rdev;
  a.atime = atime;
  a.mtime = mtime;
  a.ctime = ctime;
  return a;
}

static void PutTime(std::string* s, const timespec& t) {
  base::PutSVarint(s, t.tv_sec);
  base::PutVarint(s, static_cast<uint64_t>(t.tv_nsec));
}

static bool GetTime(base::Reader& r, timespec* t) {
  int64_t sec;
  uint64_t nsec;
  if (!r.SVarint(&sec) || !r.Varint(&nsec) || nsec >= 1000000000) return false;
  t->tv_sec = sec;
  t->tv_nsec = static_cast<long>(nsec);
  return true;
}

// FORMAT (inode, version 1): u8 version, u8 type, varint perm, uid, gid, nlink, size, rdev,
//   atime, mtime, ctime (svarint sec, varint nsec), u8 flags (1 materialized, 2 has_blocks,
//   4 has_origin, 8 origin_chunked, 16 has_refs, 32 counter_numbered, 64 count_known,
//   128 has_overlays), [16-byte origin],
//   varint valid_len, origin_size, bytes target,
//   varint xattr count, (bytes, bytes)*, varint parent count, varint parents.
std::string EncodeInode(const Inode& n) {
  std::string s;
  base::PutU8(&s, 1);
  base::PutU8(&s, static_cast<uint8_t>(n.type));
  for (uint64_t v : {uint64_t{n.perm}, uint64_t{n.uid}, uint64_t{n.gid}, uint64_t{n.nlink}, n.size, n.rdev})
    base::PutVarint(&s, v);
  PutTime(&s, n.atime);
  PutTime(&s, n.mtime);
  PutTime(&s, n.ctime);
  uint8_t flags = (n.materialized ? 1 : 0) | (n.has_blocks ? 2 : 0) | (n.has_origin ? 4 : 0) |
                  (n.origin_chunked ? 8 : 0) | (n.has_refs ? 16 : 0) |
                  (n.counter_numbered ? 32 : 0) | (n.count_known ? 64 : 0) | (n.has_overlays ? 128 : 0);
  base::PutU8(&s, flags);
  if (n.has_origin) s.append(n.origin.AsKey());
  base::PutVarint(&s, n.valid_len);
  base::PutVarint(&s, n.origin_size);
  base::PutBytes(&s, n.target);
  base::PutVarint(&s, n.xattrs.size());
  for (const auto& [k, v] : n.xattrs) {
    base::PutBytes(&s, k);
    base::PutBytes(&s, v);
  }
  base::PutVarint(&s, n.parents.size());
  for (Ino p : n.parents) base::PutVarint(&s, p);
  return s;
}

Result<Inode> DecodeInode(Ino ino, std::string_view v) {
  base::Reader r(v);
  Inode n;
  n.ino = ino;
  uint8_t ver, type, flags;
  uint64_t perm, uid, gid, nlink, nx, np;
  std::string_view target;
  if (!r.U8(&ver) || ver != 1 || !r.U8(&type) || type < 1 || type > 7 || !r.Varint(&perm) ||
      !r.Varint(&uid) || !r.Varint(&gid) || !r.Varint(&nlink) || !r.Varint(&n.size) || !r.Varint(&n.rdev) ||
      !GetTime(r, &n.atime) || !GetTime(r, &n.mtime) || !GetTime(r, &n.ctime) || !r.U8(&flags))
    return Status::Corrupt(fmt::format("inode {}: damaged record", ino));
  n.type = static_cast<EntryType>(type);
  n.perm = static_cast<uint32_t>(perm & 07777);
  n.uid = static_cast<uint32_t>(uid);
  n.gid = static_cast<uint32_t>(gid);
  n.nlink = static_cast<uint32_t>(nlink);
  n.materialized = flags & 1;
  n.has_blocks = flags & 2;
  n.has_origin = flags & 4;
  n.origin_chunked = flags & 8;
  n.has_refs = flags & 16;
  n.counter_numbered = flags & 32;
  n.count_known = flags & 64;
  n.has_overlays = flags & 128;
  if (n.has_origin) {
    std::string_view id;
    if (!r.Raw(ObjectId::kSize, &id)) return Status::Corrupt(fmt::format("inode {}: damaged record", ino));
    n.origin = ObjectId::FromKey(id);
  }
  if (!r.Varint(&n.valid_len) || !r.Varint(&n.origin_size) || !r.Bytes(&target) || !r.Varint(&nx) || nx > v.size())
    return Status::Corrupt(fmt::format("inode {}: damaged record", ino));
  n.target = target;
  for (uint64_t i = 0; i < nx; i++) {
    std::string_view k, val;
    if (!r.Bytes(&k) || !r.Bytes(&val)) return Status::Corrupt(fmt::format("inode {}: damaged xattrs", ino));
    n.xattrs.emplace_back(k, val);
  }
  if (!r.Varint(&np) || np > v.size()) return Status::Corrupt(fmt::format("inode {}: damaged record", ino));
  for (uint64_t i = 0; i < np; i++) {
    uint64_t p;
    if (!r.Varint(&p)) return Status::Corrupt(fmt::format("inode {}: damaged parents", ino));
    n.parents.push_back(p);
  }
  return n;
}

}  // namespace layerfs::workspace
