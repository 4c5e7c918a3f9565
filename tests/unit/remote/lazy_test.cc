// Lazy Stores (objects fetched on first read) and what a damaged or hostile remote can and
// cannot do; the pack and index codec.
#include "base/coding.h"
#include "base/hash.h"
#include "codec/zstd_codec.h"
#include "history/file_content.h"
#include "objects/tree.h"
#include "remote/pack.h"
#include "sync_fixture.h"
#include "workspace/workspace.h"

namespace layerfs::testing {
namespace {

using objects::Kind;
using remote::FaultTransport;

uint64_t LocalObjects(Host& h) {
  auto s = h.store->Stats();
  EXPECT_TRUE(s.ok());
  uint64_t n = 0;
  for (auto& [k, v] : s->objects) n += v;
  return n;
}

std::string RawRecord(Kind kind, std::string_view content) {
  std::string r;
  base::PutU8(&r, static_cast<uint8_t>(kind));
  base::PutU8(&r, 0);
  base::PutVarint(&r, 0);
  base::PutVarint(&r, content.size());
  r.append(content);
  return r;
}

struct Crafted {
  Kind kind;
  ObjectId id;
  std::string record;
};

class LazyTest : public SyncTest {
 protected:
  static constexpr uint64_t kSeed = 42;
  ObjectId Id(std::string_view content) { return base::HashContent(content, kSeed); }

  // Publishes hand-made records on remote `fault` as one pack, with `head` as main.
  void Publish(FaultTransport* fault, const std::vector<Crafted>& objs, const ObjectId& head) {
    remote::RemoteConfig cfg;
    cfg.id = remote::RandomHex(32);
    cfg.seed = kSeed;
    ASSERT_TRUE(fault->base()->Put("config", remote::EncodeRemoteConfig(cfg)).ok());
    remote::PackBuilder b;
    for (const auto& o : objs) ASSERT_TRUE(b.Add(o.kind, o.id, o.record).ok());
    auto built = b.Finish();
    ASSERT_TRUE(built.ok());
    std::string name = remote::NewPackName();
    ASSERT_TRUE(fault->base()->Put("pack/" + name, built->first).ok());
    ASSERT_TRUE(fault->base()->Put("index/" + name, built->second).ok());
    ASSERT_TRUE(fault->base()->CasRef("refs/heads/main", head.Hex() + "\n", std::nullopt).ok());
  }
  // A commit of `root`, as a record.
  Crafted CommitOf(const ObjectId& root) {
    CommitInfo c;
    c.root = root;
    c.message = "crafted";
    std::string data = objects::EncodeCommit(c);
    return {Kind::kCommit, Id(data), RawRecord(Kind::kCommit, data)};
  }
};

TEST_F(LazyTest, ReadingOneFileFetchesThatFileOnly) {
  auto* fault = NewRemote();
  Host a = NewHostWithRemote();
  auto files = Tree(300, 21, 4000);
  files["big/chunked"] = TextBytes(5 << 20, 3);
  ObjectId head = Commit(a, files);
  auto pushed = Push(a);
  ASSERT_TRUE(pushed.ok()) << pushed.status().ToString();

  Host b = NewHostWithRemote("r", /*lazy=*/true);
  auto f = Fetch(b);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->lazy);
  EXPECT_EQ(f->received.objects, 0u);
  uint64_t before = LocalObjects(b);
  uint64_t read0 = fault->bytes_read();
  uint64_t ranges0 = fault->ranges_read();
  auto at = b.store->Resolve("origin/main");
  ASSERT_TRUE(at.ok());
  ASSERT_EQ(*at, head);
  EXPECT_EQ(Cat(b, head, "d3/f10"), files["d3/f10"]);
  // The commit, the root tree, d3's tree and the file: one range each at most. The other
  // records of their frames came in those reads and are kept (hashed right), nothing more.
  EXPECT_LE(fault->ranges_read() - ranges0, 4u);
  EXPECT_GT(LocalObjects(b) - before, 4u);
  EXPECT_LT(fault->bytes_read() - read0, pushed->sent.bytes / 20);

