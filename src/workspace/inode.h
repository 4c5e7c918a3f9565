// The persisted records of a Workspace (docs/format.md, "Workspace"): keys under an 8-byte
// workspace id in the kWorkspace column family, and the inode record encoding.
#pragma once

#include <sys/stat.h>

#include <string>
#include <vector>

#include "base/coding.h"
#include "layerfs/store.h"
#include "workspace/workspace.h"

namespace layerfs::workspace {

// FORMAT: meta family: kWsKeyPrefix + branch -> 8-byte workspace id; never change.
inline constexpr std::string_view kWsKeyPrefix = "ws/";

// FORMAT: key tags; never change.
constexpr char kTagBlock = 'B';   // prefix|B|ino|block -> 64 KiB data block
constexpr char kTagState = 'S';   // prefix|S -> state record
constexpr char kTagInode = 'I';   // prefix|I|ino -> inode (prefix|I|ino|block: blocks of older builds)
constexpr char kTagEntry = 'D';   // prefix|D|dir ino|name -> varint child ino, u8 EntryType
constexpr char kTagDirty = 'X';   // prefix|X|ino -> varint generation of the last change
constexpr char kTagOrphan = 'O';  // prefix|O|ino -> "" (unlinked, awaiting forget)
constexpr char kTagLink = 'L';    // prefix|L|link group -> varint ino (hard links of the base)
constexpr char kTagRef = 'R';     // prefix|R|ino|block -> block in the data log (DataRef + patches)
constexpr char kTagMerge = 'M';   // prefix|M -> the merge in progress (docs/format.md)
constexpr char kTagOverlay = 'Q'; // prefix|Q|ino|block -> patches over the committed bytes (format 9)

struct Inode {
  Ino ino = 0;
  EntryType type = EntryType::kFile;
  uint32_t perm = 0644;  // permission bits (07777)
  uint32_t uid = 0, gid = 0, nlink = 1;
  uint64_t size = 0, rdev = 0;
  timespec atime{}, mtime{}, ctime{};
  bool materialized = false;  // dirs: entries are records, not the origin tree
  bool has_blocks = false;    // files: some data lives in blocks
  bool has_refs = false;      // files: some of those blocks are in the data log (R records)
  // Files: some of those blocks are Q records, patches over the committed bytes (format 9).
  bool has_overlays = false;
  bool has_origin = false;
  bool origin_chunked = false;
  // Dirs: the origin tree is not the base Commit's subtree at this place (a merge put it here),
  // so its entries take numbers from the counter when materialised, as do its subdirectories'.
  bool counter_numbered = false;
  // Dirs: origin_size holds the entry count of the origin subtree, as the parent's tree entry (or
  // the Commit, for the root) declared it; materialising checks the entries add up to it, so
  // lying counts cannot give two inodes one number (format 3, flag 64; older records lack it).
  bool count_known = false;
  ObjectId origin;            // files: committed content; dirs: committed tree
  uint64_t valid_len = 0;     // files: origin bytes visible below this offset
  uint64_t origin_size = 0;   // files: size of the origin content; dirs with count_known: entries below
  std::string target;         // symlinks
  std::vector<std::pair<std::string, std::string>> xattrs;  // sorted
  std::vector<Ino> parents;   // directories holding a link to this inode

  bool is_dir() const { return type == EntryType::kDir; }
  uint32_t ModeBits() const;
  Attr ToAttr() const;
};

std::string EncodeInode(const Inode& n);
Result<Inode> DecodeInode(Ino ino, std::string_view v);

uint32_t TypeBits(EntryType t);
EntryType TypeFromMode(uint32_t mode);

class Keys {
 public:
  explicit Keys(uint64_t wsid) { base::PutBigEndian64(&prefix_, wsid); }
  const std::string& prefix() const { return prefix_; }
  std::string State() const { return prefix_ + kTagState; }
  std::string Merge() const { return prefix_ + kTagMerge; }
  std::string Inode(Ino ino) const { return Tagged(kTagInode, ino); }
  // Blocks sort before every other record of the Workspace: a flush during a long sequential
  // write then spans [its first new block, the metadata], which overlaps the tables of the
  // file's earlier blocks only where the metadata sits (filed right after their inode record,
  // a flush spanned them all).
  std::string Block(Ino ino, uint64_t block) const {
    std::string k = Tagged(kTagBlock, ino);
    base::PutBigEndian64(&k, block);
    return k;
  }
  // [Block(ino, first), end of ino's blocks)
  std::string BlocksEnd(Ino ino) const { return Tagged(kTagBlock, ino + 1); }
  std::string InodeEnd(Ino ino) const { return Tagged(kTagInode, ino + 1); }
  // A block held in the data log; a block has a B record or an R record, never both.
  std::string Ref(Ino ino, uint64_t block) const {
    std::string k = Tagged(kTagRef, ino);
    base::PutBigEndian64(&k, block);
    return k;
  }
  std::string RefsEnd(Ino ino) const { return Tagged(kTagRef, ino + 1); }
  std::string RefPrefix() const { return prefix_ + kTagRef; }
  // A block of committed bytes (origin below valid_len, zeros past it) under patches written
  // without reading it; a block has at most one of B, R and Q records, and Q only below valid_len.
  std::string Overlay(Ino ino, uint64_t block) const {
    std::string k = Tagged(kTagOverlay, ino);
    base::PutBigEndian64(&k, block);
    return k;
  }
  std::string OverlaysEnd(Ino ino) const { return Tagged(kTagOverlay, ino + 1); }
  // Blocks as older builds filed them: prefix|I|ino|block.
  static constexpr size_t kLegacyBlockKeySize = 8 + 1 + 8 + 8;
  std::string EntryPrefix(Ino dir) const { return Tagged(kTagEntry, dir); }
  std::string Entry(Ino dir, std::string_view name) const { return EntryPrefix(dir).append(name); }
  std::string Dirty(Ino ino) const { return Tagged(kTagDirty, ino); }
  std::string DirtyPrefix() const { return prefix_ + kTagDirty; }
  std::string Orphan(Ino ino) const { return Tagged(kTagOrphan, ino); }
  std::string OrphanPrefix() const { return prefix_ + kTagOrphan; }
  std::string Link(uint64_t group) const { return Tagged(kTagLink, group); }
  std::string End() const { return history_end(prefix_); }
  static Ino InoAt(std::string_view key, size_t pos) { return base::GetBigEndian64(key.data() + pos); }

 private:
  static std::string history_end(std::string p);
  std::string Tagged(char tag, uint64_t v) const {
    std::string k = prefix_ + tag;
    base::PutBigEndian64(&k, v);
    return k;
  }
  std::string prefix_;
};

}  // namespace layerfs::workspace
