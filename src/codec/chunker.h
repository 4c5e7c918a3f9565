// Content-defined chunking (FastCDC-style gear hash with normalised chunking): boundaries follow
// content, so an insertion shifts only the chunks it touches. Stateless and thread-safe.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace layerfs::codec {

struct ChunkerParams {
  size_t min_size = 64 << 10;
  size_t avg_size = 256 << 10;  // a power of two
  size_t max_size = 1 << 20;
};

// The length of the first chunk of `data`; it depends on no byte past max_size, so a stream
// cut with a window of max_size bytes ahead (or its end) gets the cuts of ChunkLengths.
size_t NextCutLength(std::string_view data, const ChunkerParams& p = {});
// Returns the lengths of consecutive chunks covering `data` (empty for empty data).
std::vector<size_t> ChunkLengths(std::string_view data, const ChunkerParams& p = {});

}  // namespace layerfs::codec