  // A range of a large file reads its chunk list and the chunks it covers.
  uint64_t read1 = fault->bytes_read();
  auto e = b.store->Lookup(head, "big/chunked");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto part = history::ReadContentRange(b.store->objects(), e->id, e->chunked, 3 << 20, 1000);
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  EXPECT_EQ(*part, files["big/chunked"].substr(3 << 20, 1000));
  EXPECT_LT(fault->bytes_read() - read1, 1u << 20);

  // verify counts what was never fetched, without fetching it; gc copes.
  auto v = b.store->Verify({});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->ok()) << v->problems[0];
  EXPECT_GT(v->missing, 0u);
  uint64_t read2 = fault->bytes_read();
  auto gc = b.store->Gc();
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_GT(gc->missing, 0u);
  EXPECT_EQ(fault->bytes_read(), read2);
  EXPECT_EQ(Cat(b, head, "d3/f10"), files["d3/f10"]);
  // verify --fetch brings and checks everything.
  auto all = b.store->Verify({}, nullptr, /*fetch=*/true);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->ok()) << all->problems[0];
  EXPECT_EQ(all->missing, 0u);
  EXPECT_EQ(Cat(b, head, "big/chunked"), files["big/chunked"]);
}

// A lazy fork mounts, lists a directory and reads one file fetching that path's trees only:
// directory entries carry their subtree's subdirectory count and whether hard links lie below
// (format 7), so neither nlink nor the search for hard links reads other subtrees. nlink and
// a hard link deep in one directory are still exact.
TEST_F(LazyTest, AForkMountsListsAndReadsWithoutFetchingOtherTrees) {
  auto* fault = NewRemote();
  Host a = NewHostWithRemote();
  TempDir src;
  auto path = [&](const std::string& p) { return src.path() + "/" + p; };
  for (int d = 0; d < 300; d++) {
    const std::string dir = "d" + std::to_string(d);
    std::filesystem::create_directories(path(dir + "/x"));
    std::filesystem::create_directories(path(dir + "/y"));
    for (int f = 0; f < 30; f++)
      WriteFile(path(dir + "/a-file-with-a-rather-long-name-" + std::to_string(f)), TextBytes(200 + f, d * 100 + f));
    WriteFile(path(dir + "/x/g"), TextBytes(100, d));
  }
  ASSERT_EQ(::link(path("d77/x/g").c_str(), path("d77/y/h").c_str()), 0);
  std::vector<std::string> all;
  for (auto& e : std::filesystem::recursive_directory_iterator(src.path())) all.push_back(e.path());
  for (auto& p : all) SetMtime(p, 1700000000, 0);
  auto head = a.store->Import(src.path(), {});
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  // The import wrote summaries: d77 has two subdirectories and a hard link below, d5 none.
  auto d77 = a.store->Lookup(*head, "d77");
  auto d5 = a.store->Lookup(*head, "d5");
  ASSERT_TRUE(d77.ok() && d5.ok());
  EXPECT_TRUE(d77->summary && d77->links_below);
  EXPECT_EQ(d77->subdirs, 2u);
  EXPECT_TRUE(d5->summary && !d5->links_below);
  auto pushed = Push(a);
  ASSERT_TRUE(pushed.ok()) << pushed.status().ToString();

  Host b = NewHostWithRemote("r", /*lazy=*/true);
  ASSERT_TRUE(Fetch(b).ok());
  ASSERT_TRUE(b.store->Fork("w", "origin/main").ok());
  const uint64_t ranges0 = fault->ranges_read(), bytes0 = fault->bytes_read();
  auto ws = workspace::Workspace::Open(*b.store, {.branch = "w"});
  ASSERT_TRUE(ws.ok()) << ws.status().ToString();
  auto root = (*ws)->ReadDir(workspace::kRootIno);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_EQ(root->size(), 300u);
  auto d9 = (*ws)->Lookup(workspace::kRootIno, "d9");
  ASSERT_TRUE(d9.ok());
  EXPECT_EQ(d9->nlink, 4u);
  auto f = (*ws)->LookupPath("d5/a-file-with-a-rather-long-name-7");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto data = (*ws)->Read(f->ino, 0, 1 << 20);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, TextBytes(207, 507));
  auto h = (*ws)->LookupPath("d77/y/h");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->nlink, 2u);
  // The commit, the root, d5, d77, d77/x, d77/y, the file: one range each at most (neighbours
  // in their frames come along). Reading every tree takes the 900 trees' frames.
  const uint64_t ranges = fault->ranges_read() - ranges0;
  EXPECT_LE(ranges, 10u) << (fault->bytes_read() - bytes0) << " bytes";
  EXPECT_LT(fault->bytes_read() - bytes0, pushed->sent.bytes / 4);
  // A write through one link reaches the other.
  ASSERT_TRUE((*ws)->Write(h->ino, 0, "through h").ok());
  auto g = (*ws)->LookupPath("d77/x/g");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->ino, h->ino);
  EXPECT_EQ((*ws)->Read(g->ino, 0, 9).value_or(""), "through h");
}

