// Content hashing. Ids are XXH3-128 keyed with a per-Store secret seed: content-addressed, fast
// (~20 GB/s), and not forgeable by someone who lacks the Store's key.
//
// Collisions are defended in depth (docs/design.md, "Collisions"): every dedup hit is confirmed by
// a byte comparison, and colliding content is stored under the next "generation" of the key
// (seed + g, g < kMaxGenerations), which verification also accepts.
// A test hook can force collisions. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "layerfs/ids.h"

namespace layerfs::base {

constexpr int kMaxGenerations = 8;

ObjectId HashContent(std::string_view data, uint64_t seed, int generation = 0);
// True if `id` is the hash of `data` under any generation of `seed`.
bool HashMatches(const ObjectId& id, std::string_view data, uint64_t seed);
// Plain 64-bit XXH3 for caches and keys that are not content addresses.
uint64_t Hash64(std::string_view data);

// Test hook: when set, replaces the generation-0 hash (to inject collisions). Not for production.
void SetHashOverrideForTesting(std::function<ObjectId(std::string_view, uint64_t)> fn);

}  // namespace layerfs::base
