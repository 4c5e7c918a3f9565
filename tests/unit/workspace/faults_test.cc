// The Workspace and the Store under faults (docs/reliability.md): writes that fail for space
// (kv::FaultKv, the data log's SpaceGuard) change nothing and leave the branch head and the
// Workspace as they were; damaged data-log blocks read as EIO naming the segment, and verify
// names the branch and path; a read-only Store reads and writes nothing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "../test_util.h"
#include "history/keys.h"
#include "objects/object_store.h"
#include "kv/fault_kv.h"
#include "kv/kv.h"
#include "kv/space_guard.h"
#include "workspace/inode.h"
#include "workspace/workspace.h"

namespace layerfs::workspace {
namespace {

namespace fs = std::filesystem;
using layerfs::testing::RandomBytes;
using layerfs::testing::TextBytes;
constexpr uint32_t kCurrentFormat = history::kFormatVersion;
static_assert(kCurrentFormat >= 6, "checksummed data-log records are format 6");

class WorkspaceFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = kv::NewMemKv();
    fault_ = std::make_unique<kv::FaultKv>(base_.get());
    auto st = Store::OpenOnKv(fault_.get(), Policy{});
    ASSERT_TRUE(st.ok());
    store_ = std::move(*st);
    auto ws = Workspace::Open(*store_, {.read_only = false, .branch = "main", .commit = {}});
    ASSERT_TRUE(ws.ok());
    ws_ = std::move(*ws);
  }
  Ino Create(const std::string& name, const std::string& data) {
    auto a = ws_->Mknod(kRootIno, name, S_IFREG | 0644, 0, {});
    EXPECT_TRUE(a.ok()) << a.status().message();
    EXPECT_TRUE(ws_->Write(a->ino, 0, data).ok());
    return a->ino;
  }
  std::string ReadAll(Ino ino) {
    auto a = ws_->GetAttr(ino);
    auto r = ws_->Read(ino, 0, a.ok() ? a->size + 10 : 0);
    return r.ok() ? *r : "<" + r.status().message() + ">";
  }
  std::string Changes() {
    auto c = ws_->Changes();
    if (!c.ok()) return "<" + c.status().message() + ">";
    std::string s;
    for (const auto& d : *c) s += std::string(1, d.change) + " " + d.path + "\n";
    return s;
  }
  ObjectId Head() { return **store_->BranchHead("main"); }
  std::unique_ptr<kv::Kv> base_;
  std::unique_ptr<kv::FaultKv> fault_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Workspace> ws_;
};

TEST_F(WorkspaceFaults, FailedWritesChangeNothing) {
  Ino f = Create("f", "original");
  fault_->FailWritesAfter(0);
  EXPECT_EQ(ws_->Write(f, 0, "CHANGED!").status().code(), ENOSPC);
  EXPECT_EQ(ws_->Mknod(kRootIno, "g", S_IFREG | 0644, 0, {}).status().code(), ENOSPC);
  EXPECT_EQ(ws_->Mkdir(kRootIno, "d", 0755, {}).status().code(), ENOSPC);
  EXPECT_EQ(ReadAll(f), "original");
  EXPECT_EQ(ws_->Lookup(kRootIno, "g").status().code(), ENOENT);
  EXPECT_EQ(ws_->Lookup(kRootIno, "d").status().code(), ENOENT);
  EXPECT_EQ(ws_->Fsync(f, false).code(), ENOSPC);
  ASSERT_TRUE(fault_->Recover().ok());
  ASSERT_TRUE(ws_->Write(f, 0, "CHANGED!").ok());
  EXPECT_EQ(ReadAll(f), "CHANGED!");
}