TEST_F(LazyTest, ADamagedRecordIsEioAndNothingOfItIsKept) {
  auto* fault = NewRemote();
  Host a = NewHostWithRemote();
  auto files = Tree(20, 4, 4000);
  ObjectId head = Commit(a, files);
  ASSERT_TRUE(Push(a).ok());
  Host b = NewHostWithRemote("r", true);
  ASSERT_TRUE(Fetch(b).ok());
  // Every range read from the packs comes back damaged (a byte flipped at its middle, or cut
  // short). Which record of a range the damage hits depends on the pack's layout, so every file
  // is read: each read is EIO or exact, and at least the first (the commit's own range) fails.
  for (auto d : {FaultTransport::Damage::kFlip, FaultTransport::Damage::kTruncate}) {
    fault->SetDamage(d, "pack/");
    size_t failed = 0;
    for (const auto& [path, want] : files) {
      auto e = b.store->Lookup(head, path);
      Result<std::string> got = e.ok() ? b.store->ReadFile(*e) : Result<std::string>(e.status());
      if (got.ok()) {
        EXPECT_EQ(*got, want) << path;
      } else {
        EXPECT_EQ(got.status().code(), EIO) << path << ": " << got.status().ToString();
        failed++;
      }
    }
    EXPECT_GT(failed, 0u);
    // Nothing damaged was kept: every record held locally reads back and verifies.
    auto v = b.store->Verify({});
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_TRUE(v->ok()) << (v->problems.empty() ? "" : v->problems[0]);
  }
  // The remote goes away: a clear error (EIO, as a mount reports it), not a hang.
  fault->SetDamage(FaultTransport::Damage::kNone);
  fault->FailAfter(0, ETIMEDOUT);
  // What was not fetched above (the damaged reads kept nothing) now fails that way.
  size_t gone = 0;
  for (const auto& [path, want] : files) {
    auto e = b.store->Lookup(head, path);
    Result<std::string> got = e.ok() ? b.store->ReadFile(*e) : Result<std::string>(e.status());
    if (got.ok()) {
      EXPECT_EQ(*got, want) << path;
      continue;
    }
    gone++;
    EXPECT_EQ(got.status().code(), EIO) << got.status().ToString();
    EXPECT_NE(got.status().message().find("could not be fetched"), std::string::npos) << got.status().message();
    EXPECT_NE(got.status().message().find(strerror(ETIMEDOUT)), std::string::npos) << got.status().message();
  }
  EXPECT_GT(gone, 0u);
  fault->Disarm();
  for (const auto& [path, want] : files) EXPECT_EQ(Cat(b, head, path), want) << path;
}

