// PowerLoss (the power-cut layer of tests/powerloss): what a cut keeps of bytes and names, both
// through the data log's calls and under RocksDB; and the data log's own rule that a new
// segment's names (data/ included) survive a cut once Append has returned.
#include "kv/power_loss.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "../test_util.h"
#include "kv/data_log.h"
#include "kv/kv.h"

namespace layerfs::kv {
namespace {

namespace fs = std::filesystem;

class PowerLossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = tmp_.path() + "/root";
    shadow_ = tmp_.path() + "/shadow";
    fs::create_directories(root_ + "/d");
    fs::create_directories(root_ + "/db");
    fs::create_directories(shadow_);
    std::ofstream(root_ + "/d/old") << "old bytes";
    auto pl = PowerLoss::Start(root_, shadow_);
    ASSERT_TRUE(pl.ok()) << pl.status().ToString();
    pl_ = *pl;
  }
  int64_t Size(const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 ? st.st_size : -1;
  }
  int Create(const std::string& p) { return pl_->Open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600); }
  void Write(int fd, off_t off, size_t n) {
    std::string d(n, 'x');
    ASSERT_EQ(pl_->Pwrite(fd, d.data(), n, off), static_cast<ssize_t>(n));
  }

  testing::TempDir tmp_;
  std::string root_, shadow_;
  std::shared_ptr<PowerLoss> pl_;
};

TEST_F(PowerLossTest, DropAllKeepsSyncedBytesAndDurableNamesOnly) {
  // Synced bytes and a synced name stay; the unsynced tail goes.
  int a = Create(root_ + "/d/a");
  ASSERT_GE(a, 0);
  Write(a, 0, 1000);
  ASSERT_EQ(pl_->Fdatasync(a), 0);
  ASSERT_EQ(pl_->SyncDir(root_ + "/d"), 0);
  Write(a, 1000, 500);
  // Created and written and synced, but its name never made durable: gone.
  int b = Create(root_ + "/d/b");
  Write(b, 0, 100);
  ASSERT_EQ(pl_->Fdatasync(b), 0);
  // Removed without a directory sync: back, with its bytes.
  ASSERT_EQ(pl_->Unlink(root_ + "/d/old"), 0);
  pl_->Close(a);
  pl_->Close(b);
  auto loss = pl_->Apply(PowerLoss::Mode::kDropAll, 1);
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  EXPECT_EQ(Size(root_ + "/d/a"), 1000);
  EXPECT_EQ(Size(root_ + "/d/b"), -1);
  EXPECT_EQ(Size(root_ + "/d/old"), 9);
  EXPECT_EQ(loss->bytes_dropped, 500u);  // b's bytes were synced: only its name is lost
  EXPECT_EQ(loss->names_undone, 2u);
}

TEST_F(PowerLossTest, NothingAfterTheCutCounts) {
  int a = Create(root_ + "/d/a");
  ASSERT_EQ(pl_->SyncDir(root_ + "/d"), 0);
  pl_->CutAt(2);  // the second call from now
  Write(a, 0, 100);  // reaches the disk's cache before the cut
  Write(a, 100, 100);  // the cut: calls go on, nothing counts
  EXPECT_TRUE(pl_->cut());
  ASSERT_EQ(pl_->Fdatasync(a), 0);
  ASSERT_EQ(pl_->SyncDir(root_ + "/d"), 0);
  int c = Create(root_ + "/d/c");
  ASSERT_GE(c, 0);
  pl_->Close(a);
  pl_->Close(c);
  EXPECT_EQ(Size(root_ + "/d/a"), 200);  // the process saw everything
  auto loss = pl_->Apply(PowerLoss::Mode::kRandom, 7);
  ASSERT_TRUE(loss.ok());
  // Random mode keeps at most what was written before the cut, and no name made after it.
  EXPECT_LE(Size(root_ + "/d/a"), 100);
  EXPECT_EQ(Size(root_ + "/d/c"), -1);
}

TEST_F(PowerLossTest, RandomKeepsAPrefixOfUnsyncedBytes) {
  int a = Create(root_ + "/d/a");
  ASSERT_EQ(pl_->SyncDir(root_ + "/d"), 0);
  Write(a, 0, 4096);
  ASSERT_EQ(pl_->Fdatasync(a), 0);
  Write(a, 4096, 1 << 20);
  pl_->Close(a);
  auto loss = pl_->Apply(PowerLoss::Mode::kRandom, 3);
  ASSERT_TRUE(loss.ok());
  const int64_t size = Size(root_ + "/d/a");
  EXPECT_GE(size, 4096);
  EXPECT_LE(size, 4096 + (1 << 20));
  EXPECT_EQ(static_cast<uint64_t>(size - 4096), loss->bytes_kept);
}