// A change writes a Dirty record only if the Kv holds none for its inode: the first change's
// record must be in the Kv whenever a later one skips it. A first change whose batch failed
// leaves nothing marked, so the next one writes the record, and a reopened Workspace (which
// knows its changes only from the records) commits it.
TEST_F(WorkspaceFaults, AChangeAfterAFailedOneIsStillMarkedForTheNextCommit) {
  Ino f = Create("f", "original");
  const ObjectId c1 = *ws_->Commit("one");
  fault_->FailWritesAfter(0);
  EXPECT_EQ(ws_->Write(f, 0, "FAILED").status().code(), ENOSPC);
  EXPECT_EQ(ws_->SetAttr(f, {.mode = 0600}).status().code(), ENOSPC);
  ASSERT_TRUE(fault_->Recover().ok());
  ASSERT_TRUE(ws_->Write(f, 0, "changed").ok());
  ASSERT_TRUE(ws_->Write(f, 7, "!").ok());
  ws_.reset();
  auto ws = Workspace::Open(*store_, {.read_only = false, .branch = "main", .commit = {}});
  ASSERT_TRUE(ws.ok());
  ws_ = std::move(*ws);
  EXPECT_EQ(Changes(), "M f\n");
  auto c2 = ws_->Commit("two");
  ASSERT_TRUE(c2.ok());
  EXPECT_NE(*c2, c1);
  EXPECT_EQ(*store_->ReadFile(*store_->Lookup(*c2, "f")), "changed!");
  // A commit deleted the record: the next change writes it again, and survives a reopen too.
  ASSERT_TRUE(ws_->Write(f, 0, "again").ok());
  ASSERT_TRUE(ws_->Write(f, 0, "AGAIN").ok());
  ws_.reset();
  ws = Workspace::Open(*store_, {.read_only = false, .branch = "main", .commit = {}});
  ASSERT_TRUE(ws.ok());
  ws_ = std::move(*ws);
  EXPECT_EQ(Changes(), "M f\n");
  auto c3 = ws_->Commit("three");
  ASSERT_TRUE(c3.ok());
  EXPECT_EQ(*store_->ReadFile(*store_->Lookup(*c3, "f")), "AGAINed!");
}

// A commit that fails at any of its writes leaves the branch head and the Workspace as they
// were (reads, uncommitted changes, a later commit of the same state); once space is back the
// same commit succeeds and verifies.
TEST_F(WorkspaceFaults, FailedCommitLeavesHeadAndWorkspaceAsTheyWere) {
  Ino a = Create("a", "first");
  ASSERT_TRUE(ws_->Commit("one").ok());
  const ObjectId one = Head();
  ASSERT_TRUE(ws_->Write(a, 0, "FIRST, changed").ok());
  Create("b", TextBytes(300000, 1));
  Create("c", RandomBytes(3 << 20, 2));  // chunked
  const std::string changes = Changes();
  for (int n = 0; n < 4; n++) {
    SCOPED_TRACE(n);
    fault_->FailWritesAfter(n);
    auto c = ws_->Commit("two");
    if (c.ok()) break;  // the commit needed fewer writes than n
    EXPECT_EQ(c.status().code(), ENOSPC);
    EXPECT_EQ(Head(), one);
    EXPECT_EQ(Changes(), changes);
    EXPECT_EQ(ReadAll(a), "FIRST, changed");
    ASSERT_TRUE(fault_->Recover().ok());
  }
  fault_->FailWritesAfter(-1);
  if (Head() == one) {
    ASSERT_TRUE(ws_->Commit("two").ok());
  }
  const ObjectId two = Head();
  EXPECT_NE(two, one);
  EXPECT_EQ(store_->GetCommit(two)->parents.front(), one);
  EXPECT_EQ(Changes(), "");
  auto e = store_->Lookup(two, "c");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*store_->ReadFile(*e), RandomBytes(3 << 20, 2));
  auto v = store_->Verify({});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok()) << v->problems.front();
}

// The disk fills right after a commit's synced write: the commit stands whole, the next write
// fails, and nothing is half there.
TEST_F(WorkspaceFaults, DiskFillingRightAfterACommitKeepsTheCommit) {
  Create("a", "x");
  fault_->FailAfterNextSync();
  auto c = ws_->Commit("one");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(Head(), *c);
  EXPECT_EQ(ws_->Mknod(kRootIno, "b", S_IFREG | 0644, 0, {}).status().code(), ENOSPC);
  EXPECT_EQ(Changes(), "");
  ASSERT_TRUE(fault_->Recover().ok());
  Create("b", "y");
  ASSERT_TRUE(ws_->Commit("two").ok());
  EXPECT_TRUE(store_->Verify({})->ok());
}

