// Packs and their indexes: how object records travel to and from a remote (docs/format.md,
// "Remote layout, version 1").
//
// A pack is our object records as a Store holds them, in frames: records stored raw locally are
// grouped into zstd frames of up to kFrameTarget bytes; every zstd or delta record (already
// compressed) is a stored frame of its own. The index says for each record where its frame is
// and where the record is in it, plus its kind, depth and base, so a reader can plan a delta
// chain's reads from indexes alone. Pure data and functions; a PackBuilder has one owner.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv.h"
#include "layerfs/ids.h"
#include "layerfs/status.h"
#include "objects/object_store.h"

namespace layerfs::remote {

constexpr size_t kPackTarget = 32u << 20;     // a pack closes once its frames reach this
constexpr size_t kFrameTarget = 128u << 10;   // a zstd frame closes once its records reach this
constexpr uint64_t kMaxFrameSize = 8u << 20;  // decoded bytes of one zstd frame, at most
constexpr uint32_t kMaxDepth = 1024;          // as object records

enum class FrameCodec : uint8_t { kStored = 0, kZstd = 1 };

struct IndexEntry {
  objects::Kind kind = objects::Kind::kBlob;
  ObjectId id;
  uint32_t depth = 0;
  ObjectId base;  // when depth > 0
  uint64_t frame_offset = 0, frame_length = 0;
  FrameCodec codec = FrameCodec::kStored;
  uint64_t frame_size = 0;  // decoded bytes of a zstd frame
  uint64_t record_offset = 0, record_length = 0;

  kv::Cf cf() const { return objects::CfOf(kind); }
};

struct PackIndex {
  uint64_t pack_size = 0;
  std::vector<IndexEntry> entries;  // sorted by (family, id), unique
};

std::string EncodeIndex(const PackIndex& index);
// Checks everything the format says a reader checks (trailer, order, bounds).
Result<PackIndex> DecodeIndex(std::string_view data);

// An entry without its id, after a local pack number: the catalog's location records.
std::string EncodeLocation(uint32_t pack_number, const IndexEntry& e);
Result<IndexEntry> DecodeLocation(std::string_view data, uint32_t* pack_number);

// The byte range to read for an entry: a stored frame's record exactly, a zstd frame whole.
struct ByteRange {
  uint64_t offset = 0, length = 0;
};
ByteRange RangeFor(const IndexEntry& e);
// The frame's decoded bytes from what RangeFor's range read (a zstd frame is decompressed into
// exactly its stated size).
Result<std::string> DecodeFrame(const IndexEntry& e, std::string_view bytes);
// The entry's record out of its decoded frame, its header checked against the entry (family,
// depth, base).
Result<std::string> RecordFromFrame(const IndexEntry& e, std::string_view frame);

class PackBuilder {
 public:
  explicit PackBuilder(int level = 12) : level_(level) {}

  // Adds a record as stored locally (its header says its encoding, depth and base).
  Status Add(objects::Kind kind, const ObjectId& id, std::string_view record);
  // Pack bytes so far (an open frame counted at its raw size).
  uint64_t bytes() const { return pack_.size() + open_.size(); }
  size_t records() const { return index_.entries.size() + open_entries_.size(); }
  bool empty() const { return records() == 0; }
  // The pack and its encoded index; the builder is empty again afterwards.
  Result<std::pair<std::string, std::string>> Finish();

 private:
  Status CloseFrame();

  int level_;
  std::string pack_;
  PackIndex index_;
  std::string open_;                       // raw records of the open zstd frame
  std::vector<IndexEntry> open_entries_;   // their entries (record offsets within open_)
};

}  // namespace layerfs::remote
