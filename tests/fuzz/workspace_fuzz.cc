// Fuzz target: a Workspace's records (docs/format.md, "Workspace records"): state, inodes,
// directory entries, blocks, data-log records, dirty marks, orphans, link groups and the merge
// record, as a Store another process (or a damaged disk) left them.
//
// Input: u8 flags, then framed pieces in pairs: a key (after the Workspace's 8-byte prefix) and
// its value. The Workspace is opened over them, walked (fuzz_workspace.h), changed a little
// (flags: writes, a truncate, mkdir, unlink, rename, copies), asked for its changes, committed,
// and its merge record read.
#include "fuzz_workspace.h"
#include "merge/merge_into.h"

using namespace layerfs;
using workspace::Ino;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  auto fs = fuzz::MakeFuzzStore();
  auto pieces = fuzz::Pieces(fuzz::AsView(data + 1, size - 1), 256);
  workspace::Keys keys(fuzz::kWsid);
  kv::Batch b;
  for (size_t i = 0; i + 1 < pieces.size(); i += 2)
    b.Put(kv::Cf::kWorkspace, keys.prefix() + std::string(pieces[i]), pieces[i + 1]);
  (void)fs->kv->Write(b, false);
  workspace::WorkspaceOptions opts;
  opts.branch = "main";
  auto ws = workspace::Workspace::Open(*fs->store, opts);
  if (!ws.ok()) return 0;
  const uint64_t largest = fuzz::WalkWorkspace(**ws, 300);
  const workspace::Caller caller{1000, 1000};
  if (flags & 1) (void)(*ws)->Write(2, 3, "patch");
  if (flags & 2) (void)(*ws)->Write(2, 0, std::string(workspace::kBlockSize, 'w'));
  if (flags & 4) {
    workspace::AttrChange ch;
    ch.size = (flags & 8) ? 70000 : 1;
    (void)(*ws)->SetAttr(2, ch);
  }
  if (flags & 16) (void)(*ws)->Mkdir(workspace::kRootIno, "new", 0755, caller);
  if (flags & 32) (void)(*ws)->Unlink(workspace::kRootIno, "a");
  if (flags & 64) (void)(*ws)->Rename(workspace::kRootIno, "d", workspace::kRootIno, "e", 0);
  if (flags & 128) {  // copy_file_range: whole (a clone where inode 2 is committed content), and within a file
    (void)(*ws)->CopyRange(2, 0, 3, 0, 1 << 20);
    (void)(*ws)->CopyRange(2, 1, 2, 200000, 70000);
  }
  (void)(*ws)->Changes();
  if (auto rec = (*ws)->MergeRecord(); rec.ok() && *rec) {
    auto m = merge::DecodeMergeState(**rec);
    if (m.ok()) (void)merge::UnresolvedPaths(**ws, *m);
  }
  // A commit reads whole files, holes too: a huge sparse file is slow to commit by design.
  if ((flags & 128) && largest <= (4 << 20)) {
    auto c = (*ws)->Commit("fuzz");
    if (c.ok()) (void)fs->store->Verify({*c});
    (void)workspace::CollectDataLog(*fs->store, false);
  }
  return 0;
}
