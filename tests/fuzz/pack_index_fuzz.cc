// Fuzz target: a remote's pack index as fetched (docs/format.md, "Remote layout", "Index") and
// the Store's catalog location records made from its entries (`rloc/`).
//
// Input: u8 flags, then the index. With flags & 1 the input is the index without its trailer
// and the target appends it (the checksum would stop every mutation otherwise). The same bytes
// are also decoded as a location record. What decodes must satisfy what the format says a
// reader checks (frames inside the pack, records inside their frames, order) and re-encode to
// what decodes the same.
#include "fuzz_remote.h"

using namespace layerfs;
using remote::FrameCodec;
using remote::IndexEntry;

namespace {

void CheckEntry(const IndexEntry& e) {
  FUZZ_CHECK(e.depth <= remote::kMaxDepth);
  FUZZ_CHECK(e.frame_length > 0 && e.record_length >= 2);
  if (e.codec == FrameCodec::kStored) {
    FUZZ_CHECK(e.record_offset == 0 && e.record_length == e.frame_length);
  } else {
    FUZZ_CHECK(e.frame_size <= remote::kMaxFrameSize);
    FUZZ_CHECK(e.record_offset <= e.frame_size && e.record_length <= e.frame_size - e.record_offset);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  std::string_view body = fuzz::AsView(data + 1, size - 1);
  const std::string in = (flags & 1) ? fuzz::WithTrailer(body) : std::string(body);
  auto index = remote::DecodeIndex(in);
  if (index.ok()) {
    for (size_t i = 0; i < index->entries.size(); i++) {
      const IndexEntry& e = index->entries[i];
      CheckEntry(e);
      auto r = remote::RangeFor(e);
      FUZZ_CHECK(r.offset >= 8 && r.offset <= index->pack_size && r.length <= index->pack_size - r.offset);
      if (i > 0) {
        const IndexEntry& p = index->entries[i - 1];
        FUZZ_CHECK(p.cf() < e.cf() || (p.cf() == e.cf() && p.id < e.id));
      }
    }
    auto again = remote::DecodeIndex(remote::EncodeIndex(*index));
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->pack_size == index->pack_size && again->entries.size() == index->entries.size());
    for (size_t i = 0; i < index->entries.size(); i++) FUZZ_CHECK(fuzz::SameEntry(again->entries[i], index->entries[i]));
    // Every entry as the catalog keeps it.
    for (const auto& e : index->entries) {
      uint32_t n = 0;
      auto loc = remote::DecodeLocation(remote::EncodeLocation(7, e), &n);
      FUZZ_CHECK(loc.ok() && n == 7);
      IndexEntry with_id = *loc;
      with_id.id = e.id;
      FUZZ_CHECK(fuzz::SameEntry(with_id, e));
    }
  }
  // The bytes as a catalog location record.
  uint32_t pack = 0;
  auto loc = remote::DecodeLocation(body, &pack);
  if (loc.ok()) {
    CheckEntry(*loc);
    uint32_t again_pack = 0;
    auto again = remote::DecodeLocation(remote::EncodeLocation(pack, *loc), &again_pack);
    FUZZ_CHECK(again.ok() && again_pack == pack && fuzz::SameEntry(*again, *loc));
  }
  return 0;
}