// Whole blocks go to the data log, whose appends the SpaceGuard admits: below the floor a large
// write is ENOSPC before a byte is appended, and the file is as it was.
TEST_F(WorkspaceFaults, DataLogAppendsRefusedBelowTheFloor) {
  Ino f = Create("f", RandomBytes(1 << 20, 3));
  // Shared with the hook: the fixture's Store asks again when it closes, after this body.
  auto free = std::make_shared<std::atomic<uint64_t>>(10 << 20);
  store_->space().SetFreeBytesForTest([free] { return free->load(); });
  auto w = ws_->Write(f, 0, RandomBytes(2 << 20, 4));
  EXPECT_EQ(w.status().code(), ENOSPC);
  EXPECT_NE(w.status().message().find("keeps"), std::string::npos) << w.status().message();
  EXPECT_EQ(ReadAll(f), RandomBytes(1 << 20, 3));
  // Deleting still works, and frees what the file held.
  EXPECT_TRUE(ws_->Unlink(kRootIno, "f").ok());
  *free = 1ull << 30;
  store_->space().SetFreeBytesForTest([free] { return free->load(); });
  Ino g = Create("g", RandomBytes(2 << 20, 4));
  EXPECT_EQ(ReadAll(g), RandomBytes(2 << 20, 4));
}

// ---- a Store on disk: damaged data-log segments ----

// Waits (bounded) until `done` holds; the test asserts on the state, never on the time taken.
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 6000; i++) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// Commits in the background on a full disk: the commit lands with its content pending, the
// encoder's finalizations fail (ENOSPC) and are retried, the pending records stay readable and
// verify; stats and gc work around them and gc keeps them; a Store closed on the full disk keeps
// them for the next encoder; once space is back everything is encoded and verifies.
TEST_F(WorkspaceFaults, FullDiskDuringBackgroundEncodingKeepsPendingRecords) {
  store_->StartBackgroundEncoding();
  const std::string text = TextBytes(300000, 11), chunked = RandomBytes(3 << 20, 12);
  Create("text", text);
  Create("chunked", chunked);
  Create("small", "small");
  // The disk fills right after the commit's synced batch: the encoder meets it.
  fault_->FailAfterNextSync();
  auto c = ws_->Commit("pending");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(Head(), *c);
  ASSERT_TRUE(Eventually([&] { return fault_->writes_failed() >= 2; }));
  EXPECT_GT(store_->PendingEncodings(), 0u);
  auto check = [&](Store& st, const ObjectId& commit) {
    for (auto [name, data] : std::vector<std::pair<std::string, std::string>>{
             {"text", text}, {"chunked", chunked}, {"small", "small"}}) {
      auto e = st.Lookup(commit, name);
      ASSERT_TRUE(e.ok()) << name;
      auto r = st.ReadFile(*e);
      ASSERT_TRUE(r.ok()) << name << ": " << r.status().message();
      EXPECT_TRUE(*r == data) << name;
    }
    auto v = st.Verify({});
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->ok()) << (v->problems.empty() ? "" : v->problems.front());
  };
  check(*store_, *c);
  // Stats and gc on the full disk: stats counts the pending records, gc fails for its own
  // deletions (or not) but keeps every pending record; nothing is lost either way.
  auto stats = store_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_GT(stats->pending_objects, 0u);
  auto gc = store_->Gc();
  if (!gc.ok()) {
    EXPECT_EQ(gc.status().code(), ENOSPC) << gc.status().message();
  }
  check(*store_, *c);
  EXPECT_EQ(ws_->Mknod(kRootIno, "more", S_IFREG | 0644, 0, {}).status().code(), ENOSPC);
  // Space comes back: the encoder's next retry encodes everything.
  ASSERT_TRUE(fault_->Recover().ok());
  ASSERT_TRUE(Eventually([&] { return store_->PendingEncodings() == 0; }));
  stats = store_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->pending_objects, 0u);
  check(*store_, *c);

  // Again, and the Store closes on the full disk (a daemon's exit): the pending records stay,
  // in the queue, for the Store's next opening.
  Create("later", "later");
  fault_->FailAfterNextSync();
  auto c2 = ws_->Commit("pending at close");
  ASSERT_TRUE(c2.ok()) << c2.status().message();
  ws_.reset();
  store_.reset();
  ASSERT_TRUE(fault_->Recover().ok());
  auto st = Store::OpenOnKv(fault_.get(), Policy{});
  ASSERT_TRUE(st.ok()) << st.status().message();
  store_ = std::move(*st);
  check(*store_, *c2);
  EXPECT_EQ(*store_->ReadFile(*store_->Lookup(*c2, "later")), "later");
  ASSERT_TRUE(store_->DrainEncoding().ok());
  EXPECT_EQ(store_->PendingEncodings(), 0u);
  check(*store_, *c2);
  ASSERT_TRUE(store_->Gc().ok());
  check(*store_, *c2);
}

