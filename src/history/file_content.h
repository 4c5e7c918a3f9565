// File content in and out of the ObjectStore: small files are one blob (a delta against the
// path's previous version when that is smaller); files of kChunkThreshold bytes or more are
// content-defined chunks, each a delta against the chunk it replaced, under a chunk list.
// Thread-safe as the ObjectStore is.
#pragma once

#include <functional>

#include "layerfs/store.h"
#include "objects/object_store.h"

namespace layerfs::history {

constexpr uint64_t kChunkThreshold = 2 << 20;

struct StoredContent {
  ObjectId id;  // zero for empty content
  bool chunked = false;
  uint64_t objects_added = 0, bytes_added = 0;
};

// `prev` is the previous version of the file (or a similar file), if any: its content is the
// delta base.
Result<StoredContent> WriteContent(objects::ObjectStore& os, std::string_view content,
                                   const TreeEntry* prev, objects::Txn* txn = nullptr);
// Bytes [off, off + len) of content being stored: exactly len bytes, or an error.
using ContentReader = std::function<Result<std::string>(uint64_t off, size_t len)>;
// The same for `size` bytes read piecewise: a chunked file is held in memory one chunking window
// (codec::ChunkerParams::max_size) at a time, whatever its size.
Result<StoredContent> WriteContentFrom(objects::ObjectStore& os, uint64_t size, const ContentReader& read,
                                       const TreeEntry* prev, objects::Txn* txn = nullptr);
// Passes the content to `sink` piecewise (a blob whole, a chunked file a chunk at a time), each
// piece hash-verified; returns the number of bytes passed.
Result<uint64_t> ReadContentTo(objects::ObjectStore& os, const ObjectId& id, bool chunked,
                               const std::function<Status(std::string_view)>& sink,
                               objects::Txn* txn = nullptr);
Result<std::string> ReadContent(objects::ObjectStore& os, const ObjectId& id, bool chunked,
                                objects::Txn* txn = nullptr);
// Bytes [off, off+len) of the content (short at the end), reading only the chunks it covers.
Result<std::string> ReadContentRange(objects::ObjectStore& os, const ObjectId& id, bool chunked,
                                     uint64_t off, uint64_t len);

}  // namespace layerfs::history
