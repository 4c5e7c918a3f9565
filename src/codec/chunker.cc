#include "codec/chunker.h"

#include <array>
#include <bit>
#include <cstdint>

namespace layerfs::codec {
namespace {

// FORMAT-adjacent: changing the table or masks changes boundaries (hurting dedup against old
// data, never correctness).
constexpr std::array<uint64_t, 256> MakeGear() {
  std::array<uint64_t, 256> g{};
  uint64_t x = 0x4C61796572465321ull;  // splitmix64
  for (auto& v : g) {
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    v = z ^ (z >> 31);
  }
  return g;
}
constexpr auto kGear = MakeGear();

uint64_t MaskOfBits(int bits) { return bits <= 0 ? 0 : (~0ull << (64 - bits)); }

size_t NextCut(const uint8_t* p, size_t n, const ChunkerParams& c) {
  if (n <= c.min_size) return n;
  size_t end = n < c.max_size ? n : c.max_size;
  size_t normal = c.avg_size < end ? c.avg_size : end;
  int bits = std::bit_width(c.avg_size) - 1;
  uint64_t mask_s = MaskOfBits(bits + 2), mask_l = MaskOfBits(bits - 2);
  uint64_t h = 0;
  size_t i = c.min_size;
  for (; i < normal; i++) {
    h = (h << 1) + kGear[p[i]];
    if (!(h & mask_s)) return i + 1;
  }
  for (; i < end; i++) {
    h = (h << 1) + kGear[p[i]];
    if (!(h & mask_l)) return i + 1;
  }
  return end;
}

}  // namespace

size_t NextCutLength(std::string_view data, const ChunkerParams& p) {
  return NextCut(reinterpret_cast<const uint8_t*>(data.data()), data.size(), p);
}

std::vector<size_t> ChunkLengths(std::string_view data, const ChunkerParams& p) {
  std::vector<size_t> out;
  auto* b = reinterpret_cast<const uint8_t*>(data.data());
  size_t off = 0;
  while (off < data.size()) {
    size_t n = NextCut(b + off, data.size() - off, p);
    out.push_back(n);
    off += n;
  }
  return out;
}

}  // namespace layerfs::codec
