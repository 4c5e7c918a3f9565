// Fuzz target: a pack as fetched (docs/format.md, "Remote layout", "Pack" and "Index"): every
// entry of the index is read out of the pack as a fetch does it (RangeFor, DecodeFrame,
// RecordFromFrame), staged, and verified by hash bottom up (ObjectStore::GetVerified, the keyed
// hash of kRemoteSeed; no fuzzing override), then the records that verified are packed again and
// must read back byte for byte.
//
// Input: u8 flags, then two framed pieces: the index (without its trailer when flags & 1: the
// target appends it) and the pack. Invariants: a frame decodes to exactly its stated size, a
// record is what its entry says (family, depth, base) and never pending, and content accepted
// for an id hashes to that id.
#include <map>

#include "fuzz_remote.h"
#include "kv/kv.h"
#include "objects/object_store.h"

using namespace layerfs;
using remote::FrameCodec;
using remote::IndexEntry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  auto pieces = fuzz::Pieces(fuzz::AsView(data + 1, size - 1), 2);
  if (pieces.size() < 2) return 0;
  const std::string raw_index = (flags & 1) ? fuzz::WithTrailer(pieces[0]) : std::string(pieces[0]);
  const std::string_view pack = pieces[1];
  auto index = remote::DecodeIndex(raw_index);
  if (!index.ok()) return 0;

  // Bases first (a fetch's order), at most 256 entries; each frame decoded once.
  std::vector<IndexEntry> entries = index->entries;
  if (entries.size() > 256) entries.resize(256);
  std::stable_sort(entries.begin(), entries.end(),
                   [](const IndexEntry& a, const IndexEntry& b) { return a.depth < b.depth; });
  std::map<uint64_t, Result<std::string>> frames;
  std::vector<std::pair<IndexEntry, std::string>> records;
  for (const auto& e : entries) {
    auto it = frames.find(e.frame_offset);
    if (it == frames.end()) {
      auto r = remote::RangeFor(e);
      std::string_view bytes = r.offset <= pack.size() ? pack.substr(r.offset, r.length) : std::string_view();
      auto frame = remote::DecodeFrame(e, bytes);
      if (frame.ok()) FUZZ_CHECK(frame->size() == (e.codec == FrameCodec::kStored ? e.frame_length : e.frame_size));
      it = frames.emplace(e.frame_offset, std::move(frame)).first;
    }
    if (!it->second.ok()) continue;
    auto rec = remote::RecordFromFrame(e, *it->second);
    if (!rec.ok()) continue;
    FUZZ_CHECK(rec->size() == e.record_length);
    auto info = objects::ParseRecord(*rec);
    FUZZ_CHECK(info.ok() && info->encoding != objects::Encoding::kPending);
    FUZZ_CHECK(objects::CfOf(info->kind) == e.cf() && info->depth == e.depth);
    records.emplace_back(e, std::move(*rec));
  }

  // Staged all at once, verified bottom up, as a fetch's batch.
  auto kv = kv::NewMemKv();
  objects::Tuning no_cache;
  no_cache.cache_bytes = 0;
  objects::ObjectStore os(kv.get(), fuzz::kRemoteSeed, Policy{}, no_cache);
  objects::Txn txn;
  for (const auto& [e, rec] : records) os.StageRecord(&txn, e.kind, e.id, rec);
  remote::PackBuilder builder(1);
  std::map<std::pair<kv::Cf, ObjectId>, std::string> verified;
  for (const auto& [e, rec] : records) {
    auto content = os.GetVerified(e.kind, e.id, &txn);
    if (!content.ok()) continue;
    FUZZ_CHECK(base::HashMatches(e.id, *content, fuzz::kRemoteSeed));
    if (verified.emplace(std::make_pair(e.cf(), e.id), rec).second) FUZZ_CHECK(builder.Add(e.kind, e.id, rec).ok());
  }
  if (builder.empty()) return 0;
  auto built = builder.Finish();
  FUZZ_CHECK(built.ok());
  auto again = remote::DecodeIndex(built->second);
  FUZZ_CHECK(again.ok() && again->entries.size() == verified.size());
  for (const auto& e : again->entries) {
    auto r = remote::RangeFor(e);
    auto frame = remote::DecodeFrame(e, std::string_view(built->first).substr(r.offset, r.length));
    FUZZ_CHECK(frame.ok());
    auto rec = remote::RecordFromFrame(e, *frame);
    FUZZ_CHECK(rec.ok() && *rec == verified.at({e.cf(), e.id}));
  }
  return 0;
}