TEST_F(LazyTest, NamesOfAHostileTreeNeverLeaveTheFolder) {
  auto* fault = NewRemote();
  std::string file = "payload";
  ObjectId fid = Id(file);
  // A tree whose one entry is named "../escape" (what EncodeTree would never write).
  std::string tree;
  base::PutVarint(&tree, 1);
  base::PutBytes(&tree, "../escape");
  for (int v : {1, 0644, 0, 0}) base::PutVarint(&tree, v);  // type, mode, uid, gid
  base::PutVarint(&tree, file.size());
  base::PutSVarint(&tree, 0);
  for (int i = 0; i < 3; i++) base::PutVarint(&tree, 0);  // nsec, rdev, link group
  base::PutU8(&tree, 0);
  base::PutVarint(&tree, 0);
  tree.append(fid.AsKey());
  ObjectId tid = Id(tree);
  Crafted commit = CommitOf(tid);
  Publish(fault, {{Kind::kBlob, fid, RawRecord(Kind::kBlob, file)}, {Kind::kTree, tid, RawRecord(Kind::kTree, tree)}, commit},
          commit.id);
  Host b = NewHostWithRemote("r", true);
  ASSERT_TRUE(Fetch(b).ok());
  std::string out = tmp_ / "out/inner";
  std::filesystem::create_directories(tmp_ / "out");
  Status s = b.store->Export(commit.id, out);
  EXPECT_EQ(s.code(), EIO) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(tmp_ / "out/escape"));
  auto tr = b.store->ReadTree(tid);
  EXPECT_EQ(tr.status().code(), EIO);
  // A full fetch refuses it too (the tree decodes on every path a fetched name can take).
  Host c = NewHostWithRemote();
  ASSERT_TRUE(Fetch(c).ok());
  EXPECT_EQ(c.store->Export(commit.id, tmp_ / "out2").code(), EIO);
  EXPECT_FALSE(std::filesystem::exists(tmp_ / "escape"));
}

TEST_F(LazyTest, LyingSizesDepthsAndChainsAreDamageNotCrashes) {
  auto* fault = NewRemote();
  // A blob claiming 1 TiB is refused by its header alone (no pack can even be built of it); one
  // claiming the most a blob may hold but holding "tiny" travels, and is damage when read.
  auto claiming = [](uint64_t size) {
    std::string r;
    base::PutU8(&r, static_cast<uint8_t>(Kind::kBlob));
    base::PutU8(&r, 1);  // zstd
    base::PutVarint(&r, 0);
    base::PutVarint(&r, size);
    r.append(*codec::Compress("tiny", 3));
    return r;
  };
  {
    std::string tib = claiming(1ull << 40);
    remote::IndexEntry e;
    e.kind = Kind::kBlob;
    e.record_length = e.frame_length = tib.size();
    EXPECT_EQ(remote::RecordFromFrame(e, tib).status().code(), EIO);
  }
  std::string huge = claiming(objects::MaxDecodedSize(Kind::kBlob));
  ObjectId huge_id = Id("tiny");
  // Two deltas based on each other.
  ObjectId x = Id("x content"), y = Id("y content");
  auto delta = [&](const ObjectId& base, uint32_t depth) {
    std::string r;
    base::PutU8(&r, static_cast<uint8_t>(Kind::kBlob));
    base::PutU8(&r, 2);
    base::PutVarint(&r, depth);
    base::PutVarint(&r, 9);
    r.append(base.AsKey());
    r.append(*codec::Compress("x content", 3));
    return r;
  };
  // A tree of both, so a commit reaches them.
  std::vector<TreeEntry> entries(3);
  entries[0].name = "huge";
  entries[0].size = objects::MaxDecodedSize(Kind::kBlob);
  entries[0].id = huge_id;
  entries[1].name = "x";
  entries[1].size = 9;
  entries[1].id = x;
  entries[2].name = "y";
  entries[2].size = 9;
  entries[2].id = y;
  std::string tree = objects::EncodeTree(entries);
  ObjectId tid = Id(tree);
  Crafted commit = CommitOf(tid);
  Publish(fault,
          {{Kind::kBlob, huge_id, huge}, {Kind::kBlob, x, delta(y, 2)}, {Kind::kBlob, y, delta(x, 1)},
           {Kind::kTree, tid, RawRecord(Kind::kTree, tree)}, commit},
          commit.id);
  Host b = NewHostWithRemote("r", true);
  ASSERT_TRUE(Fetch(b).ok());
  for (const char* p : {"huge", "x", "y"}) {
    auto e = b.store->Lookup(commit.id, p);
    ASSERT_TRUE(e.ok()) << p << ": " << e.status().ToString();
    auto d = b.store->ReadFile(*e);
    EXPECT_EQ(d.status().code(), EIO) << p << ": " << d.status().ToString();
  }
  EXPECT_EQ(LocalObjects(b), 4u);  // b's first commit and tree, the crafted commit and tree
  // A full fetch of the same remote fails as a whole and moves no ref.
  Host c = NewHostWithRemote();
  EXPECT_EQ(Fetch(c).status().code(), EIO);
  EXPECT_FALSE(c.store->Resolve("origin/main").ok());
}

