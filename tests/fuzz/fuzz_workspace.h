// A Store over a MemKv with a small base Commit on branch main, for the Workspace fuzz targets
// and the seed generator: the records the input supplies land under Workspace id 1, the data
// log holds kLogBytes of patterned bytes at segment 1 offset 0 for data-log records to point at.
#pragma once

#include <memory>
#include <set>

#include "base/coding.h"
#include "fuzz_util.h"
#include "history/keys.h"
#include "kv/data_log.h"
#include "kv/kv.h"
#include "layerfs/store.h"
#include "objects/object_store.h"
#include "objects/tree.h"
#include "workspace/inode.h"
#include "workspace/workspace.h"

namespace layerfs::fuzz {

constexpr uint64_t kWsid = 1;
constexpr size_t kLogBytes = 192 << 10;

struct FuzzStore {
  std::unique_ptr<kv::Kv> kv;
  std::unique_ptr<Store> store;
  ObjectId base;
};

inline TreeEntry FileEntry(const std::string& name, const ObjectId& id, uint64_t size) {
  TreeEntry e;
  e.name = name;
  e.type = EntryType::kFile;
  e.mode = 0644;
  e.id = id;
  e.size = size;
  e.mtime_sec = 1700000000;
  return e;
}

// The base Commit: a (file), d/ {b (file), l -> ../a}, h1 and h2 (hard links), x (xattr). The
// Store's key and the Commit's time are fixed, so every run (and the seeds) has the same ids.
inline std::unique_ptr<FuzzStore> MakeFuzzStore() {
  auto fs = std::make_unique<FuzzStore>();
  fs->kv = kv::NewMemKv();
  {
    std::string config;  // docs/format.md, "meta": version, seed, W, C, M, created
    base::PutFixed32(&config, history::kFormatVersion);
    base::PutFixed64(&config, 0x5eed5eed5eedull);
    for (int cap : {16, 8, 8}) base::PutVarint(&config, cap);
    base::PutSVarint(&config, 1700000000);
    kv::Batch b;
    b.Put(kv::Cf::kMeta, history::kConfigKey, config);
    if (!fs->kv->Write(b, false).ok()) std::abort();
  }
  auto st = Store::OpenOnKv(fs->kv.get(), Policy{});
  if (!st.ok()) std::abort();
  fs->store = std::move(*st);
  auto& os = fs->store->objects();
  auto put = [&](objects::Kind k, std::string_view content) {
    auto r = os.Put(k, content, std::nullopt);
    if (!r.ok()) std::abort();
    return r->id;
  };
  const ObjectId a = put(objects::Kind::kBlob, "hello\n");
  const ObjectId b = put(objects::Kind::kBlob, "bee");
  TreeEntry l;
  l.name = "l";
  l.type = EntryType::kSymlink;
  l.mode = 0777;
  l.target = "../a";
  l.size = l.target.size();
  const ObjectId d = put(objects::Kind::kTree, objects::EncodeTree({FileEntry("b", b, 3), l}));
  TreeEntry de;
  de.name = "d";
  de.type = EntryType::kDir;
  de.mode = 0755;
  de.id = d;
  de.size = 3;
  de.subtree_entries = 2;
  TreeEntry h1 = FileEntry("h1", a, 6), h2 = FileEntry("h2", a, 6), x = FileEntry("x", b, 3);
  h1.link_group = h2.link_group = 1;
  x.xattrs = {{"user.k", "v"}};
  CommitInfo c;
  c.root = put(objects::Kind::kTree, objects::EncodeTree({FileEntry("a", a, 6), de, h1, h2, x}));
  c.message = "base";
  c.time_sec = 1700000000;
  c.logical_bytes = 6 + 3 + 6 + 6 + 3;
  c.files = 7;
  fs->base = put(objects::Kind::kCommit, objects::EncodeCommit(c));
  std::string pattern(kLogBytes, '\0');
  for (size_t i = 0; i < pattern.size(); i++) pattern[i] = static_cast<char>('a' + i % 23);
  if (!fs->store->data_log().Append(pattern).ok()) std::abort();
  std::string wsid;
  base::PutBigEndian64(&wsid, kWsid);
  std::string next;
  base::PutBigEndian64(&next, kWsid + 1);
  kv::Batch batch;
  os.TakeBatch(&batch);
  batch.Put(kv::Cf::kMeta, history::RefKey("main"), fs->base.AsKey());
  batch.Put(kv::Cf::kMeta, "ws/main", wsid);
  batch.Put(kv::Cf::kMeta, "ws-next", next);
  if (!fs->kv->Write(batch, false).ok()) std::abort();
  return fs;
}

// Reads everything reachable from the root within `budget` operations, each inode once; returns
// the largest file size seen.
inline uint64_t WalkWorkspace(workspace::Workspace& ws, int budget) {
  uint64_t largest = 0;
  std::vector<workspace::Ino> todo = {workspace::kRootIno};
  std::set<workspace::Ino> seen;
  while (!todo.empty() && budget-- > 0) {
    workspace::Ino ino = todo.back();
    todo.pop_back();
    if (!seen.insert(ino).second) continue;
    auto a = ws.GetAttr(ino);
    if (!a.ok()) continue;
    (void)ws.ListXattr(ino);
    (void)ws.GetXattr(ino, "user.k");
    switch (a->mode & S_IFMT) {
      case S_IFDIR: {
        auto list = ws.ReadDir(ino);
        if (!list.ok()) break;
        for (const auto& e : *list) {
          if (budget-- <= 0) break;
          auto l = ws.Lookup(ino, e.name);
          if (l.ok()) todo.push_back(l->ino);
        }
        break;
      }
      case S_IFREG: {
        largest = std::max(largest, a->size);
        (void)ws.Read(ino, 0, 256 << 10);
        if (a->size > 70000) (void)ws.Read(ino, 65000, 70000);
        auto p = ws.ReadPieces(ino, 0, 256 << 10);
        if (p.ok()) {
          uint64_t total = 0;
          for (const auto& piece : p->pieces) total += piece.fd >= 0 ? piece.length : piece.bytes.size();
          FUZZ_CHECK(total == p->size);
        }
        (void)ws.Lseek(ino, 0, SEEK_DATA);
        (void)ws.Lseek(ino, 0, SEEK_HOLE);
        break;
      }
      case S_IFLNK: (void)ws.Readlink(ino); break;
      default: break;
    }
  }
  return largest;
}

}  // namespace layerfs::fuzz
