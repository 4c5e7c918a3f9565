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
#include "fuzz_remote.h"
#include "fuzz_workspace.h"
#include "history/file_content.h"
#include "merge/merge_into.h"
#include "remote/catalog_keys.h"
#include "remote/remote.h"
#include "remote/sync.h"

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

// A history pushed to an in-memory remote: versions of a text file (deltas), a large
// compressible file (a zstd record, a stored frame), small files (raw records in zstd frames),
// a subdirectory, two branches. The remote's keys feed the remote targets; pack names and the
// config are rewritten to fixed ones so the seeds are deterministic.
void RemoteSeeds() {
  fuzz::InstallRemoteOpener();
  for (size_t pack_target : {size_t{0}, size_t{6000}}) {
    auto kv = kv::NewMemKv();
    CreateOptions co;
    co.seed = fuzz::kRemoteSeed;
    co.empty = true;  // no first Commit stamped with the time of the run
    auto st = Store::OpenOnKv(kv.get(), Policy{2, 1, 1}, co);
    if (!st.ok()) std::abort();
    Store& store = **st;
    auto& os = store.objects();
    auto put = [&](Kind k, const std::string& content, std::optional<ObjectId> base = std::nullopt) {
      auto r = os.Put(k, content, base);
      if (!r.ok()) std::abort();
      return r->id;
    };
    CommitInfo first;
    first.root = put(Kind::kTree, objects::EncodeTree({}));
    first.message = "first";
    first.time_sec = 1690000000;
    ObjectId parent = put(Kind::kCommit, objects::EncodeCommit(first)), text;
    bool have_text = false;
    for (int v = 0; v < 4; v++) {
      std::string t = Text(900 + 50 * v, v);
      text = put(Kind::kBlob, t, have_text ? std::optional<ObjectId>(text) : std::nullopt);
      have_text = true;
      std::string big = Text(60000, 100 + v);
      const ObjectId big_id = put(Kind::kBlob, big);
      const ObjectId small = put(Kind::kBlob, "small " + std::to_string(v) + "\n");
      const ObjectId sub = put(Kind::kTree, objects::EncodeTree({fuzz::FileEntry("s", small, 8)}));
      std::vector<TreeEntry> root = {fuzz::FileEntry("big", big_id, big.size()),
                                     Dir("sub", sub, 8, 1), fuzz::FileEntry("text", text, t.size())};
      CommitInfo c;
      c.root = put(Kind::kTree, objects::EncodeTree(root));
      c.parents = {parent};
      c.message = "version " + std::to_string(v);
      c.time_sec = 1700000000 + v;
      c.logical_bytes = big.size() + t.size() + 8;
      c.files = 3;
      parent = put(Kind::kCommit, objects::EncodeCommit(c));
      if (v == 1 && !store.SetBranch("side", parent).ok()) std::abort();
    }
    if (!os.Flush().ok() || !store.SetBranch("main", parent).ok()) std::abort();
    auto t = std::shared_ptr<remote::Transport>(remote::NewMemTransport(fuzz::kRemoteUrl));
    fuzz::CurrentRemote() = t;
    if (!remote::AddRemote(store, {"origin", std::string(fuzz::kRemoteUrl), false, ""}).ok()) std::abort();
    remote::SetPackTargetForTesting(pack_target);
    remote::PushOptions po;
    po.branches = {"main", "side"};
    auto pushed = remote::Push(store, "origin", po);
    remote::SetPackTargetForTesting(0);
    if (!pushed.ok() || !pushed->all_ok()) std::abort();

    // The remote's keys, pack names fixed.
    auto keys = t->List("");
    if (!keys.ok()) std::abort();
    std::map<std::string, std::string> names;
    for (const auto& k : *keys)
      if (k.starts_with("index/")) names[k.substr(6)] = fmt::format("{:012x}-{:016x}", names.size() + 1, names.size() + 1);
    remote::RemoteConfig cfg;
    cfg.id = std::string(32, 'a');
    cfg.seed = fuzz::kRemoteSeed;
    cfg.policy = Policy{2, 1, 1};
    cfg.created = 1700000000;
    const std::string config = remote::EncodeRemoteConfig(cfg);
    std::vector<std::string> kvs, kvs_trailerless;
    std::string main_ref;
    for (const auto& k : *keys) {
      auto v = t->Get(k);
      if (!v.ok()) std::abort();
      std::string key = k, value = *v, bare = *v;
      if (k == "config") value = bare = config;
      for (const auto& dir : {std::string("index/"), std::string("pack/")})
        if (k.starts_with(dir)) key = dir + names.at(k.substr(dir.size()));
      if (k.starts_with("index/")) {
        bare = value.substr(0, value.size() - ObjectId::kSize);
        const std::string pack = *t->Get("pack/" + k.substr(6));
        Emit("pack", std::string(1, '\x01') + Framed({bare, pack}));
        Emit("pack", std::string(1, '\x00') + Framed({value, pack}));
        Emit("pack_index", std::string(1, '\x01') + bare);
        auto index = remote::DecodeIndex(value);
        if (!index.ok()) std::abort();
        for (size_t i = 0; i < index->entries.size(); i += 7)
          Emit("pack_index", std::string(1, '\x00') + remote::EncodeLocation(static_cast<uint32_t>(i), index->entries[i]));
      }
      if (k == "refs/heads/main") main_ref = value;
      kvs.insert(kvs.end(), {key, value});
      kvs_trailerless.insert(kvs_trailerless.end(), {key, bare});
    }
    Emit("fetch", std::string(1, '\x00') + Framed(kvs));
    Emit("fetch", std::string(1, '\x01') + Framed(kvs_trailerless));
    Emit("fetch", std::string(1, '\x03') + Framed(kvs_trailerless));
    // The Store's own records about its remote, after the push.
    auto meta = [&](kv::Cf cf, const std::string& key) {
      auto v = kv->Get(cf, key);
      return v.ok() && *v ? **v : std::string();
    };
    std::string rpack, rloc;
    const std::string rpack_prefix = remote::PackKey("origin", "");
    (void)kv->Scan(kv::Cf::kIndex, rpack_prefix, history::PrefixEnd(rpack_prefix), [&](auto, auto v) {
      rpack = v;
      return false;
    });
    const std::string rloc_prefix = "rloc/origin/";
    (void)kv->Scan(kv::Cf::kIndex, rloc_prefix, history::PrefixEnd(rloc_prefix), [&](auto, auto v) {
      rloc = v;
      return false;
    });
    std::string epoch;
    base::PutFixed64(&epoch, 3);
    std::string remote_entry;  // the Store's `remote/origin`, with the fixed config's id
    base::PutU8(&remote_entry, 1);
    base::PutBytes(&remote_entry, fuzz::kRemoteUrl);
    base::PutU8(&remote_entry, 0);
    base::PutBytes(&remote_entry, cfg.id);
    std::string rnum;  // pack 1's catalog record, its name fixed as on the remote above
    {
      const std::string v = meta(kv::Cf::kIndex, remote::PackNumberKey("origin", 1));
      base::Reader r(v);
      std::string_view name;
      if (!r.Bytes(&name)) std::abort();
      base::PutBytes(&rnum, names.at(std::string(name)));
      rnum.append(r.Rest());
    }
    std::vector<std::string> cpieces = {config, main_ref, "side", main_ref,
                                        remote_entry,
                                        meta(kv::Cf::kMeta, history::RemoteRefKey("origin", "main")), rpack,
                                        rnum, rloc, epoch};
    for (uint8_t flags : {0, 1, 2, 3}) Emit("remote_config", std::string(1, static_cast<char>(flags)) + Framed(cpieces));
  }
  Emit("remote_config", std::string(1, '\x00') +
                            Framed({"{\"layerfs_remote\":2,\"id\":\"x\"}", "not a ref\n", "../escape", "00"}));

  // Pending records: a chain of versions hinting at each other (the oldest first in the
  // queue), one hinting at itself, two at each other, damage under an honest id, queue lists
  // naming pieces and raw ones.
  auto honest = [](uint8_t kind, uint8_t hint, const std::string& content) {
    return std::string{'\x00', static_cast<char>(kind), static_cast<char>(hint)} + content;
  };
  const std::string v0 = Text(600, 1), v1 = Text(640, 2), v2 = Text(680, 3);
  Emit("pending", std::string(1, '\x00') + Framed({honest(0, 0xff, v0), honest(0, 0, v1), honest(0, 1, v2)}));
  Emit("pending", std::string(1, '\x03') + Framed({honest(0, 2, v0), honest(0, 0, v1), honest(0, 1, v2)}));
  Emit("pending", std::string(1, '\x00') + Framed({honest(3, 0, Text(200, 4)), honest(1, 2, v1), honest(1, 1, v2)}));
  Emit("pending", std::string(1, '\x01') +
                      Framed({honest(0, 0xff, v0), std::string{'\x01', '\x00', '\x00'} + "garbage",
                              std::string{'\x02', '\x00', '\x00', '\x00', '\x01'}, "\x03\x05xyz"}));
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

// S3 answers (s3_response): a status byte (index into the target's table: 0 = 200,
// 5 = 404, 9 = 503), header lines, an empty line, the body.
void S3Seeds() {
  Emit("s3_response", std::string(1, '\0') +
                          "HTTP/1.1 200 OK\nContent-Length: 310\nETag: \"0123abcd\"\n\n"
                          "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult "
                          "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>bkt</Name><Prefix>pre/x/</Prefix>"
                          "<KeyCount>2</KeyCount><IsTruncated>true</IsTruncated><NextContinuationToken>a+b/c==</NextContinuationToken>"
                          "<Contents><Key>pre/x/1</Key><Size>7</Size><ETag>&quot;e1&quot;</ETag></Contents>"
                          "<Contents><Key>pre/x/2</Key></Contents></ListBucketResult>");
  Emit("s3_response", std::string(1, '\0') +
                          "HTTP/1.1 100 Continue\nHTTP/1.1 200 OK\nETag: W/\"weak\"\nContent-Length: 0\n\n"
                          "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>k</Key></Contents></ListBucketResult>");
  Emit("s3_response", std::string(1, '\x05') +
                          "HTTP/1.1 404 Not Found\nContent-Type: application/xml\n\n"
                          "<?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code><Message>The specified bucket does not "
                          "exist</Message><BucketName>bkt</BucketName><RequestId>tx0001</RequestId></Error>");
  Emit("s3_response", std::string(1, '\x09') +
                          "HTTP/1.1 503 Slow Down\nRetry-After: 1\n\n"
                          "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>");
  Emit("s3_response", std::string(1, '\x07') +
                          "HTTP/1.1 412 Precondition Failed\nContent-Length: 18446744073709551615\n\n"
                          "<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you "
                          "specified did not hold</Message></Error>");
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
  RemoteSeeds();
  S3Seeds();
  for (const auto& [t, n] : g_count) std::printf("%s: %d seeds\n", t.c_str(), n);
  return 0;
}