class WorkspaceDamage : public ::testing::Test {
 protected:
  void SetUp() override {
    auto st = Store::Create(dir_ / "store", Policy{});
    ASSERT_TRUE(st.ok()) << st.status().message();
    store_ = std::move(*st);
    auto ws = Workspace::Open(*store_, {.read_only = false, .branch = "main", .commit = {}});
    ASSERT_TRUE(ws.ok());
    ws_ = std::move(*ws);
  }
  std::string Segment() {
    for (auto& e : fs::directory_iterator(dir_ / "store/data"))
      if (e.path().extension() == ".seg") return e.path().string();
    return "";
  }
  layerfs::testing::TempDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Workspace> ws_;
};

TEST_F(WorkspaceDamage, FlippedOrTruncatedSegmentIsEioNeverWrongBytes) {
  auto d = ws_->Mkdir(kRootIno, "dir", 0755, {});
  ASSERT_TRUE(d.ok());
  Ino f = ws_->Mknod(d->ino, "file", S_IFREG | 0644, 0, {})->ino;
  const std::string data = RandomBytes(16 * kBlockSize, 5);
  ASSERT_TRUE(ws_->Write(f, 0, data).ok());
  ASSERT_TRUE(ws_->Fsync(f, false).ok());
  const std::string seg = Segment();
  ASSERT_FALSE(seg.empty());
  ASSERT_EQ(fs::file_size(seg), data.size());
  // Flip one byte of block 5.
  {
    int fd = ::open(seg.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    char c = static_cast<char>(data[5 * kBlockSize + 123] ^ 1);
    ASSERT_EQ(pwrite(fd, &c, 1, 5 * kBlockSize + 123), 1);
    ::close(fd);
  }
  // Any read touching block 5 is EIO naming the segment; the others read exactly.
  for (auto [off, len] : std::vector<std::pair<uint64_t, uint64_t>>{{5 * kBlockSize, 100}, {0, data.size()},
                                                                    {5 * kBlockSize + 200, 4096}}) {
    auto r = ws_->Read(f, off, len);
    EXPECT_EQ(r.status().code(), EIO) << off;
    EXPECT_NE(r.status().message().find(seg), std::string::npos) << r.status().message();
    auto p = ws_->ReadPieces(f, off, len);
    ASSERT_TRUE(p.ok());
    std::string buf(p->size, '\0');
    Status s = ws_->FillRead(*p, buf.data());
    EXPECT_EQ(s.code(), EIO);
    EXPECT_NE(s.message().find(seg), std::string::npos) << s.message();
  }
  for (uint64_t blk : {0, 4, 6, 15}) {
    auto r = ws_->Read(f, blk * kBlockSize, kBlockSize);
    ASSERT_TRUE(r.ok()) << blk;
    EXPECT_EQ(*r, data.substr(blk * kBlockSize, kBlockSize));
    auto p = ws_->ReadPieces(f, blk * kBlockSize + 7, kBlockSize - 7);
    ASSERT_TRUE(p.ok());
    std::string buf(p->size, '\0');
    ASSERT_TRUE(ws_->FillRead(*p, buf.data()).ok());
    EXPECT_EQ(buf, data.substr(blk * kBlockSize + 7, kBlockSize - 7));
  }
  EXPECT_EQ(ws_->PathOf(f), "/dir/file");
  // verify names the branch, the path and the segment.
  auto v = VerifyWorkspaces(*store_);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->problems.size(), 1u);
  EXPECT_NE(v->problems[0].find("branch main"), std::string::npos) << v->problems[0];
  EXPECT_NE(v->problems[0].find("/dir/file"), std::string::npos) << v->problems[0];
  EXPECT_NE(v->problems[0].find(seg), std::string::npos) << v->problems[0];
  EXPECT_EQ(v->blocks, 16u);
  // A commit cannot take damaged bytes into history: it fails and the head stays.
  auto head = **store_->BranchHead("main");
  EXPECT_EQ(ws_->Commit("with damage").status().code(), EIO);
  EXPECT_EQ(**store_->BranchHead("main"), head);
  // Cut the segment short: the blocks past the cut are EIO as well.
  fs::resize_file(seg, 10 * kBlockSize);
  auto r = ws_->Read(f, 12 * kBlockSize, 10);
  EXPECT_EQ(r.status().code(), EIO);
  EXPECT_NE(r.status().message().find(seg), std::string::npos) << r.status().message();
  v = VerifyWorkspaces(*store_);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->problems.size(), 7u);  // block 5, blocks 10..15
  // Rewriting the damaged range heals the file.
  ASSERT_TRUE(ws_->Write(f, 0, data).ok());
  auto all = ws_->Read(f, 0, data.size());
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(*all == data);
  EXPECT_TRUE(VerifyWorkspaces(*store_)->problems.empty());
}

