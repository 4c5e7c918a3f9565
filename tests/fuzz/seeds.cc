// layerfs_fuzz_seeds DIR: writes the seed corpora of the fuzz targets into DIR/TARGET/ from real
// objects and records, made by the same encoders the Store uses (tests/fuzz/make-seeds runs it;
// docs/reliability.md, "Fuzzing"). Deterministic: the same build writes the same files.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "codec/chunker.h"
#include "fuzz_objects.h"
#include "fuzz_workspace.h"
#include "history/file_content.h"
#include "merge/merge_into.h"

using namespace layerfs;
using objects::Kind;

namespace {

std::string g_dir;
std::map<std::string, int> g_count;
std::set<std::pair<std::string, std::string>> g_written;

void Emit(const std::string& target, std::string_view bytes) {
  if (!g_written.emplace(target, std::string(bytes)).second) return;  // the same seed again
  const std::string d = g_dir + "/" + target;
  mkdir(d.c_str(), 0755);
  char name[32];
  std::snprintf(name, sizeof name, "/seed-%03d", g_count[target]++);
  std::ofstream(d + name, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string Framed(const std::vector<std::string>& pieces) {
  std::string s;
  for (const auto& p : pieces) base::PutBytes(&s, p);
  return s;
}

// Text that compresses well (records stay small, so seeds do), differing by `variant` here
// and there (so versions delta).
std::string Text(size_t n, int variant) {
  std::string s;
  for (size_t i = 0; s.size() < n; i++)
    s += i % 512 == 0 ? "line " + std::to_string(variant) + "\n" : "a line of some text\n";
  s.resize(n);
  return s;
}

// A history built in slots (fuzz_util.h, SlotId): objects are added children first, and slot =
// count - 1 - order, so everything an object names sits in a later slot and the last object
// added (main's head) is slot 0. Run twice: the first pass counts.
class SlotBuilder {
 public:
  explicit SlotBuilder(size_t total) : total_(total) {}
  struct Obj {
    Kind kind;
    std::string content;
    int base;  // index of the delta base, or -1
  };
  int Add(Kind kind, std::string content, int base = -1) {
    objs_.push_back({kind, std::move(content), base});
    return static_cast<int>(objs_.size()) - 1;
  }
  ObjectId Id(int index) const {
    return total_ ? fuzz::SlotId(static_cast<uint32_t>(total_ - 1 - index)) : ObjectId{};
  }
  size_t size() const { return objs_.size(); }
  // Encodes every object as the Store would (raw, zstd, deltas against the given bases) and
  // returns the records in slot order, each with its family selector byte, delta bases
  // rewritten to slot ids.
  std::vector<std::string> Records(const Policy& policy) const {
    auto kv = kv::NewMemKv();
    objects::ObjectStore os(kv.get(), 7, policy);
    std::vector<ObjectId> real(objs_.size());
    std::map<ObjectId, int> index_of;
    std::vector<std::string> out(objs_.size());
    for (size_t i = 0; i < objs_.size(); i++) {
      const Obj& o = objs_[i];
      std::optional<ObjectId> base;
      if (o.base >= 0) base = real[o.base];
      auto r = os.Put(o.kind, o.content, base);
      if (!r.ok()) std::abort();
      real[i] = r->id;
      index_of[r->id] = static_cast<int>(i);
    }
    if (!os.Flush().ok()) std::abort();
    for (size_t i = 0; i < objs_.size(); i++) {
      auto rec = kv->Get(objects::CfOf(objs_[i].kind), real[i].AsKey());
      if (!rec.ok() || !*rec) std::abort();
      std::string record = **rec;
      auto info = objects::ParseRecord(record);
      if (!info.ok()) std::abort();
      if (info->encoding == objects::Encoding::kDelta) {
        std::string_view payload;
        (void)objects::ParseRecord(record, &payload);
        const size_t base_at = record.size() - payload.size() - ObjectId::kSize;
        const ObjectId slot = Id(index_of.at(info->base));
        record.replace(base_at, ObjectId::kSize, std::string(slot.AsKey()));
      }
      const uint8_t selector = objects::CfOf(objs_[i].kind) == kv::Cf::kBlobs   ? 0
                               : objects::CfOf(objs_[i].kind) == kv::Cf::kTrees ? 1
                                                                                : 2;
      out[total_ - 1 - i] = std::string(1, static_cast<char>(selector)) + record;
    }
    return out;
  }

 private:
  size_t total_;
  std::vector<Obj> objs_;
};

TreeEntry Dir(const std::string& name, const ObjectId& id, uint64_t bytes, uint64_t entries) {
  TreeEntry e;
  e.name = name;
  e.type = EntryType::kDir;
  e.mode = 0755;
  e.id = id;
  e.size = bytes;
  e.subtree_entries = entries;
  return e;
}

// A history of edits: versions of a text file (a delta chain), a compressible larger file
// (zstd), a chunked file, a subdirectory, a symlink, hard links; two branches.
void History(SlotBuilder& b, int versions) {
  int prev_text = -1, prev_tree = -1, prev_commit = -1;
  for (int v = 0; v < versions; v++) {
    std::string text = Text(300 + v * 40, v);
    int blob = b.Add(Kind::kBlob, text, prev_text);
    prev_text = blob;
    int big = b.Add(Kind::kBlob, Text(50000, 1000 + v));
    std::string c1 = Text(49200, 5), c2 = Text(49152, 6 + v);
    int ch1 = b.Add(Kind::kChunk, c1), ch2 = b.Add(Kind::kChunk, c2);
    int list = b.Add(Kind::kChunkList,
                     objects::EncodeChunkList({{b.Id(ch1), c1.size()}, {b.Id(ch2), c2.size()}}));
    TreeEntry s;
    s.name = "sym";
    s.type = EntryType::kSymlink;
    s.mode = 0777;
    s.target = "text.txt";
    s.size = s.target.size();
    int sub = b.Add(Kind::kTree, objects::EncodeTree({fuzz::FileEntry("inner", b.Id(blob), text.size()), s}));
    TreeEntry l1 = fuzz::FileEntry("link1", b.Id(blob), text.size()), l2 = l1;
    l2.name = "link2";
    l1.link_group = l2.link_group = 1;
    TreeEntry chunked = fuzz::FileEntry("chunked", b.Id(list), c1.size() + c2.size());
    chunked.chunked = true;
    TreeEntry x = fuzz::FileEntry("text.txt", b.Id(blob), text.size());
    x.xattrs = {{"user.note", "v" + std::to_string(v)}};
    std::vector<TreeEntry> root = {fuzz::FileEntry("big", b.Id(big), 50000), chunked, l1, l2,
                                   Dir("sub", b.Id(sub), text.size(), 2), x};
    int tree = b.Add(Kind::kTree, objects::EncodeTree(root), prev_tree);
    prev_tree = tree;
    CommitInfo c;
    c.root = b.Id(tree);
    if (prev_commit >= 0) c.parents = {b.Id(prev_commit)};
    c.message = "version " + std::to_string(v);
    c.time_sec = 1700000000 + v;
    c.logical_bytes = 50000 + c1.size() + c2.size() + 3 * text.size();
    c.files = 8;
    prev_commit = b.Add(Kind::kCommit, objects::EncodeCommit(c));
  }
}

void ObjectSeeds() {
  for (int versions : {1, 2, 5}) {
    for (const Policy& p : {Policy{}, Policy{2, 1, 1}}) {
      // Pass 1 counts; pass 2 builds with the slots known. The last two objects added are the
      // side branch's head (slot 1) and main's (slot 0).
      auto build = [&](SlotBuilder& b) {
        History(b, versions);
        const int first_head = static_cast<int>(b.size()) - 1;
        CommitInfo side;
        side.root = b.Id(first_head - 1);  // the last tree
        side.parents = {b.Id(first_head)};
        side.message = "side";
        side.time_sec = 1800000000;
        side.files = 8;
        b.Add(Kind::kCommit, objects::EncodeCommit(side));
        CommitInfo merge = side;
        merge.message = "merge";
        merge.parents = {b.Id(first_head), b.Id(first_head)};
        b.Add(Kind::kCommit, objects::EncodeCommit(merge));
      };
      SlotBuilder count(0);
      build(count);
      SlotBuilder b(count.size());
      build(b);
      auto records = b.Records(p);
      if (records.size() <= 24) Emit("store", Framed(records));
      const bool small_policy = p.whole == 2;
      Emit("record", std::string(1, static_cast<char>(small_policy ? 2 : 0)) + Framed(records));
      Emit("record", std::string(1, static_cast<char>(0x11 | (small_policy ? 2 : 0))) + Framed(records));
    }
  }
  // Decoded contents for the pure decoders.
  SlotBuilder count(0);
  History(count, 2);
  SlotBuilder b(count.size());
  History(b, 2);
  auto kv = kv::NewMemKv();
  objects::Tuning no_cache;
  no_cache.cache_bytes = 0;
  objects::ObjectStore os(kv.get(), 7, Policy{}, no_cache);
  os.SetIdCheckForFuzzing(fuzz::SlotChecker(7));
  auto records = b.Records(Policy{});
  fuzz::SeedSlots(kv.get(), std::vector<std::string_view>(records.begin(), records.end()));
  for (size_t i = 0; i < records.size(); i++) {
    const Kind k = static_cast<Kind>(records[i][1]);  // after the family selector
    if (k != Kind::kTree && k != Kind::kCommit && k != Kind::kChunkList) continue;
    auto got = os.Get(k, fuzz::SlotId(static_cast<uint32_t>(i)));
    if (!got.ok()) std::abort();
    Emit(k == Kind::kTree ? "tree" : k == Kind::kCommit ? "commit" : "chunk_list", *got);
  }
  Emit("tree", objects::EncodeTree({}));
}

// Workspace records after real operations on the fuzz targets' base Commit (fuzz_workspace.h).
void WorkspaceSeeds() {
  for (int variant = 0; variant < 4; variant++) {
    auto fs = fuzz::MakeFuzzStore();
    workspace::WorkspaceOptions opts;
    opts.branch = "main";
    auto ws = workspace::Workspace::Open(*fs->store, opts);
    if (!ws.ok()) std::abort();
    auto& w = **ws;
    const workspace::Caller c{1000, 1000};
    fuzz::WalkWorkspace(w, 100);
    if (variant >= 1) {
      auto f = w.Mknod(workspace::kRootIno, "new", S_IFREG | 0640, 0, c);
      if (f.ok()) {
        (void)w.Write(f->ino, 0, Text(3 * workspace::kBlockSize + 100, 9));  // whole blocks: data log
        (void)w.Write(f->ino, 10, "patch");                                // a patch on a logged block
        (void)w.SetXattr(f->ino, "user.a", "b", 0);
      }
      auto d = w.Mkdir(workspace::kRootIno, "dir", 0755, c);
      if (d.ok()) (void)w.Symlink(d->ino, "s", "../new", c);
    }
    if (variant >= 2) {
      auto a = w.Lookup(workspace::kRootIno, "a");
      if (a.ok()) {
        (void)w.Write(a->ino, 2, "XY");
        (void)w.Link(a->ino, workspace::kRootIno, "a2");
      }
      (void)w.Rename(workspace::kRootIno, "x", workspace::kRootIno, "y", 0);
      (void)w.Unlink(workspace::kRootIno, "h1");
    }
    if (variant == 3) {
      (void)w.Commit("seed");
      auto d = w.Lookup(workspace::kRootIno, "d");
      if (d.ok()) (void)w.Mkdir(d->ino, "deeper", 0700, c);
      merge::MergeState m;
      m.pending = m.ours = m.theirs = fs->base;
      m.source_label = "side";
      m.message = "merge side";
      merge::Conflict conflict;
      conflict.path = "a";
      conflict.kind = merge::ConflictKind::kContent;
      conflict.sides = {"a~ours", "a~theirs"};
      m.conflicts = {conflict};
      Emit("merge_record", merge::EncodeMergeState(m));
      m.op = merge::MergeOp::kCherryPick;
      Emit("merge_record", merge::EncodeMergeState(m));
    }
    // Dump the records under the Workspace's prefix, keys without it.
    workspace::Keys keys(fuzz::kWsid);
    std::vector<std::string> pieces;
    (void)fs->kv->Scan(kv::Cf::kWorkspace, keys.prefix(), keys.End(), [&](auto k, auto v) {
      pieces.emplace_back(k.substr(keys.prefix().size()));
      pieces.emplace_back(v);
      if (k.size() > keys.prefix().size() && k[keys.prefix().size()] == workspace::kTagInode)
        Emit("inode", v);
      return true;
    });
    for (uint8_t flags : {0, 0x81, 0x5a, 0xa6}) Emit("workspace", std::string(1, static_cast<char>(flags)) + Framed(pieces));
  }
  // Data-log records of one file: plain, patched, short, and B blocks beside them.
  auto ref = [](uint64_t off, uint32_t len, const std::vector<std::pair<uint32_t, std::string>>& patches) {
    std::string v;
    kv::DataRef{1, off, len}.EncodeTo(&v);
    for (const auto& [o, bytes] : patches) base::PutBytes(&v, kv::EncodePatch(o, bytes));
    return v;
  };
  auto key = [](char tag, uint64_t blk) {
    std::string k(1, tag);
    base::PutVarint(&k, blk);
    return k;
  };
  const uint64_t kB = workspace::kBlockSize;
  struct Case {
    uint8_t flags;
    uint64_t size;
    std::vector<std::string> pieces;
  };
  std::vector<Case> cases = {
      {0x01, 2 * kB, {key('R', 0), ref(0, kB, {}), key('R', 1), ref(kB, kB, {})}},
      {0x03, 2 * kB + 7, {key('R', 0), ref(0, kB, {{5, "xyz"}}), key('B', 2), "1234567"}},
      {0x4f, kB + 100, {key('R', 1), ref(2 * kB, 100, {{90, "0123456789ab"}}), key('B', 0), std::string(300, 'q')}},
      {0x79, 3 * kB, {key('R', 2), ref(kB / 2, kB, {}), key('B', 1), "short"}},
      {0x00, 10, {key('B', 0), "0123456789"}},
  };
  for (const auto& c : cases) {
    std::string in(1, static_cast<char>(c.flags));
    base::PutVarint(&in, c.size);
    Emit("data_log_record", in + Framed(c.pieces));
  }
}

void ProtocolSeeds() {
  // Requests as a client sends them (the daemon's side reads these lines) ...
  Emit("protocol", "{\"protocol\":1,\"id\":7,\"verb\":\"log\",\"args\":{\"ref\":\"main\",\"max_count\":10},\"cwd\":\"/tmp\"}\n");
  Emit("protocol", "{\"protocol\":1,\"id\":\"a\",\"verb\":\"commit\",\"args\":{\"message\":\"\\u00e9t\\u00e9\"}}\n{\"protocol\":2}\n");
  // ... and answers as a daemon sends them (the client's side): events, results, errors.
  Emit("protocol", "{\"id\":1,\"event\":\"progress\",\"progress\":{\"phase\":\"push\",\"objects\":120}}\n"
                   "{\"id\":1,\"ok\":true,\"result\":[{\"id\":\"ab\"}]}\n");
  Emit("protocol", "{\"id\":null,\"ok\":false,\"error\":{\"code\":\"ENOENT\",\"errno\":2,\"message\":\"no branch\"}}\n");
  Emit("protocol", "{\"id\":1,\"ok\":false,\"error\":{\"code\":\"CONFLICT\",\"message\":\"m\",\"result\":{}}}\n");
  // Once fatal: an error object whose fields have the wrong types.
  Emit("protocol", "{\"id\":1,\"ok\":false,\"error\":{\"code\":5,\"errno\":\"x\",\"message\":[]}}\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  mkdir(g_dir.c_str(), 0755);
  ObjectSeeds();
  WorkspaceSeeds();
  ProtocolSeeds();
  for (const auto& [t, n] : g_count) std::printf("%s: %d seeds\n", t.c_str(), n);
  return 0;
}
