// Tree and Commit encodings: the namespace and history as content (docs/format.md).
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "layerfs/store.h"

namespace layerfs::objects {

// Entries must be sorted by name, names unique and valid (ValidName).
std::string EncodeTree(const std::vector<TreeEntry>& entries);
Result<std::vector<TreeEntry>> DecodeTree(std::string_view data);

// A stored name is one path component: non-empty, at most 255 bytes, no '/', no NUL, not "." or "..".
bool ValidName(std::string_view name);

std::string EncodeCommit(const CommitInfo& c);  // c.id is ignored
Result<CommitInfo> DecodeCommit(std::string_view data);

// A chunk list: the chunks of a large file in order, with their lengths.
struct ChunkRef {
  ObjectId id;
  uint64_t length;
};
std::string EncodeChunkList(const std::vector<ChunkRef>& chunks);
Result<std::vector<ChunkRef>> DecodeChunkList(std::string_view data);

}  // namespace layerfs::objects
