// Fuzz target: object records and delta chains, read through ObjectStore over a MemKv seeded
// with the input (docs/reliability.md, "Fuzzing").
//
// Input: u8 flags, then framed pieces, each a family selector byte and a record stored in slot i
// (fuzz_util.h). Every slot is read as every kind its family holds (Info, Get), and what decodes
// is parsed as that kind. With flags & 1 the last piece is also stored as new content with slot
// (flags >> 4) as its delta base, which reads the base's chain from the write side.
#include "fuzz_objects.h"

using namespace layerfs;
using objects::Kind;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  auto pieces = fuzz::Pieces(fuzz::AsView(data + 1, size - 1), 64);
  auto kv = kv::NewMemKv();
  fuzz::SeedSlots(kv.get(), pieces);
  Policy policy;
  if (flags & 2) policy = {2, 1, 1};
  objects::Tuning tuning;
  // No cache: slot ids are not content hashes, and the cache is keyed by id alone (a real id
  // names the same bytes in every family).
  tuning.cache_bytes = 0;
  objects::ObjectStore os(kv.get(), 42, policy, tuning);
  os.SetIdCheckForFuzzing(fuzz::SlotChecker(42));
  for (size_t i = 0; i < pieces.size(); i++) {
    const ObjectId id = fuzz::SlotId(static_cast<uint32_t>(i));
    for (Kind k : {Kind::kBlob, Kind::kChunk, Kind::kChunkList, Kind::kTree, Kind::kCommit}) {
      auto info = os.Info(k, id);
      auto got = os.Get(k, id);
      if (!got.ok()) continue;
      FUZZ_CHECK(info.ok());
      FUZZ_CHECK(got->size() == info->decoded_size);
      if (k == Kind::kTree) (void)objects::DecodeTree(*got);
      if (k == Kind::kCommit) (void)objects::DecodeCommit(*got);
      if (k == Kind::kChunkList) (void)objects::DecodeChunkList(*got);
    }
  }
  if ((flags & 1) && !pieces.empty()) {
    objects::Txn txn;
    const Kind k = (flags & 4) ? Kind::kTree : Kind::kBlob;
    auto put = os.Put(k, pieces.back(), fuzz::SlotId(flags >> 4), &txn);
    if (put.ok()) {
      auto back = os.Get(k, put->id, &txn);
      FUZZ_CHECK(back.ok() && *back == pieces.back());
    }
  }
  return 0;
}
