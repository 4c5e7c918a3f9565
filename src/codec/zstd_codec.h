// Compression and deltas, all with zstd. A delta is zstd's patch-from: the target compressed with
// the base as a reference prefix, so it costs what changed. Frames are magicless, with no
// checksum, dictionary id or content size: the object record carries the decoded size and every
// read verifies the content hash instead. Thread-safe (contexts are thread-local).
#pragma once

#include <string>
#include <string_view>

#include "layerfs/status.h"

namespace layerfs::codec {

Result<std::string> Compress(std::string_view src, int level);
// REQUIRES: decoded_size is the exact size of the original; a mismatch is a corruption error.
Result<std::string> Decompress(std::string_view frame, size_t decoded_size);

Result<std::string> EncodeDelta(std::string_view base, std::string_view target, int level);
Result<std::string> DecodeDelta(std::string_view base, std::string_view delta, size_t decoded_size);

}  // namespace layerfs::codec
