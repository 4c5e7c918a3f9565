// The WAL replay check of a Store (docs/design.md, "Power loss"; kv/rocks_replay_filter.h) on
// format-6 records, whose length word carries the checksum flag in bit 31: a crash copy of a
// Store taken while it is open (the files as a killed process leaves them, the WAL not yet
// flushed into tables) replays every record whose data-log block is on disk, and stops at the
// first one whose block a lost data-log tail took away.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "../test_util.h"
#include "kv/data_log.h"
#include "workspace/workspace.h"

namespace layerfs::workspace {
namespace {

namespace fs = std::filesystem;
using layerfs::testing::RandomBytes;

class WalReplay : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = tmp_.path() + "/store";
    copy_ = tmp_.path() + "/copy";
    auto st = Store::Create(path_, Policy{});
    ASSERT_TRUE(st.ok()) << st.status().ToString();
  }
  // The files of the open Store as a crash would leave them with the page cache saved.
  void CrashCopy() { fs::copy(path_, copy_, fs::copy_options::recursive); }
  static std::string Segment(const std::string& store) {
    if (!fs::exists(store + "/data")) return "";
    for (const auto& e : fs::directory_iterator(store + "/data"))
      if (e.path().extension() == ".seg") return e.path().string();
    return "";
  }
  static uint64_t Size(const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  }
  static std::string ReadAll(Workspace& ws, const std::string& name) {
    auto a = ws.Lookup(kRootIno, name);
    if (!a.ok()) return "<" + a.status().message() + ">";
    auto r = ws.Read(a->ino, 0, a->size + 10);
    return r.ok() ? *r : "<" + r.status().message() + ">";
  }

  // A Store and its "main" Workspace, opened (ASSERTs in the caller's test).
  struct Opened {
    std::unique_ptr<Store> store;
    std::unique_ptr<Workspace> ws;
  };
  static void Open(const std::string& path, Opened* o) {
    auto st = Store::Open(path);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    o->store = std::move(*st);
    auto ws = Workspace::Open(*o->store, {.branch = "main"});
    ASSERT_TRUE(ws.ok()) << ws.status().ToString();
    o->ws = std::move(*ws);
  }
  // Creates `name` in the root holding `data`, fsync'ed if `sync`; its inode in *ino.
  static void Create(Workspace& ws, const std::string& name, const std::string& data, bool sync, Ino* ino = nullptr) {
    auto a = ws.Mknod(kRootIno, name, S_IFREG | 0644, 0, {});
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    if (ino) *ino = a->ino;
    if (!data.empty()) {
      ASSERT_TRUE(ws.Write(a->ino, 0, data).ok());
    }
    if (sync) {
      ASSERT_TRUE(ws.Fsync(a->ino, false).ok());
    }
  }

  layerfs::testing::TempDir tmp_;
  std::string path_, copy_;
};

TEST_F(WalReplay, ChecksummedRecordsWhoseBlocksAreOnDiskAreReplayed) {
  const std::string data = RandomBytes(2 * kBlockSize, 7);
  {
    Opened o;
    ASSERT_NO_FATAL_FAILURE(Open(path_, &o));
    ASSERT_NO_FATAL_FAILURE(Create(*o.ws, "a", data, /*sync=*/true));
    ASSERT_GE(Size(Segment(path_)), data.size()) << "the blocks went to the data log";
    CrashCopy();
  }
  // The record's length word has bit 31 set: read unmasked, it would point 2 GiB past the
  // segment's end and the replay would stop before this fsync'ed write.
  Opened o;
  ASSERT_NO_FATAL_FAILURE(Open(copy_, &o));
  EXPECT_TRUE(ReadAll(*o.ws, "a") == data) << ReadAll(*o.ws, "a").substr(0, 100);
}

