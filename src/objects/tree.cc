#include "objects/tree.h"

#include <climits>
#include <cstdint>

#include "base/coding.h"

namespace layerfs::objects {

using base::PutBytes;
using base::PutU8;
using base::PutVarint;

bool ValidName(std::string_view n) {
  return !n.empty() && n.size() <= 255 && n != "." && n != ".." &&
         n.find('/') == std::string_view::npos && n.find('\0') == std::string_view::npos;
}

void SummarizeDir(const std::vector<TreeEntry>& entries, TreeEntry* dir) {
  dir->summary = true;
  dir->subdirs = 0;
  dir->links_below = false;
  for (const auto& e : entries) {
    if (e.type == EntryType::kDir) {
      dir->subdirs++;
      dir->summary &= e.summary;
      dir->links_below |= e.links_below;
    } else {
      dir->links_below |= e.link_group != 0;
    }
  }
  if (!dir->summary) {
    dir->subdirs = 0;
    dir->links_below = false;
  }
}

bool ValidXattrName(std::string_view n) {
  return n.size() > 5 && n.size() <= 255 && n.substr(0, 5) == "user." && n.find('\0') == std::string_view::npos;
}

// FORMAT (tree, version 1): varint count, then per entry:
//   bytes name, u8 type, varint mode, uid, gid, size, svarint mtime_sec, varint mtime_nsec,
//   varint rdev, varint link_group, u8 flags, varint xattr count, (bytes, bytes)*,
//   then for files: 16-byte id (zero id = empty file); for dirs: 16-byte id, varint
//   subtree_entries (size holds the file bytes below), [varint subdirs if flags & 2]; for
//   symlinks: bytes target.
//   flags: files 1 = chunked; dirs (format 7) 2 = a summary follows (subdirs), 4 = hard links
//   lie below (only with 2). No other bit is set.
std::string EncodeTree(const std::vector<TreeEntry>& entries) {
  std::string s;
  PutVarint(&s, entries.size());
  for (const auto& e : entries) {
    PutBytes(&s, e.name);
    PutU8(&s, static_cast<uint8_t>(e.type));
    PutVarint(&s, e.mode);
    PutVarint(&s, e.uid);
    PutVarint(&s, e.gid);
    PutVarint(&s, e.size);
    base::PutSVarint(&s, e.mtime_sec);
    PutVarint(&s, e.mtime_nsec);
    PutVarint(&s, e.rdev);
    PutVarint(&s, e.link_group);
    uint8_t flags = e.chunked ? 1 : 0;
    if (e.type == EntryType::kDir) flags = e.summary ? (2 | (e.links_below ? 4 : 0)) : 0;
    PutU8(&s, flags);
    PutVarint(&s, e.xattrs.size());
    for (const auto& [k, v] : e.xattrs) {
      PutBytes(&s, k);
      PutBytes(&s, v);
    }
    if (e.type == EntryType::kFile || e.type == EntryType::kDir) s.append(e.id.AsKey());
    if (e.type == EntryType::kDir) {
      PutVarint(&s, e.subtree_entries);
      if (e.summary) PutVarint(&s, e.subdirs);
    } else if (e.type == EntryType::kSymlink) PutBytes(&s, e.target);
  }
  return s;
}

// The smallest encoded entry: a 1-byte name, one byte for each of its 11 scalar fields.
constexpr size_t kMinEntryBytes = 13;

Result<std::vector<TreeEntry>> DecodeTree(std::string_view data) {
  base::Reader r(data);
  uint64_t n;
  if (!r.Varint(&n) || n > data.size() / kMinEntryBytes) return Status::Corrupt("tree: bad entry count");
  std::vector<TreeEntry> out;
  out.reserve(n);
  for (uint64_t i = 0; i < n; i++) {
    TreeEntry e;
    std::string_view name;
    uint8_t type, flags;
    uint64_t mode, uid, gid, size, nsec, rdev, group, nx;
    int64_t sec;
    if (!r.Bytes(&name) || !r.U8(&type) || !r.Varint(&mode) || !r.Varint(&uid) || !r.Varint(&gid) ||
        !r.Varint(&size) || !r.SVarint(&sec) || !r.Varint(&nsec) || !r.Varint(&rdev) ||
        !r.Varint(&group) || !r.U8(&flags) || !r.Varint(&nx) || nx > data.size())
      return Status::Corrupt("tree: truncated entry");
    if (type < 1 || type > 7 || mode > 07777 || nsec >= 1000000000 || uid > UINT32_MAX || gid > UINT32_MAX ||
        size > INT64_MAX)
      return Status::Corrupt("tree: invalid entry fields");
    // Hard links join files, symlinks and special files, never directories.
    if (group != 0 && type == static_cast<uint8_t>(EntryType::kDir))
      return Status::Corrupt("tree: a directory in a hard-link group");
    if (!ValidName(name)) return Status::Corrupt("tree: invalid entry name");
    if (!out.empty() && !(out.back().name < name)) return Status::Corrupt("tree: entries out of order");
    e.name = name;
    e.type = static_cast<EntryType>(type);
    e.mode = static_cast<uint32_t>(mode);
    e.uid = static_cast<uint32_t>(uid);
    e.gid = static_cast<uint32_t>(gid);
    e.size = size;
    e.mtime_sec = sec;
    e.mtime_nsec = static_cast<uint32_t>(nsec);
    e.rdev = rdev;
    e.link_group = group;
    const bool dir = type == static_cast<uint8_t>(EntryType::kDir);
    if (dir ? (flags & ~6) != 0 || flags == 4 : (flags & ~1) != 0) return Status::Corrupt("tree: invalid entry flags");
    e.chunked = !dir && (flags & 1);
    e.summary = dir && (flags & 2);
    e.links_below = dir && (flags & 4);
    for (uint64_t x = 0; x < nx; x++) {
      std::string_view k, v;
      if (!r.Bytes(&k) || !r.Bytes(&v)) return Status::Corrupt("tree: truncated xattr");
      // As a Workspace accepts them: user.* names of at most 255 bytes, sorted and unique, values
      // of at most 64 KiB. Anything else (security.capability, trusted.*) would be set on what
      // export writes, or shown by a mount.
      if (!ValidXattrName(k) || v.size() > kMaxXattrValue || (x > 0 && !(e.xattrs.back().first < k)))
        return Status::Corrupt("tree: invalid extended attribute");
      e.xattrs.emplace_back(k, v);
    }
    if (e.type == EntryType::kFile || e.type == EntryType::kDir) {
      std::string_view id;
      if (!r.Raw(ObjectId::kSize, &id)) return Status::Corrupt("tree: truncated id");
      e.id = ObjectId::FromKey(id);
      if (e.type == EntryType::kDir && !r.Varint(&e.subtree_entries))
        return Status::Corrupt("tree: truncated directory entry");
      if (e.summary && (!r.Varint(&e.subdirs) || e.subdirs > e.subtree_entries))
        return Status::Corrupt("tree: invalid directory summary");
    } else if (e.type == EntryType::kSymlink) {
      std::string_view t;
      if (!r.Bytes(&t)) return Status::Corrupt("tree: truncated symlink");
      if (t.size() >= kMaxSymlinkTarget || t.find('\0') != std::string_view::npos)
        return Status::Corrupt("tree: invalid symlink target");
      e.target = t;
    }
    out.push_back(std::move(e));
  }
  if (!r.AtEnd()) return Status::Corrupt("tree: trailing bytes");
  return out;
}

// FORMAT (commit, version 1): u8 version=1, 16-byte root, varint nparents, parents,
//   svarint time_sec, varint time_nsec, varint logical_bytes, varint files, bytes message.
std::string EncodeCommit(const CommitInfo& c) {
  std::string s;
  PutU8(&s, 1);
  s.append(c.root.AsKey());
  PutVarint(&s, c.parents.size());
  for (const auto& p : c.parents) s.append(p.AsKey());
  base::PutSVarint(&s, c.time_sec);
  PutVarint(&s, c.time_nsec);
  PutVarint(&s, c.logical_bytes);
  PutVarint(&s, c.files);
  PutBytes(&s, c.message);
  return s;
}

Result<CommitInfo> DecodeCommit(std::string_view data) {
  base::Reader r(data);
  CommitInfo c;
  uint8_t ver;
  std::string_view root, msg;
  uint64_t np, nsec;
  if (!r.U8(&ver) || ver != 1 || !r.Raw(ObjectId::kSize, &root) || !r.Varint(&np) || np > 64)
    return Status::Corrupt("commit: bad header");
  c.root = ObjectId::FromKey(root);
  for (uint64_t i = 0; i < np; i++) {
    std::string_view p;
    if (!r.Raw(ObjectId::kSize, &p)) return Status::Corrupt("commit: truncated parents");
    c.parents.push_back(ObjectId::FromKey(p));
  }
  if (!r.SVarint(&c.time_sec) || !r.Varint(&nsec) || !r.Varint(&c.logical_bytes) ||
      !r.Varint(&c.files) || !r.Bytes(&msg) || !r.AtEnd())
    return Status::Corrupt("commit: truncated");
  c.time_nsec = static_cast<uint32_t>(nsec);
  c.message = msg;
  return c;
}

// FORMAT (chunk list): varint count, then per chunk 16-byte id, varint length.
std::string EncodeChunkList(const std::vector<ChunkRef>& chunks) {
  std::string s;
  PutVarint(&s, chunks.size());
  for (const auto& c : chunks) {
    s.append(c.id.AsKey());
    PutVarint(&s, c.length);
  }
  return s;
}

Result<std::vector<ChunkRef>> DecodeChunkList(std::string_view data) {
  base::Reader r(data);
  uint64_t n;
  if (!r.Varint(&n) || n > data.size() / (ObjectId::kSize + 1)) return Status::Corrupt("chunk list: bad count");
  std::vector<ChunkRef> out(n);
  for (auto& c : out) {
    std::string_view id;
    if (!r.Raw(ObjectId::kSize, &id) || !r.Varint(&c.length))
      return Status::Corrupt("chunk list: truncated");
    if (c.length == 0 || c.length > kMaxChunkLength) return Status::Corrupt("chunk list: invalid chunk length");
    c.id = ObjectId::FromKey(id);
  }
  if (!r.AtEnd()) return Status::Corrupt("chunk list: trailing bytes");
  return out;
}

}  // namespace layerfs::objects
