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

// Returns the lengths of consecutive chunks covering `data` (empty for empty data).
std::vector<size_t> ChunkLengths(std::string_view data, const ChunkerParams& p = {});

}  // namespace layerfs::codec
