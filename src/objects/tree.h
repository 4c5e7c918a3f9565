// Tree and Commit encodings: the namespace and history as content (docs/format.md).
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "layerfs/store.h"

namespace layerfs::objects {

// Entries must be sorted by name, names unique and valid (ValidName).
std::string EncodeTree(const std::vector<TreeEntry>& entries);

// Sets the summary of `dir` (its entry in the parent: TreeEntry::summary) from the entries of
// its tree: the subdirectories, and whether a hard link lies anywhere below. Known only when
// every subdirectory's entry has its own summary; otherwise `dir` gets none.
void SummarizeDir(const std::vector<TreeEntry>& entries, TreeEntry* dir);
Result<std::vector<TreeEntry>> DecodeTree(std::string_view data);

// A stored name is one path component: non-empty, at most 255 bytes, no '/', no NUL, not "." or "..".
bool ValidName(std::string_view name);
// Trees nest at most this deep (as Git's core.maxTreeDepth): every walk of a tree refuses to go
// deeper, and import and commit refuse to make deeper trees, so a crafted chain of trees
// cannot exhaust a walker's stack.
constexpr size_t kMaxTreeDepth = 2048;

// A stored extended attribute: a user.* name of at most 255 bytes (no NUL), a value of at
// most kMaxXattrValue bytes. A symlink target is shorter than kMaxSymlinkTarget, without NUL.
bool ValidXattrName(std::string_view name);
constexpr size_t kMaxXattrValue = 65536;
constexpr size_t kMaxSymlinkTarget = 4096;

std::string EncodeCommit(const CommitInfo& c);  // c.id is ignored
Result<CommitInfo> DecodeCommit(std::string_view data);

// A chunk list: the chunks of a large file in order, with their lengths (1 .. kMaxChunkLength,
// the most a chunk object holds; content-defined chunks are at most 1 MiB).
constexpr uint64_t kMaxChunkLength = 2 << 20;
struct ChunkRef {
  ObjectId id;
  uint64_t length;
};
std::string EncodeChunkList(const std::vector<ChunkRef>& chunks);
Result<std::vector<ChunkRef>> DecodeChunkList(std::string_view data);

}  // namespace layerfs::objects
