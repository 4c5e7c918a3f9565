// Fuzz target: a file's blocks in the data log and in the database (docs/format.md, "P R"
// records and "P B" blocks with their patches), read, patched, truncated and committed.
//
// Input: u8 flags, varint file size, then framed pieces in pairs: a block number (varint) with
// the tag 'R' or 'B' as its first byte, and the record's value. The records are put under file
// "a" of a fresh Workspace (its inode marked as having blocks, and data-log records with
// flags & 1), over a data log holding kLogBytes at segment 1.
#include "fuzz_workspace.h"

using namespace layerfs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  base::Reader r(fuzz::AsView(data, size));
  uint8_t flags;
  uint64_t file_size;
  if (!r.U8(&flags) || !r.Varint(&file_size)) return 0;
  auto fs = fuzz::MakeFuzzStore();
  workspace::WorkspaceOptions opts;
  opts.branch = "main";
  auto ws = workspace::Workspace::Open(*fs->store, opts);
  FUZZ_CHECK(ws.ok());
  auto a = (*ws)->Lookup(workspace::kRootIno, "a");
  FUZZ_CHECK(a.ok());
  const workspace::Ino ino = a->ino;
  workspace::Keys keys(fuzz::kWsid);
  auto rec = fs->kv->Get(kv::Cf::kWorkspace, keys.Inode(ino));
  FUZZ_CHECK(rec.ok() && *rec);
  auto n = workspace::DecodeInode(ino, **rec);
  FUZZ_CHECK(n.ok());
  // At most 1 MiB: a commit reads the whole file (holes too), and a huge sparse file is slow
  // to commit by design, not a finding.
  n->size = file_size % (1 << 20);
  n->has_blocks = true;
  n->has_refs = flags & 1;
  n->valid_len = std::min<uint64_t>(n->valid_len, n->size);
  kv::Batch b;
  b.Put(kv::Cf::kWorkspace, keys.Inode(ino), workspace::EncodeInode(*n));
  auto pieces = fuzz::Pieces(r.Rest(), 64);
  for (size_t i = 0; i + 1 < pieces.size(); i += 2) {
    base::Reader kr(pieces[i]);
    uint8_t tag;
    uint64_t blk;
    if (!kr.U8(&tag) || !kr.Varint(&blk)) continue;
    b.Put(kv::Cf::kWorkspace, tag == 'R' ? keys.Ref(ino, blk) : keys.Block(ino, blk), pieces[i + 1]);
  }
  (void)fs->kv->Write(b, false);
  auto& w = **ws;
  (void)w.Read(ino, 0, 256 << 10);
  (void)w.Read(ino, 100000, 100000);
  (void)w.ReadPieces(ino, 0, 256 << 10);
  (void)w.Lseek(ino, 1, SEEK_HOLE);
  if (flags & 2) (void)w.Write(ino, 70000, "patched");
  if (flags & 4) (void)w.Write(ino, 65536, std::string(workspace::kBlockSize, 'z'));
  if (flags & 8) {
    workspace::AttrChange ch;
    ch.size = (flags & 16) ? 100000 : 3;
    (void)w.SetAttr(ino, ch);
  }
  (void)w.Read(ino, 0, 256 << 10);
  if (flags & 32) (void)w.Fsync(ino, false);
  if (flags & 64) {
    auto c = w.Commit("fuzz");
    if (c.ok()) {
      auto got = w.Read(ino, 0, 256 << 10);
      (void)got;
    }
  }
  (void)workspace::CollectDataLog(*fs->store, false);
  return 0;
}