// Records of format 3 carry no checksum: they are still read (unchecked) and committed.
TEST_F(WorkspaceDamage, RecordsWithoutChecksumStillRead) {
  Ino f = ws_->Mknod(kRootIno, "f", S_IFREG | 0644, 0, {})->ino;
  const std::string data = RandomBytes(2 * kBlockSize, 6);
  ASSERT_TRUE(ws_->Write(f, 0, data).ok());
  // Rewrite every R record as a version-3 build wrote it: the 16-byte ref alone.
  kv::Batch b;
  ASSERT_TRUE(store_->kv().Scan(kv::Cf::kWorkspace, "", std::string(64, '\xff'), [&](auto k, auto v) {
    if (k.size() == 25 && k[8] == kTagRef) {
      kv::DataRef r;
      EXPECT_TRUE(kv::DataRef::Decode(v, &r));
      EXPECT_TRUE(r.has_hash);
      r.has_hash = false;
      std::string old;
      r.EncodeTo(&old);
      EXPECT_EQ(old.size(), 16u);
      b.Put(kv::Cf::kWorkspace, k, old);
    }
    return true;
  }).ok());
  ASSERT_EQ(b.entries().size(), 2u);
  ASSERT_TRUE(store_->kv().Write(b, true).ok());
  auto r = ws_->Read(f, 0, data.size());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(*r == data);
  auto c = ws_->Commit("old records");
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto e = store_->Lookup(*c, "f");
  EXPECT_TRUE(*store_->ReadFile(*e) == data);
}

