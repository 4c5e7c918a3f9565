#include "history/file_content.h"

#include <algorithm>

#include "codec/chunker.h"
#include "objects/tree.h"

namespace layerfs::history {

using objects::Kind;

Result<StoredContent> WriteContent(objects::ObjectStore& os, std::string_view content,
                                   const TreeEntry* prev, objects::Txn* txn) {
  auto read = [content](uint64_t off, size_t len) -> Result<std::string> {
    return std::string(content.substr(off, len));
  };
  return WriteContentFrom(os, content.size(), read, prev, txn);
}

Result<StoredContent> WriteContentFrom(objects::ObjectStore& os, uint64_t size, const ContentReader& read,
                                       const TreeEntry* prev, objects::Txn* txn) {
  StoredContent out;
  if (size == 0) return out;
  if (size < kChunkThreshold) {
    std::optional<ObjectId> base;
    if (prev && prev->type == EntryType::kFile && !prev->chunked && !prev->id.IsZero()) base = prev->id;
    LFS_ASSIGN(std::string content, read(0, size));
    if (content.size() != size) return Status::Corrupt("content read back short");
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
  // A window of at least one maximal chunk (or the rest of the file) ahead of the cut point:
  // NextCut looks no further, so the cuts are those of the whole content at once.
  const codec::ChunkerParams params;
  const size_t kRead = 4 * params.max_size;
  std::string window;
  size_t wpos = 0;  // start of the uncut bytes in window
  std::vector<objects::ChunkRef> chunks;
  uint64_t off = 0, fetched = 0;
  while (off < size) {
    if (window.size() - wpos < params.max_size && fetched < size) {
      window.erase(0, wpos);
      wpos = 0;
      size_t n = static_cast<size_t>(std::min<uint64_t>(kRead, size - fetched));
      LFS_ASSIGN(std::string more, read(fetched, n));
      if (more.size() != n) return Status::Corrupt("content read back short");
      window += more;
      fetched += n;
    }
    std::string_view rest(window.data() + wpos, window.size() - wpos);
    size_t len = codec::NextCutLength(rest, params);
    std::optional<ObjectId> base;
    if (!old_chunks.empty()) {
      auto it = std::upper_bound(old_starts.begin(), old_starts.end(), off);
      size_t idx = it == old_starts.begin() ? 0 : static_cast<size_t>(it - old_starts.begin() - 1);
      base = old_chunks[idx].id;
    }
    LFS_ASSIGN(auto r, os.Put(Kind::kChunk, rest.substr(0, len), base, txn));
    out.objects_added += r.added;
    out.bytes_added += r.stored_bytes;
    chunks.push_back({r.id, len});
    off += len;
    wpos += len;
  }
  LFS_ASSIGN(auto r, os.Put(Kind::kChunkList, objects::EncodeChunkList(chunks), std::nullopt, txn));
  out.id = r.id;
  out.chunked = true;
  out.objects_added += r.added;
  out.bytes_added += r.stored_bytes;
  return out;
}

Result<uint64_t> ReadContentTo(objects::ObjectStore& os, const ObjectId& id, bool chunked,
                               const std::function<Status(std::string_view)>& sink, objects::Txn* txn) {
  if (id.IsZero()) return uint64_t{0};
  if (!chunked) {
    LFS_ASSIGN(std::string data, os.Get(Kind::kBlob, id, txn));
    LFS_TRY(sink(data));
    return uint64_t{data.size()};
  }
  LFS_ASSIGN(std::string list, os.Get(Kind::kChunkList, id, txn));
  LFS_ASSIGN(auto chunks, objects::DecodeChunkList(list));
  uint64_t total = 0;
  for (const auto& c : chunks) {
    LFS_ASSIGN(std::string data, os.Get(Kind::kChunk, c.id, txn));
    if (data.size() != c.length) return Status::Corrupt("chunk length does not match its list");
    LFS_TRY(sink(data));
    total += data.size();
  }
  return total;
}

Result<std::string> ReadContent(objects::ObjectStore& os, const ObjectId& id, bool chunked,
                                objects::Txn* txn) {
  std::string out;
  LFS_TRY(ReadContentTo(os, id, chunked, [&](std::string_view d) {
    out.append(d);
    return Status::Ok();
  }, txn).status());
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
