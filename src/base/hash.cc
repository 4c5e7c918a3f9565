#include "base/hash.h"

#include <xxhash.h>

#include <cstring>
#include <mutex>

namespace layerfs::base {
namespace {
std::function<ObjectId(std::string_view, uint64_t)>& Override() {
  static std::function<ObjectId(std::string_view, uint64_t)> fn;
  return fn;
}
}  // namespace

ObjectId HashContent(std::string_view data, uint64_t seed, int generation) {
  if (generation == 0 && Override()) return Override()(data, seed);
  XXH128_hash_t h = XXH3_128bits_withSeed(data.data(), data.size(), seed + generation * 0x9E3779B97F4A7C15ull);
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  ObjectId id;
  std::memcpy(id.bytes.data(), c.digest, ObjectId::kSize);
  return id;
}

bool HashMatches(const ObjectId& id, std::string_view data, uint64_t seed) {
  for (int g = 0; g < kMaxGenerations; g++)
    if (HashContent(data, seed, g) == id) return true;
  return false;
}

uint64_t Hash64(std::string_view data) { return XXH3_64bits(data.data(), data.size()); }

void SetHashOverrideForTesting(std::function<ObjectId(std::string_view, uint64_t)> fn) {
  Override() = std::move(fn);
}

}  // namespace layerfs::base
