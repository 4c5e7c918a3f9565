// Object-level helpers of the fuzz targets: the slot verifier and the seeding of records.
#pragma once

#include "fuzz_util.h"
#include "base/hash.h"
#include "kv/kv.h"
#include "objects/object_store.h"
#include "objects/tree.h"

namespace layerfs::fuzz {

// Stands in for the keyed hash (see SlotId): content stored in slot s may name only objects in
// slots after s, so no tree contains itself and no commit is its own ancestor. Other ids (of
// objects the target stores itself) are checked against the keyed hash as usual.
inline bool SlotCheck(uint64_t seed, objects::Kind kind, const ObjectId& id, std::string_view content) {
  const int slot = SlotOf(id);
  if (slot < 0) return base::HashMatches(id, content, seed);
  auto later = [slot](const ObjectId& ref) { return ref.IsZero() || SlotOf(ref) > slot; };
  if (kind == objects::Kind::kTree) {
    auto t = objects::DecodeTree(content);
    if (t.ok())
      for (const auto& e : *t)
        if (e.type == EntryType::kDir && !later(e.id)) return false;
  } else if (kind == objects::Kind::kCommit) {
    auto c = objects::DecodeCommit(content);
    if (c.ok()) {
      if (!later(c->root)) return false;
      for (const auto& p : c->parents)
        if (!later(p)) return false;
    }
  }
  return true;
}

// The column family a seeded record goes to: its first byte picks it (blobs, trees, commits).
inline kv::Cf SlotFamily(uint8_t selector) {
  static constexpr kv::Cf kCfs[] = {kv::Cf::kBlobs, kv::Cf::kTrees, kv::Cf::kCommits};
  return kCfs[selector % 3];
}

// Writes piece i (selector byte + record) into slot i of its family.
inline void SeedSlots(kv::Kv* kv, const std::vector<std::string_view>& pieces) {
  kv::Batch b;
  for (size_t i = 0; i < pieces.size(); i++) {
    if (pieces[i].empty()) continue;
    b.Put(SlotFamily(static_cast<uint8_t>(pieces[i][0])), SlotId(static_cast<uint32_t>(i)).AsKey(),
          pieces[i].substr(1));
  }
  (void)kv->Write(b, false);
}

}  // namespace layerfs::fuzz

namespace layerfs::fuzz {
inline objects::ObjectStore::IdCheck SlotChecker(uint64_t seed) {
  return [seed](objects::Kind k, const ObjectId& id, std::string_view c) { return SlotCheck(seed, k, id, c); };
}
}  // namespace layerfs::fuzz
