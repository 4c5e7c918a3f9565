#include "remote/pack.h"

#include <algorithm>

#include "base/coding.h"
#include "base/hash.h"
#include "codec/zstd_codec.h"

namespace layerfs::remote {

using objects::Encoding;
using objects::Kind;

namespace {

constexpr std::string_view kPackMagic("LFSPACK\x01", 8);
constexpr std::string_view kIndexMagic("LFSIDX\x01\x00", 8);

bool EntryLess(const IndexEntry& a, const IndexEntry& b) {
  if (a.cf() != b.cf()) return a.cf() < b.cf();
  return a.id < b.id;
}

// The fields after the id (index) or after the pack number (catalog).
void PutTail(std::string* s, const IndexEntry& e) {
  base::PutVarint(s, e.depth);
  if (e.depth > 0) s->append(e.base.AsKey());
  base::PutVarint(s, e.frame_offset);
  base::PutVarint(s, e.frame_length);
  base::PutU8(s, static_cast<uint8_t>(e.codec));
  if (e.codec == FrameCodec::kZstd) base::PutVarint(s, e.frame_size);
  base::PutVarint(s, e.record_offset);
  base::PutVarint(s, e.record_length);
}

Status GetTail(base::Reader* r, IndexEntry* e) {
  uint64_t depth, codec = 0;
  uint8_t c;
  if (!r->Varint(&depth)) return Status::Corrupt("truncated entry");
  if (depth > kMaxDepth) return Status::Corrupt("entry depth out of range");
  e->depth = static_cast<uint32_t>(depth);
  if (depth > 0) {
    std::string_view b;
    if (!r->Raw(ObjectId::kSize, &b)) return Status::Corrupt("truncated entry");
    e->base = ObjectId::FromKey(b);
  }
  if (!r->Varint(&e->frame_offset) || !r->Varint(&e->frame_length) || !r->U8(&c))
    return Status::Corrupt("truncated entry");
  codec = c;
  if (codec > 1) return Status::Corrupt("unknown frame codec");
  e->codec = static_cast<FrameCodec>(codec);
  if (e->codec == FrameCodec::kZstd && !r->Varint(&e->frame_size)) return Status::Corrupt("truncated entry");
  if (!r->Varint(&e->record_offset) || !r->Varint(&e->record_length)) return Status::Corrupt("truncated entry");
  // Bounds that need no pack size.
  if (e->frame_length == 0 || e->record_length < 2) return Status::Corrupt("empty frame or record");
  if (e->codec == FrameCodec::kStored) {
    if (e->record_offset != 0 || e->record_length != e->frame_length)
      return Status::Corrupt("stored frame does not hold exactly one record");
  } else {
    if (e->frame_size > kMaxFrameSize) return Status::Corrupt("frame larger than the format allows");
    if (e->record_offset > e->frame_size || e->record_length > e->frame_size - e->record_offset)
      return Status::Corrupt("record lies outside its frame");
  }
  return Status::Ok();
}

Status GetKind(base::Reader* r, IndexEntry* e) {
  uint8_t k;
  if (!r->U8(&k)) return Status::Corrupt("truncated entry");
  if (k < 1 || k > 5) return Status::Corrupt("unknown object kind");
  e->kind = static_cast<Kind>(k);
  return Status::Ok();
}

}  // namespace

std::string EncodeIndex(const PackIndex& index) {
  std::string s(kIndexMagic);
  base::PutVarint(&s, index.pack_size);
  base::PutVarint(&s, index.entries.size());
  for (const auto& e : index.entries) {
    base::PutU8(&s, static_cast<uint8_t>(e.kind));
    s.append(e.id.AsKey());
    PutTail(&s, e);
  }
  s.append(base::HashContent(s, 0).AsKey());
  return s;
}

Result<PackIndex> DecodeIndex(std::string_view data) {
  if (data.size() < kIndexMagic.size() + ObjectId::kSize || data.substr(0, kIndexMagic.size()) != kIndexMagic)
    return Status::Corrupt("pack index: bad magic");
  std::string_view body = data.substr(0, data.size() - ObjectId::kSize);
  if (base::HashContent(body, 0) != ObjectId::FromKey(data.substr(body.size())))
    return Status::Corrupt("pack index: checksum mismatch (damaged or truncated)");
  base::Reader r(body.substr(kIndexMagic.size()));
  PackIndex index;
  uint64_t count;
  if (!r.Varint(&index.pack_size) || !r.Varint(&count)) return Status::Corrupt("pack index: truncated header");
  // Each entry takes at least 23 bytes (kind, id, then six fields of at least one byte): a count
  // beyond that is a lie, not a reason to allocate.
  if (count > body.size() / 23 + 1) return Status::Corrupt("pack index: entry count out of range");
  index.entries.reserve(count);
  for (uint64_t i = 0; i < count; i++) {
    IndexEntry e;
    std::string_view id;
    LFS_TRY(GetKind(&r, &e).Context("pack index"));
    if (!r.Raw(ObjectId::kSize, &id)) return Status::Corrupt("pack index: truncated entry");
    e.id = ObjectId::FromKey(id);
    LFS_TRY(GetTail(&r, &e).Context("pack index"));
    if (e.frame_offset < kPackMagic.size() || e.frame_offset > index.pack_size ||
        e.frame_length > index.pack_size - e.frame_offset)
      return Status::Corrupt("pack index: frame lies outside the pack");
    if (!index.entries.empty() && !EntryLess(index.entries.back(), e))
      return Status::Corrupt("pack index: entries out of order or repeated");
    index.entries.push_back(e);
  }
  if (!r.AtEnd()) return Status::Corrupt("pack index: trailing bytes");
  return index;
}

std::string EncodeLocation(uint32_t pack_number, const IndexEntry& e) {
  std::string s;
  base::PutVarint(&s, pack_number);
  base::PutU8(&s, static_cast<uint8_t>(e.kind));
  PutTail(&s, e);
  return s;
}

Result<IndexEntry> DecodeLocation(std::string_view data, uint32_t* pack_number) {
  base::Reader r(data);
  uint64_t n;
  IndexEntry e;
  if (!r.Varint(&n) || n > UINT32_MAX) return Status::Corrupt("remote catalog: damaged location");
  *pack_number = static_cast<uint32_t>(n);
  LFS_TRY(GetKind(&r, &e).Context("remote catalog"));
  LFS_TRY(GetTail(&r, &e).Context("remote catalog"));
  return e;
}

ByteRange RangeFor(const IndexEntry& e) { return {e.frame_offset, e.frame_length}; }

Result<std::string> DecodeFrame(const IndexEntry& e, std::string_view bytes) {
  if (bytes.size() != e.frame_length) return Status::Corrupt("remote frame is truncated");
  if (e.codec == FrameCodec::kStored) return std::string(bytes);
  return codec::Decompress(bytes, e.frame_size);
}

Result<std::string> RecordFromFrame(const IndexEntry& e, std::string_view frame) {
  if (e.record_offset > frame.size() || e.record_length > frame.size() - e.record_offset)
    return Status::Corrupt("remote record lies outside its frame");
  std::string record(frame.substr(e.record_offset, e.record_length));
  auto info = objects::ParseRecord(record);
  if (!info.ok()) return info.status();
  // Packs hold encoded records only: a pending one (docs/format.md) names a hint this Store may
  // lack and would never be encoded here.
  if (info->encoding == Encoding::kPending) return Status::Corrupt("remote record is a pending (unencoded) record");
  if (objects::CfOf(info->kind) != e.cf() || info->depth != e.depth ||
      (e.depth > 0 && info->base != e.base))
    return Status::Corrupt("remote record does not match its index entry");
  return record;
}

Status PackBuilder::Add(Kind kind, const ObjectId& id, std::string_view record) {
  LFS_ASSIGN(auto info, objects::ParseRecord(record));
  if (objects::CfOf(info.kind) != objects::CfOf(kind)) return Status::Corrupt("record kind does not match");
  if (info.encoding == Encoding::kPending)
    return Status::Invalid(fmt::format("{} {}: a pending record cannot go in a pack (encode it first)",
                                       objects::KindName(kind), id.Hex()));
  IndexEntry e;
  e.kind = info.kind;
  e.id = id;
  e.depth = info.depth;
  if (info.encoding == Encoding::kDelta) e.base = info.base;
  e.record_length = record.size();
  if (pack_.empty()) pack_.assign(kPackMagic);
  if (info.encoding == Encoding::kRaw && record.size() < kFrameTarget) {
    e.codec = FrameCodec::kZstd;
    e.record_offset = open_.size();
    open_.append(record);
    open_entries_.push_back(e);
    if (open_.size() >= kFrameTarget) LFS_TRY(CloseFrame());
    return Status::Ok();
  }
  // Already compressed (or large and incompressible): stored as is.
  e.codec = FrameCodec::kStored;
  e.frame_offset = pack_.size();
  e.frame_length = record.size();
  e.record_offset = 0;
  pack_.append(record);
  index_.entries.push_back(e);
  return Status::Ok();
}

Status PackBuilder::CloseFrame() {
  if (open_.empty()) return Status::Ok();
  LFS_ASSIGN(std::string z, codec::Compress(open_, level_));
  uint64_t off = pack_.size();
  pack_.append(z);
  for (auto& e : open_entries_) {
    e.frame_offset = off;
    e.frame_length = z.size();
    e.frame_size = open_.size();
    index_.entries.push_back(e);
  }
  open_.clear();
  open_entries_.clear();
  return Status::Ok();
}

Result<std::pair<std::string, std::string>> PackBuilder::Finish() {
  LFS_TRY(CloseFrame());
  index_.pack_size = pack_.size();
  std::sort(index_.entries.begin(), index_.entries.end(), EntryLess);
  // One record per (family, id) (callers add each object once; a repeat would be the same).
  index_.entries.erase(std::unique(index_.entries.begin(), index_.entries.end(),
                                   [](const IndexEntry& a, const IndexEntry& b) {
                                     return a.cf() == b.cf() && a.id == b.id;
                                   }),
                       index_.entries.end());
  std::pair<std::string, std::string> out{std::move(pack_), EncodeIndex(index_)};
  pack_.clear();
  index_ = {};
  return out;
}

}  // namespace layerfs::remote