TEST_F(LazyTest, TreesNestedBeyondTheLimitAreRefused) {
  auto* fault = NewRemote();
  std::vector<Crafted> objs;
  ObjectId inner = Id(objects::EncodeTree({}));
  objs.push_back({Kind::kTree, inner, RawRecord(Kind::kTree, objects::EncodeTree({}))});
  for (int i = 0; i < 2100; i++) {
    TreeEntry e;
    e.name = "d";
    e.type = EntryType::kDir;
    e.mode = 0755;
    e.id = inner;
    e.subtree_entries = i;
    std::string t = objects::EncodeTree({e});
    inner = Id(t);
    objs.push_back({Kind::kTree, inner, RawRecord(Kind::kTree, t)});
  }
  Crafted commit = CommitOf(inner);
  objs.push_back(commit);
  Publish(fault, objs, commit.id);
  Host b = NewHostWithRemote();
  ASSERT_TRUE(Fetch(b).ok());
  // (Export checks the same bound while it writes; creating 2048 levels of directories to see
  // it refuse the next is slow, so the walks that do not write show it.)
  auto d = b.store->Diff(*b.store->Resolve("main"), commit.id);
  EXPECT_EQ(d.status().code(), EIO) << d.status().ToString();
  EXPECT_NE(d.status().message().find("nested deeper"), std::string::npos) << d.status().message();
  auto v = b.store->Verify({commit.id});
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->ok());
}