// A version-4 Store as that format's build left it (data-log records without checksums,
// pending records and their queue): it opens, is upgraded to the current format by rewriting
// its config, reads the old records unchecked, encodes the pending ones, and writes
// checksummed records from then on. A newer Store is refused with one line.
TEST_F(WorkspaceDamage, Version4StoreUpgradesReadsAndWritesChecksummedRecords) {
  const std::string path = dir_ / "store";
  const std::string old_data = RandomBytes(2 * kBlockSize, 21), committed = TextBytes(200000, 22);
  store_->objects().SetDeferring(true);  // as a version-4 daemon commits: pending records
  Ino g = ws_->Mknod(kRootIno, "g", S_IFREG | 0644, 0, {})->ino;
  ASSERT_TRUE(ws_->Write(g, 0, committed).ok());
  auto c = ws_->Commit("pending");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_GT(store_->PendingEncodings(), 0u);
  Ino f = ws_->Mknod(kRootIno, "f", S_IFREG | 0644, 0, {})->ino;
  ASSERT_TRUE(ws_->Write(f, 0, old_data).ok());
  auto version_of = [](kv::Kv& kv) {
    auto cfg = kv.Get(kv::Cf::kMeta, "config");
    EXPECT_TRUE(cfg.ok() && cfg->has_value());
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= static_cast<uint32_t>(static_cast<uint8_t>((**cfg)[i])) << (8 * i);
    return v;
  };
  auto set_version = [](kv::Kv& kv, uint32_t v) {
    std::string cfg = **kv.Get(kv::Cf::kMeta, "config");
    for (int i = 0; i < 4; i++) cfg[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    kv::Batch b;
    b.Put(kv::Cf::kMeta, "config", cfg);
    ASSERT_TRUE(kv.Write(b, true).ok());
  };
  // R records as a version-4 build wrote them: the 16-byte ref alone, no checksum.
  auto refs = [&](kv::Kv& kv) {
    std::map<std::string, kv::DataRef> out;
    EXPECT_TRUE(kv.Scan(kv::Cf::kWorkspace, "", std::string(64, '\xff'), [&](auto k, auto v) {
      if (k.size() == 25 && k[8] == kTagRef) {
        kv::DataRef r;
        EXPECT_TRUE(kv::DataRef::Decode(v, &r));
        out[std::string(k)] = r;
      }
      return true;
    }).ok());
    return out;
  };
  {
    kv::Batch b;
    for (auto [k, r] : refs(store_->kv())) {
      r.has_hash = false;
      std::string old;
      r.EncodeTo(&old);
      ASSERT_EQ(old.size(), 16u);
      b.Put(kv::Cf::kWorkspace, k, old);
    }
    ASSERT_EQ(b.entries().size(), 2u);
    ASSERT_TRUE(store_->kv().Write(b, true).ok());
  }
  set_version(store_->kv(), 4);
  ws_.reset();
  store_.reset();

  auto st = Store::Open(path);
  ASSERT_TRUE(st.ok()) << st.status().message();
  store_ = std::move(*st);
  EXPECT_EQ(version_of(store_->kv()), kCurrentFormat);
  {
    std::ifstream m(path + "/LAYERFS");
    std::string line;
    std::getline(m, line);
    EXPECT_NE(line.find("format " + std::to_string(kCurrentFormat)), std::string::npos) << line;
  }
  EXPECT_GT(store_->PendingEncodings(), 0u);  // the version-4 queue is read
  EXPECT_EQ(*store_->ReadFile(*store_->Lookup(*c, "g")), committed);
  auto ws = Workspace::Open(*store_, {.read_only = false, .branch = "main", .commit = {}});
  ASSERT_TRUE(ws.ok()) << ws.status().message();
  ws_ = std::move(*ws);
  auto r = ws_->Read(f, 0, old_data.size());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(*r == old_data);
  for (auto& [k, ref] : refs(store_->kv())) EXPECT_FALSE(ref.has_hash);
  // A new write: its block's record carries the checksum; the other block's stays as it was.
  const std::string fresh = RandomBytes(kBlockSize, 23);
  ASSERT_TRUE(ws_->Write(f, 0, fresh).ok());
  ASSERT_TRUE(ws_->Fsync(f, false).ok());
  auto after = refs(store_->kv());
  ASSERT_EQ(after.size(), 2u);
  EXPECT_TRUE(after.begin()->second.has_hash);     // block 0
  EXPECT_FALSE(after.rbegin()->second.has_hash);   // block 1
  r = ws_->Read(f, 0, old_data.size());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(*r == fresh + old_data.substr(kBlockSize));
  ASSERT_TRUE(store_->DrainEncoding().ok());
  EXPECT_EQ(store_->PendingEncodings(), 0u);
  auto c2 = ws_->Commit("upgraded");
  ASSERT_TRUE(c2.ok()) << c2.status().message();
  EXPECT_TRUE(*store_->ReadFile(*store_->Lookup(*c2, "f")) == fresh + old_data.substr(kBlockSize));
  EXPECT_EQ(*store_->ReadFile(*store_->Lookup(*c2, "g")), committed);
  auto v = store_->Verify({});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok());
  EXPECT_TRUE(VerifyWorkspaces(*store_)->problems.empty());
  // A Store newer than this build is refused with one line, and left as it is.
  set_version(store_->kv(), kCurrentFormat + 1);
  ws_.reset();
  store_.reset();
  auto newer = Store::Open(path);
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.status().code(), EPROTO);
  EXPECT_EQ(newer.status().message().find('\n'), std::string::npos);
  EXPECT_NE(newer.status().message().find("format version " + std::to_string(kCurrentFormat + 1)), std::string::npos)
      << newer.status().message();
  auto ro = Store::Open(path, {.read_only = true});
  EXPECT_EQ(ro.status().code(), EPROTO);
}

std::set<std::string> Tree(const std::string& dir) {
  std::set<std::string> out;
  for (auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().filename() == "LOCK") continue;
    out.insert(e.path().string() + ":" + (e.is_regular_file() ? std::to_string(e.file_size()) : "d"));
  }
  return out;
}

