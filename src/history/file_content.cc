#include "history/file_content.h"

#include <algorithm>

#include "codec/chunker.h"
#include "objects/tree.h"

namespace layerfs::history {

using objects::Kind;

Result<StoredContent> WriteContent(objects::ObjectStore& os, std::string_view content,
                                   const TreeEntry* prev, objects::Txn* txn) {
  StoredContent out;
  if (content.empty()) return out;
  if (content.size() < kChunkThreshold) {
    std::optional<ObjectId> base;
    if (prev && prev->type == EntryType::kFile && !prev->chunked && !prev->id.IsZero()) base = prev->id;
    LFS_ASSIGN(auto r, os.Put(Kind::kBlob, content, base, txn));
    out.id = r.id;
    out.objects_added = r.added;
    out.bytes_added = r.stored_bytes;
    return out;
  }
  // The chunk that covered the same offset in the previous version is each chunk's delta base.
  std::vector<objects::ChunkRef> old_chunks;
  std::vector<uint64_t> old_starts;
  if (prev && prev->type == EntryType::kFile && prev->chunked && !prev->id.IsZero()) {
    auto list = os.Get(Kind::kChunkList, prev->id, txn);
    if (list.ok()) {
      auto decoded = objects::DecodeChunkList(*list);
      if (decoded.ok()) old_chunks = std::move(*decoded);
    }
    uint64_t pos = 0;
    for (const auto& c : old_chunks) {
      old_starts.push_back(pos);
      pos += c.length;
    }
  }
  std::vector<objects::ChunkRef> chunks;
  uint64_t off = 0;
  for (size_t len : codec::ChunkLengths(content)) {
    std::optional<ObjectId> base;
    if (!old_chunks.empty()) {
      auto it = std::upper_bound(old_starts.begin(), old_starts.end(), off);
      size_t idx = it == old_starts.begin() ? 0 : static_cast<size_t>(it - old_starts.begin() - 1);
      base = old_chunks[idx].id;
    }
    LFS_ASSIGN(auto r, os.Put(Kind::kChunk, content.substr(off, len), base, txn));
    out.objects_added += r.added;
    out.bytes_added += r.stored_bytes;
    chunks.push_back({r.id, len});
    off += len;
  }
  LFS_ASSIGN(auto r, os.Put(Kind::kChunkList, objects::EncodeChunkList(chunks), std::nullopt, txn));
  out.id = r.id;
  out.chunked = true;
  out.objects_added += r.added;
  out.bytes_added += r.stored_bytes;
  return out;
}

Result<std::string> ReadContent(objects::ObjectStore& os, const ObjectId& id, bool chunked,
                                objects::Txn* txn) {
  if (id.IsZero()) return std::string();
  if (!chunked) return os.Get(Kind::kBlob, id, txn);
  LFS_ASSIGN(std::string list, os.Get(Kind::kChunkList, id, txn));
  LFS_ASSIGN(auto chunks, objects::DecodeChunkList(list));
  std::string out;
  for (const auto& c : chunks) {
    LFS_ASSIGN(std::string data, os.Get(Kind::kChunk, c.id, txn));
    if (data.size() != c.length) return Status::Corrupt("chunk length does not match its list");
    out += data;
  }
  return out;
}

Result<std::string> ReadContentRange(objects::ObjectStore& os, const ObjectId& id, bool chunked,
                                     uint64_t off, uint64_t len) {
  if (id.IsZero() || len == 0) return std::string();
  if (!chunked) {
    LFS_ASSIGN(std::string all, os.Get(Kind::kBlob, id));
    if (off >= all.size()) return std::string();
    return all.substr(off, len);
  }
  LFS_ASSIGN(std::string list, os.Get(Kind::kChunkList, id));
  LFS_ASSIGN(auto chunks, objects::DecodeChunkList(list));
  std::string out;
  uint64_t pos = 0;
  for (const auto& c : chunks) {
    uint64_t end = pos + c.length;
    if (end > off && pos < off + len) {
      LFS_ASSIGN(std::string data, os.Get(Kind::kChunk, c.id));
      if (data.size() != c.length) return Status::Corrupt("chunk length does not match its list");
      uint64_t from = off > pos ? off - pos : 0;
      uint64_t to = std::min<uint64_t>(c.length, off + len - pos);
      out.append(data, from, to - from);
    }
    if (end >= off + len) break;
    pos = end;
  }
  return out;
}

}  // namespace layerfs::history