TEST(PackTest, RecordsRoundTripThroughPackAndIndex) {
  auto kvp = kv::NewMemKv();
  auto st = Store::OpenOnKv(kvp.get(), Policy{});
  ASSERT_TRUE(st.ok());
  Store& s = **st;
  auto& os = s.objects();
  // Small (raw), large (zstd) and delta records.
  std::vector<std::pair<Kind, ObjectId>> objs;
  ObjectId prev;
  for (int i = 0; i < 40; i++) {
    auto p = os.Put(Kind::kBlob, TextBytes(2000 + i * 997, i), std::nullopt);
    ASSERT_TRUE(p.ok());
    objs.push_back({Kind::kBlob, p->id});
  }
  for (int i = 0; i < 5; i++) {
    std::string big = TextBytes(300000, 99);
    big += std::to_string(i);
    auto p = os.Put(Kind::kBlob, big, i ? std::optional<ObjectId>(prev) : std::nullopt);
    ASSERT_TRUE(p.ok());
    prev = p->id;
    objs.push_back({Kind::kBlob, p->id});
  }
  remote::PackBuilder b(3);
  std::map<ObjectId, std::string> records;
  bool delta = false, zstd = false, raw = false;
  for (const auto& [k, id] : objs) {
    auto rec = os.Record(k, id);
    ASSERT_TRUE(rec.ok() && rec->has_value());
    records[id] = **rec;
    auto info = objects::ParseRecord(**rec);
    delta |= info->encoding == objects::Encoding::kDelta;
    zstd |= info->encoding == objects::Encoding::kZstd;
    raw |= info->encoding == objects::Encoding::kRaw;
    ASSERT_TRUE(b.Add(k, id, **rec).ok());
  }
  EXPECT_TRUE(delta && zstd && raw);
  auto built = b.Finish();
  ASSERT_TRUE(built.ok());
  const std::string& pack = built->first;
  auto index = remote::DecodeIndex(built->second);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(index->entries.size(), objs.size());
  EXPECT_EQ(index->pack_size, pack.size());
  for (const auto& e : index->entries) {
    auto r = remote::RangeFor(e);
    auto frame = remote::DecodeFrame(e, std::string_view(pack).substr(r.offset, r.length));
    ASSERT_TRUE(frame.ok()) << frame.status().ToString();
    auto rec = remote::RecordFromFrame(e, *frame);
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    EXPECT_EQ(*rec, records[e.id]);
    // The location record the catalog keeps says the same.
    uint32_t n = 0;
    auto loc = remote::DecodeLocation(remote::EncodeLocation(7, e), &n);
    ASSERT_TRUE(loc.ok());
    EXPECT_EQ(n, 7u);
    EXPECT_EQ(loc->frame_offset, e.frame_offset);
    EXPECT_EQ(loc->base, e.base);
  }
  // A damaged or truncated index is refused; so is one whose frames lie outside the pack.
  std::string bad = built->second;
  bad[bad.size() / 2] ^= 1;
  EXPECT_EQ(remote::DecodeIndex(bad).status().code(), EIO);
  EXPECT_EQ(remote::DecodeIndex(std::string_view(built->second).substr(0, built->second.size() - 3)).status().code(), EIO);
  remote::PackIndex lying = *index;
  lying.entries[0].frame_offset = pack.size() + 10;
  EXPECT_EQ(remote::DecodeIndex(remote::EncodeIndex(lying)).status().code(), EIO);
  lying = *index;
  lying.pack_size = 1;
  EXPECT_EQ(remote::DecodeIndex(remote::EncodeIndex(lying)).status().code(), EIO);
  // A record read through the wrong entry is refused.
  auto e0 = index->entries[0];
  e0.depth = 3;
  e0.base = prev;
  auto r0 = remote::RangeFor(index->entries[0]);
  auto f0 = remote::DecodeFrame(index->entries[0], std::string_view(pack).substr(r0.offset, r0.length));
  ASSERT_TRUE(f0.ok());
  EXPECT_EQ(remote::RecordFromFrame(e0, *f0).status().code(), EIO);
}

// An index entry takes at least 23 bytes (kind, id, and six fields of one byte each); the count
// check assumed 25, so a pack of many tiny stored records (large files of one repeated byte
// compress to zstd records of ~20 bytes, whose entries near the pack's start take 24 bytes) got
// an index every reader refused as "entry count out of range": the push succeeded, the fetch
// called the remote damaged. Found reviewing the bound the pack_index fuzz target checks.
TEST(PackTest, AnIndexOfManySmallStoredRecordsDecodes) {
  auto kvp = kv::NewMemKv();
  auto st = Store::OpenOnKv(kvp.get(), Policy{});
  ASSERT_TRUE(st.ok());
  auto& os = (*st)->objects();
  remote::PackBuilder b(3);
  for (int i = 0; i < 600; i++) {
    auto p = os.Put(Kind::kBlob, std::string(64 << 10, static_cast<char>('a' + i % 26)) + std::to_string(i),
                    std::nullopt);
    ASSERT_TRUE(p.ok());
    auto rec = os.Record(Kind::kBlob, p->id);
    ASSERT_TRUE(rec.ok() && rec->has_value());
    ASSERT_EQ(objects::ParseRecord(**rec)->encoding, objects::Encoding::kZstd);
    ASSERT_LT((*rec)->size(), 128u);
    ASSERT_TRUE(b.Add(Kind::kBlob, p->id, **rec).ok());
  }
  auto built = b.Finish();
  ASSERT_TRUE(built.ok());
  ASSERT_LT(built->second.size(), 600u * 25);  // the case the old bound refused
  auto index = remote::DecodeIndex(built->second);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(index->entries.size(), 600u);
}

}  // namespace
}  // namespace layerfs::testing