// A read-only Store reads history and Workspaces' blocks but changes no file at all.
TEST_F(WorkspaceDamage, ReadOnlyStoreReadsAndWritesNothing) {
  Ino f = ws_->Mknod(kRootIno, "f", S_IFREG | 0644, 0, {})->ino;
  ASSERT_TRUE(ws_->Write(f, 0, RandomBytes(3 * kBlockSize, 7)).ok());
  auto c = ws_->Commit("one");
  ASSERT_TRUE(c.ok());
  Ino g = ws_->Mknod(kRootIno, "g", S_IFREG | 0644, 0, {})->ino;
  ASSERT_TRUE(ws_->Write(g, 0, RandomBytes(4 * kBlockSize, 8)).ok());  // uncommitted, in the log
  ASSERT_TRUE(ws_->Fsync(g, false).ok());
  ASSERT_TRUE(store_->Fork("other", "main").ok());
  ws_.reset();
  // As a killed daemon leaves it: copy the files while the Store is open.
  layerfs::testing::TempDir copy;
  fs::copy(dir_ / "store", copy / "store", fs::copy_options::recursive);
  store_.reset();
  const std::string p = copy / "store";
  const auto before = Tree(p);
  {
    auto ro = Store::Open(p, {.read_only = true});
    ASSERT_TRUE(ro.ok()) << ro.status().message();
    EXPECT_TRUE((*ro)->read_only());
    auto log = (*ro)->Log(**(*ro)->BranchHead("main"));
    ASSERT_TRUE(log.ok());
    EXPECT_EQ(log->size(), 2u);
    auto e = (*ro)->Lookup(*c, "f");
    EXPECT_EQ(*(*ro)->ReadFile(*e), RandomBytes(3 * kBlockSize, 7));
    auto v = (*ro)->Verify({});
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->ok());
    auto wv = VerifyWorkspaces(**ro);
    ASSERT_TRUE(wv.ok());
    EXPECT_TRUE(wv->problems.empty());
    EXPECT_EQ(wv->blocks, 4u);
    EXPECT_TRUE((*ro)->Stats().ok());
    EXPECT_EQ((*ro)->Fork("third", "main").code(), EROFS);
    EXPECT_EQ((*ro)->Gc().status().code(), EROFS);
    // The branch's Workspace (what `status`, `read-file`, `list-dir` open) reads its
    // uncommitted changes, from the data log too, without writing a byte; changes are EROFS.
    auto ws = Workspace::Open(**ro, {.branch = "main"});
    ASSERT_TRUE(ws.ok()) << ws.status().message();
    auto changes = (*ws)->Changes();
    ASSERT_TRUE(changes.ok()) << changes.status().message();
    ASSERT_EQ(changes->size(), 1u);
    EXPECT_EQ((*changes)[0].path, "g");
    EXPECT_EQ((*changes)[0].change, 'A');
    auto ga = (*ws)->LookupPath("g");
    ASSERT_TRUE(ga.ok());
    EXPECT_EQ(*(*ws)->Read(ga->ino, 0, 4 * kBlockSize), RandomBytes(4 * kBlockSize, 8));
    auto fa = (*ws)->LookupPath("f");
    ASSERT_TRUE(fa.ok());
    EXPECT_EQ(*(*ws)->Read(fa->ino, 0, 3 * kBlockSize), RandomBytes(3 * kBlockSize, 7));
    auto names = (*ws)->ReadDir(kRootIno);
    ASSERT_TRUE(names.ok());
    std::set<std::string> listed;
    for (const auto& e : *names) listed.insert(e.name);
    EXPECT_TRUE(listed.count("f") && listed.count("g"));
    EXPECT_EQ((*ws)->Write(fa->ino, 0, "x").status().code(), EROFS);
    EXPECT_EQ((*ws)->Mknod(kRootIno, "h", S_IFREG | 0644, 0, {}).status().code(), EROFS);
    EXPECT_EQ((*ws)->Commit("no").status().code(), EROFS);
    // A branch never given a Workspace opens fresh at its head, in memory.
    auto other = Workspace::Open(**ro, {.branch = "other"});
    ASSERT_TRUE(other.ok()) << other.status().message();
    EXPECT_TRUE((*other)->Changes()->empty());
    auto of = (*other)->LookupPath("f");
    ASSERT_TRUE(of.ok());
    EXPECT_EQ(*(*other)->Read(of->ino, 0, 3 * kBlockSize), RandomBytes(3 * kBlockSize, 7));
    EXPECT_EQ((*other)->LookupPath("g").status().code(), ENOENT);
  }
  EXPECT_EQ(Tree(p), before);
}

}  // namespace
}  // namespace layerfs::workspace