TEST_F(WalReplay, ReplayStopsAtTheFirstRecordPastTheSegmentsEnd) {
  const std::string first = RandomBytes(kBlockSize, 1), second = RandomBytes(kBlockSize, 2);
  uint64_t durable = 0;
  {
    Opened o;
    ASSERT_NO_FATAL_FAILURE(Open(path_, &o));
    Ino a = 0, b = 0;
    ASSERT_NO_FATAL_FAILURE(Create(*o.ws, "b", "", /*sync=*/false, &b));
    ASSERT_NO_FATAL_FAILURE(Create(*o.ws, "a", first, /*sync=*/true, &a));  // b's create synced too
    durable = Size(Segment(path_));
    ASSERT_GE(durable, first.size());
    // Unsynced: a block, then a small write and a create after it in the WAL.
    ASSERT_TRUE(o.ws->Write(b, 0, second).ok());
    ASSERT_GT(Size(Segment(path_)), durable);
    ASSERT_TRUE(o.ws->Write(a, 0, "later").ok());
    ASSERT_TRUE(o.ws->Mknod(kRootIno, "c", S_IFREG | 0644, 0, {}).ok());
    CrashCopy();
  }
  // Writeback saved the WAL's tail but not the data log's.
  ASSERT_EQ(::truncate(Segment(copy_).c_str(), static_cast<off_t>(durable)), 0);
  Opened o;
  ASSERT_NO_FATAL_FAILURE(Open(copy_, &o));
  // As of the last operation whose blocks are on disk: b empty (not EIO, not zeros), and
  // nothing after the lost block.
  EXPECT_TRUE(ReadAll(*o.ws, "a") == first) << ReadAll(*o.ws, "a").substr(0, 100);
  EXPECT_EQ(ReadAll(*o.ws, "b"), "");
  EXPECT_EQ(o.ws->Lookup(kRootIno, "c").status().code(), ENOENT);
  // And it goes on from there.
  auto b = o.ws->Lookup(kRootIno, "b");
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(o.ws->Write(b->ino, 0, second).ok());
  EXPECT_TRUE(ReadAll(*o.ws, "b") == second);
}

// A stopped replay is final: the open that stopped flushes, so the next open does not stop at
// the same batch again and drop what was written in between.
TEST_F(WalReplay, WritesAfterAStoppedReplaySurviveTheNextCrash) {
  const std::string first = RandomBytes(kBlockSize, 3), second = RandomBytes(kBlockSize, 4);
  uint64_t durable = 0;
  {
    Opened o;
    ASSERT_NO_FATAL_FAILURE(Open(path_, &o));
    Ino a = 0;
    ASSERT_NO_FATAL_FAILURE(Create(*o.ws, "a", first, /*sync=*/true, &a));
    durable = Size(Segment(path_));
    ASSERT_TRUE(o.ws->Write(a, kBlockSize, second).ok());  // unsynced, lost below
    CrashCopy();
  }
  ASSERT_EQ(::truncate(Segment(copy_).c_str(), static_cast<off_t>(durable)), 0);
  const std::string later = tmp_.path() + "/later";
  {
    Opened o;
    ASSERT_NO_FATAL_FAILURE(Open(copy_, &o));
    ASSERT_NO_FATAL_FAILURE(Create(*o.ws, "n", "written after the stopped replay", /*sync=*/true));
    fs::copy(copy_, later, fs::copy_options::recursive);  // a second crash
  }
  Opened o;
  ASSERT_NO_FATAL_FAILURE(Open(later, &o));
  EXPECT_TRUE(ReadAll(*o.ws, "a") == first) << ReadAll(*o.ws, "a").substr(0, 100);
  EXPECT_EQ(ReadAll(*o.ws, "n"), "written after the stopped replay");
}

// Segment numbers are not reused after their segments were collected: the database's logs may
// still hold records naming the old segment, which a new, shorter segment of the same number
// would make look cut short, stopping the replay at a whole batch (and dropping the Commit and
// the fsync'ed write after it).
TEST_F(WalReplay, ACollectedSegmentsNumberIsNotReused) {
  const std::string data = RandomBytes(2 * kBlockSize, 5);
  ObjectId commit;
  {
    Opened o;
    ASSERT_NO_FATAL_FAILURE(Open(path_, &o));
    ASSERT_NO_FATAL_FAILURE(Create(*o.ws, "a", data, /*sync=*/true));
    auto c = o.ws->Commit("a");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    commit = *c;
    ASSERT_TRUE(CollectDataLog(*o.store).ok());
    ASSERT_EQ(Segment(path_), "") << "the commit's blocks left the data log";
    CrashCopy();
  }
  const std::string later = tmp_.path() + "/later";
  {
    Opened o;
    ASSERT_NO_FATAL_FAILURE(Open(copy_, &o));
    ASSERT_NO_FATAL_FAILURE(Create(*o.ws, "b", RandomBytes(kBlockSize, 6), /*sync=*/true));
    ASSERT_NE(Segment(copy_), "");
    ASSERT_LT(Size(Segment(copy_)), data.size());
    fs::copy(copy_, later, fs::copy_options::recursive);
  }
  Opened o;
  ASSERT_NO_FATAL_FAILURE(Open(later, &o));
  EXPECT_TRUE(ReadAll(*o.ws, "a") == data) << ReadAll(*o.ws, "a").substr(0, 100);
  EXPECT_TRUE(ReadAll(*o.ws, "b") == RandomBytes(kBlockSize, 6));
  auto head = o.store->Resolve("main");
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(*head, commit);
}

}  // namespace
}  // namespace layerfs::workspace