// RocksDB through the layer: a synced write survives a drop-all cut, an unsynced one does not.
TEST_F(PowerLossTest, RocksDbKeepsSyncedWritesOnly) {
  {
    RocksOptions o;
    o.create_if_missing = true;
    o.io = pl_;
    auto kv = OpenRocksKv(root_ + "/db", o);
    ASSERT_TRUE(kv.ok()) << kv.status().ToString();
    Batch b;
    b.Put(Cf::kMeta, "synced", "1");
    ASSERT_TRUE((*kv)->Write(b, true).ok());
    Batch u;
    u.Put(Cf::kMeta, "unsynced", "2");
    ASSERT_TRUE((*kv)->Write(u, false).ok());
    pl_->Cut();  // the close's flush counts for nothing
  }
  ASSERT_TRUE(pl_->Apply(PowerLoss::Mode::kDropAll, 1).ok());
  auto kv = OpenRocksKv(root_ + "/db", {});
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  auto s = (*kv)->Get(Cf::kMeta, "synced");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->value_or("absent"), "1");
  auto u = (*kv)->Get(Cf::kMeta, "unsynced");
  ASSERT_TRUE(u.ok());
  EXPECT_FALSE(u->has_value());
}

// The data log makes data/ and a new segment durable before Append returns (the first finding of
// the power-loss test: data/ itself was not).
TEST_F(PowerLossTest, DataLogSegmentNamesSurviveACut) {
  auto log = DataLog::Open(root_ + "/data", {.io = pl_});
  ASSERT_TRUE(log.ok());
  auto r = (*log)->Append(std::string(65536, 'b'));
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE((*log)->Sync().ok());
  log->reset();
  ASSERT_TRUE(pl_->Apply(PowerLoss::Mode::kDropAll, 1).ok());
  EXPECT_EQ(Size(fmt::format("{}/data/{:08}.seg", root_, r->segment)), 65536);
}

// A FileIo that holds one armed Pwrite until released, so a test can run a Sync in between.
class GatedIo : public FileIo {
 public:
  explicit GatedIo(std::shared_ptr<FileIo> base) : base_(std::move(base)) {}
  int Open(const std::string& p, int f, mode_t m) override { return base_->Open(p, f, m); }
  int Close(int fd) override { return base_->Close(fd); }
  ssize_t Pwrite(int fd, const void* buf, size_t n, off_t off) override {
    if (armed_.exchange(false)) {
      entered_.set_value();
      release_.get_future().wait();
    }
    return base_->Pwrite(fd, buf, n, off);
  }
  int Fdatasync(int fd) override { return base_->Fdatasync(fd); }
  int SyncDir(const std::string& d) override { return base_->SyncDir(d); }
  int Mkdir(const std::string& p, mode_t m) override { return base_->Mkdir(p, m); }
  int Rmdir(const std::string& p) override { return base_->Rmdir(p); }
  int Unlink(const std::string& p) override { return base_->Unlink(p); }

  std::shared_ptr<FileIo> base_;
  std::atomic<bool> armed_{false};
  std::promise<void> entered_, release_;
};

// A Sync that runs while an append's bytes are still on their way into the segment syncs it
// without them; the next Sync must sync the segment again (it once found nothing marked, so a
// database sync made durable a record whose bytes a power cut then dropped).
TEST_F(PowerLossTest, ASyncDuringAnAppendLeavesItsBytesToTheNextSync) {
  auto io = std::make_shared<GatedIo>(pl_);
  auto log = DataLog::Open(root_ + "/data", {.io = io});
  ASSERT_TRUE(log.ok());
  auto first = (*log)->Append(std::string(4096, 'a'));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*log)->Sync().ok());
  io->armed_ = true;
  Result<DataRef> second = Status::Invalid("not appended");
  std::thread t([&] { second = (*log)->Append(std::string(8192, 'b')); });
  io->entered_.get_future().wait();
  ASSERT_TRUE((*log)->Sync().ok());  // the record is placed, its bytes not yet written
  io->release_.set_value();
  t.join();
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->segment, first->segment);
  ASSERT_TRUE((*log)->Sync().ok());  // what a database sync runs before syncing the ref
  log->reset();
  ASSERT_TRUE(pl_->Apply(PowerLoss::Mode::kDropAll, 1).ok());
  EXPECT_EQ(Size(fmt::format("{}/data/{:08}.seg", root_, second->segment)), 4096 + 8192);
}

}  // namespace
}  // namespace layerfs::kv
