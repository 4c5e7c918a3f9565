// RocksKv under faults injected into RocksDB's own files (kv/file_faults.h): a WAL append or a
// flush that runs out of space stops the engine without killing the process, reads go on,
// nothing acknowledged is lost, and Recover() brings writes back (docs/design.md, "Full disks
// and damaged media"). Also the read-only open, and damaged table files.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "../test_util.h"
#include "kv/file_faults.h"
#include "kv/kv.h"
#include "kv/space_guard.h"

namespace layerfs::kv {
namespace {

namespace fs = std::filesystem;

class RocksFaultTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    kv_.reset();
    RocksOptions o;
    o.create_if_missing = true;
    o.faults = faults_;
    auto k = OpenRocksKv(path(), o);
    ASSERT_TRUE(k.ok()) << k.status().message();
    kv_ = std::move(*k);
  }
  std::string path() { return dir_.path() + "/db"; }
  Status Put(std::string_view k, std::string_view v, bool sync = false) {
    Batch b;
    b.Put(Cf::kWorkspace, k, v);
    return kv_->Write(b, sync);
  }
  std::string Get(std::string_view k) {
    auto v = kv_->Get(Cf::kWorkspace, k);
    if (!v.ok()) return "<" + v.status().message() + ">";
    return *v ? **v : "<absent>";
  }
  testing::TempDir dir_;
  std::shared_ptr<FileFaults> faults_ = std::make_shared<FileFaults>();
  std::unique_ptr<Kv> kv_;
};

TEST_F(RocksFaultTest, TornWalAppendStopsWritesKeepsReadsAndLosesNothing) {
  for (int i = 0; i < 50; i++) ASSERT_TRUE(Put("k" + std::to_string(i), std::string(1000, 'a' + i % 26)).ok());
  // The next append finds 100 bytes of room: the WAL append is torn, and the engine stops. The
  // disk stays full, so the reopens the Kv tries meanwhile fail too (no room for a MANIFEST):
  // a read-only instance serves.
  faults_->Arm(100, FileFaults::kAll);
  Status s = Put("big", std::string(50000, 'x'));
  EXPECT_EQ(s.code(), ENOSPC) << s.message();
  EXPECT_GE(faults_->appends_failed.load(), 1);
  // Reads go on; writes, syncs and flushes fail cleanly (no abort: SyncWAL after a failed
  // append would).
  EXPECT_EQ(Get("k7"), std::string(1000, 'a' + 7));
  EXPECT_EQ(Put("k-more", "v").code(), ENOSPC);
  EXPECT_EQ(kv_->SyncWal().code(), ENOSPC);
  EXPECT_EQ(kv_->Flush().code(), ENOSPC);
  EXPECT_EQ(kv_->Recover().code(), ENOSPC);
  EXPECT_EQ(Get("k7"), std::string(1000, 'a' + 7));
  EXPECT_EQ(Get("big"), "<absent>");
  // Space comes back: the engine reopens and takes writes again.
  faults_->Disarm();
  ASSERT_TRUE(kv_->Recover().ok());
  ASSERT_TRUE(Put("after", "yes", /*sync=*/true).ok());
  ASSERT_TRUE(kv_->SyncWal().ok());
  // Everything acknowledged is there after a reopen; the torn write is not.
  Open();
  for (int i = 0; i < 50; i++) EXPECT_EQ(Get("k" + std::to_string(i)), std::string(1000, 'a' + i % 26)) << i;
  EXPECT_EQ(Get("after"), "yes");
  EXPECT_EQ(Get("big"), "<absent>");
}

// RocksDB's DB::Resume keeps the failed WAL writer when nothing reached the WAL since the last
// flush, and the next write then aborts on an assertion. The reopen has no such case.
TEST_F(RocksFaultTest, WalFailureRightAfterAFlushRecovers) {
  ASSERT_TRUE(Put("before", "1").ok());
  ASSERT_TRUE(kv_->Flush().ok());
  faults_->Arm(0, FileFaults::kWal);
  EXPECT_EQ(Put("x", std::string(10000, 'x')).code(), ENOSPC);
  faults_->Disarm();
  ASSERT_TRUE(kv_->Recover().ok());
  ASSERT_TRUE(Put("y", "2", true).ok());
  ASSERT_TRUE(Put("z", "3").ok());
  Open();
  EXPECT_EQ(Get("before"), "1");
  EXPECT_EQ(Get("y"), "2");
  EXPECT_EQ(Get("z"), "3");
}

// A write that finds the engine stopped reopens it itself (when nothing holds it) and goes
// through: a writer need not know about Recover().
TEST_F(RocksFaultTest, WriterReopensAStoppedEngineItself) {
  ASSERT_TRUE(Put("a", "1").ok());
  faults_->Arm(10, FileFaults::kWal);
  EXPECT_EQ(Put("b", std::string(5000, 'b')).code(), ENOSPC);
  faults_->Disarm();
  ASSERT_TRUE(Put("c", "3").ok());
  EXPECT_EQ(Get("a"), "1");
  EXPECT_EQ(Get("c"), "3");
}

TEST_F(RocksFaultTest, FlushOutOfSpaceStopsThenReopensWithEverything) {
  for (int i = 0; i < 200; i++) ASSERT_TRUE(Put("k" + std::to_string(i), std::string(2000, 'q')).ok());
  faults_->Arm(0, FileFaults::kTables);
  Status f = kv_->Flush();
  EXPECT_EQ(f.code(), ENOSPC) << f.message();
  // The failed flush stopped the engine; a writer reopens it (the WAL has room) and goes on,
  // and reads never stopped.
  EXPECT_EQ(Get("k5"), std::string(2000, 'q'));
  EXPECT_TRUE(Put("during", "x").ok());
  faults_->Disarm();
  ASSERT_TRUE(kv_->Recover().ok());
  ASSERT_TRUE(kv_->Flush().ok());
  Open();
  for (int i = 0; i < 200; i++) ASSERT_EQ(Get("k" + std::to_string(i)), std::string(2000, 'q')) << i;
  EXPECT_EQ(Get("during"), "x");
}

TEST_F(RocksFaultTest, SnapshotsHoldTheInstanceUntilReleased) {
  ASSERT_TRUE(Put("a", "old").ok());
  auto snap = kv_->GetSnapshot();
  faults_->Arm(0, FileFaults::kWal);
  EXPECT_EQ(Put("a", "new").code(), ENOSPC);
  faults_->Disarm();
  // The snapshot's reads keep working; the reopen waits for it.
  EXPECT_EQ(kv_->Recover().code(), EBUSY);
  auto v = kv_->Get(Cf::kWorkspace, "a", snap.get());
  ASSERT_TRUE(v.ok() && *v);
  EXPECT_EQ(**v, "old");
  snap.reset();
  ASSERT_TRUE(kv_->Recover().ok());
  ASSERT_TRUE(Put("a", "new").ok());
  EXPECT_EQ(Get("a"), "new");
}

TEST_F(RocksFaultTest, FailedSyncIsAnErrorNotACrash) {
  ASSERT_TRUE(Put("a", "1").ok());
  faults_->fail_syncs = true;
  EXPECT_NE(kv_->SyncWal().code(), 0);
  EXPECT_GE(faults_->syncs_failed.load(), 1);
  faults_->fail_syncs = false;
  (void)kv_->Recover();
  ASSERT_TRUE(Put("b", "2", true).ok());
  EXPECT_EQ(Get("a"), "1");
  EXPECT_EQ(Get("b"), "2");
}

std::set<std::string> Listing(const std::string& dir) {
  std::set<std::string> out;
  for (auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string() + ":" + std::to_string(e.file_size()));
  return out;
}

// A read-only open reads what the WAL holds, writes nothing (no file appears, changes or goes),
// and keeps a writer out while it is open.
TEST_F(RocksFaultTest, ReadOnlyOpenWritesNothingAndExcludesWriters) {
  ASSERT_TRUE(Put("in-table", "t").ok());
  ASSERT_TRUE(kv_->Flush().ok());
  ASSERT_TRUE(Put("in-wal", "w", true).ok());
  // A killed process: the WAL is not flushed. (Copy the live files as they are.)
  testing::TempDir copy;
  fs::copy(path(), copy.path() + "/db", fs::copy_options::recursive);
  kv_.reset();
  const std::string p = copy.path() + "/db";
  auto before = Listing(p);
  {
    auto ro = OpenRocksKv(p, {.read_only = true});
    ASSERT_TRUE(ro.ok()) << ro.status().message();
    EXPECT_TRUE((*ro)->read_only());
    auto a = (*ro)->Get(Cf::kWorkspace, "in-table");
    auto b = (*ro)->Get(Cf::kWorkspace, "in-wal");
    ASSERT_TRUE(a.ok() && *a && b.ok() && *b);
    EXPECT_EQ(**a, "t");
    EXPECT_EQ(**b, "w");
    Batch bt;
    bt.Put(Cf::kWorkspace, "x", "y");
    EXPECT_EQ((*ro)->Write(bt, false).code(), EROFS);
    EXPECT_TRUE((*ro)->SyncWal().ok());
    EXPECT_TRUE((*ro)->Flush().ok());
    // A writer cannot open it meanwhile.
    auto rw = OpenRocksKv(p, {});
    EXPECT_EQ(rw.status().code(), EBUSY) << rw.status().message();
  }
  EXPECT_EQ(Listing(p), before);
  auto rw = OpenRocksKv(p, {});
  ASSERT_TRUE(rw.ok()) << rw.status().message();
}

// Flips a byte in the middle of `file` (a data block) or cuts it in half.
void Damage(const std::string& file, bool truncate) {
  auto size = fs::file_size(file);
  if (truncate) {
    fs::resize_file(file, size / 2);
    return;
  }
  int fd = ::open(file.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c;
  ASSERT_EQ(pread(fd, &c, 1, static_cast<off_t>(size / 3)), 1);
  c = static_cast<char>(c ^ 0x5a);
  ASSERT_EQ(pwrite(fd, &c, 1, static_cast<off_t>(size / 3)), 1);
  ::close(fd);
}

class RocksDamageTest : public ::testing::TestWithParam<bool> {};

// A damaged table file: reads of its records are EIO naming the file (block checksums, XXH3);
// the database still opens (a truncated table fails the paranoid open, which is retried
// without), and every other record reads back.
TEST_P(RocksDamageTest, DamagedTableReadsAsEioNamingTheFile) {
  testing::TempDir dir;
  const std::string p = dir.path() + "/db";
  {
    auto kv = OpenRocksKv(p, {.create_if_missing = true});
    ASSERT_TRUE(kv.ok());
    Batch b;
    for (int i = 0; i < 2000; i++) b.Put(Cf::kBlobs, "a" + std::to_string(10000 + i), testing::RandomBytes(300, i * 1000));
    ASSERT_TRUE((*kv)->Write(b, true).ok());
    ASSERT_TRUE((*kv)->Flush().ok());
    b.Clear();
    for (int i = 0; i < 50; i++) b.Put(Cf::kWorkspace, "w" + std::to_string(i), "ok");
    ASSERT_TRUE((*kv)->Write(b, true).ok());
  }
  // The blobs family's only table.
  std::string victim, seen;
  for (auto& e : fs::directory_iterator(p)) {
    seen += " " + e.path().filename().string() + ":" + std::to_string(e.file_size());
    if (e.path().extension() == ".sst" && e.file_size() > 100000) victim = e.path().string();
  }
  ASSERT_FALSE(victim.empty()) << seen;
  Damage(victim, GetParam());
  auto kv = OpenRocksKv(p, {});
  ASSERT_TRUE(kv.ok()) << kv.status().message();
  int bad = 0, good = 0;
  std::string msg;
  for (int i = 0; i < 2000; i++) {
    auto v = (*kv)->Get(Cf::kBlobs, "a" + std::to_string(10000 + i));
    if (!v.ok()) {
      EXPECT_EQ(v.status().code(), EIO);
      msg = v.status().message();
      bad++;
    } else {
      ASSERT_TRUE(*v);
      EXPECT_EQ(**v, testing::RandomBytes(300, i * 1000)) << "wrong bytes for a" << 10000 + i;
      good++;
    }
  }
  EXPECT_GT(bad, 0);
  EXPECT_NE(msg.find(fs::path(victim).filename().string()), std::string::npos) << msg;
  if (!GetParam()) {
    EXPECT_GT(good, 0);  // a flipped byte spoils one block, not the table
  }
  for (int i = 0; i < 50; i++) {
    auto v = (*kv)->Get(Cf::kWorkspace, "w" + std::to_string(i));
    ASSERT_TRUE(v.ok() && *v);
  }
  // A scan over the damage stops with EIO too.
  Status s = (*kv)->Scan(Cf::kBlobs, "", "", [](auto, auto) { return true; });
  EXPECT_EQ(s.code(), EIO);
}

INSTANTIATE_TEST_SUITE_P(FlipOrTruncate, RocksDamageTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Truncated" : "Flipped"; });

// The admission: growth stops at the floor, small writes at half of it, exempt batches never;
// the refusal is ENOSPC and writes nothing.
TEST(SpaceGuardTest, AdmitsByUseAgainstTheFloor) {
  testing::TempDir dir;
  uint64_t free = 100 << 20;
  auto g = SpaceGuard::Open(dir.path(), false, {.floor_bytes = 16 << 20, .reserve_bytes = 0});
  g->SetFreeBytesForTest([&] { return free; });
  EXPECT_TRUE(g->Admit(50 << 20, SpaceGuard::Use::kGrow).ok());
  free = 20 << 20;
  g->SetFreeBytesForTest([&] { return free; });
  Status s = g->Admit(8 << 20, SpaceGuard::Use::kGrow);
  EXPECT_EQ(s.code(), ENOSPC);
  EXPECT_NE(s.message().find("keeps"), std::string::npos) << s.message();
  EXPECT_TRUE(g->Admit(4 << 20, SpaceGuard::Use::kGrow).ok());
  free = 10 << 20;
  g->SetFreeBytesForTest([&] { return free; });
  EXPECT_EQ(g->Admit(1 << 20, SpaceGuard::Use::kGrow).code(), ENOSPC);
  EXPECT_TRUE(g->Admit(4096, SpaceGuard::Use::kSmall).ok());
  free = 1 << 20;
  g->SetFreeBytesForTest([&] { return free; });
  EXPECT_EQ(g->Admit(4096, SpaceGuard::Use::kSmall).code(), ENOSPC);
  EXPECT_TRUE(g->Admit(1 << 20, SpaceGuard::Use::kFree).ok());
  // What the database will flush counts on top of the floor.
  free = 40 << 20;
  g->SetFreeBytesForTest([&] { return free; });
  EXPECT_TRUE(g->Admit(8 << 20, SpaceGuard::Use::kGrow).ok());
  g->SetPendingBytes([] { return uint64_t{20} << 20; });
  EXPECT_EQ(g->Admit(8 << 20, SpaceGuard::Use::kGrow).code(), ENOSPC);
  EXPECT_EQ(g->KeptBytes(), uint64_t{36} << 20);
  // Small writes may take half the floor, never the memtables' share (their flush writes it):
  // 27 MiB free is below 20 MiB of memtables and 8 MiB, 29 MiB is not.
  free = 27 << 20;
  g->SetFreeBytesForTest([&] { return free; });
  EXPECT_EQ(g->Admit(4096, SpaceGuard::Use::kSmall).code(), ENOSPC);
  free = 29 << 20;
  g->SetFreeBytesForTest([&] { return free; });
  EXPECT_TRUE(g->Admit(4096, SpaceGuard::Use::kSmall).ok());
}

// The reserve file: taken when there is room, released when asked (the database ran out), taken
// back once there is room for the floor and twice the reserve.
// Memtables holding superseded values count at full size; before refusing, the guard flushes
// them (its relief) once they matter, and admits what the flush made room for.
TEST(SpaceGuardTest, FlushesBigMemtablesBeforeRefusing) {
  testing::TempDir dir;
  uint64_t free = 60 << 20, memtables = 40 << 20;
  int flushes = 0;
  auto g = SpaceGuard::Open(dir.path(), false, {.floor_bytes = 16 << 20, .reserve_bytes = 0});
  g->SetFreeBytesForTest([&] { return free; });
  g->SetPendingBytes([&] { return memtables; });
  EXPECT_EQ(g->Admit(8 << 20, SpaceGuard::Use::kGrow).code(), ENOSPC);  // no relief yet
  g->SetRelieve([&] {
    flushes++;
    free -= memtables / 2;  // half of it was superseded
    memtables = 0;
    return true;
  });
  EXPECT_TRUE(g->Admit(8 << 20, SpaceGuard::Use::kGrow).ok());
  EXPECT_EQ(flushes, 1);
  // Small memtables: no flush, the refusal stands.
  memtables = 1 << 20;
  free = 17 << 20;
  EXPECT_EQ(g->Admit(8 << 20, SpaceGuard::Use::kGrow).code(), ENOSPC);
  EXPECT_EQ(flushes, 1);
  // A flush that cannot run (no room for it) refuses as before.
  memtables = 30 << 20;
  g->SetRelieve([&] {
    flushes++;
    return false;
  });
  EXPECT_EQ(g->Admit(8 << 20, SpaceGuard::Use::kGrow).code(), ENOSPC);
  EXPECT_EQ(flushes, 2);
}

TEST(SpaceGuardTest, ReserveIsTakenReleasedAndTakenBack) {
  testing::TempDir dir;
  uint64_t free = 1ull << 30;
  auto g = SpaceGuard::Open(dir.path(), true, {.floor_bytes = 8 << 20, .reserve_bytes = 1 << 20});
  EXPECT_TRUE(g->reserve_held());
  struct stat st;
  ASSERT_EQ(stat(g->reserve_path().c_str(), &st), 0);
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, uint64_t{1} << 20);  // allocated, not sparse
  g->ReleaseReserve("test");
  EXPECT_FALSE(g->reserve_held());
  EXPECT_NE(stat(g->reserve_path().c_str(), &st), 0);
  g->SetFreeBytesForTest([&] { return free; });  // room: taken back at the refresh
  EXPECT_TRUE(g->reserve_held());
  free = 1 << 20;  // a full disk alone does not release it: only a need does
  g->SetFreeBytesForTest([&] { return free; });
  EXPECT_TRUE(g->reserve_held());
  g->ReleaseReserve("test");
  free = 9 << 20;  // less than the floor and twice the reserve: stays released
  g->SetFreeBytesForTest([&] { return free; });
  EXPECT_FALSE(g->reserve_held());
  // A read-only guard never creates it.
  testing::TempDir other;
  auto ro = SpaceGuard::Open(other.path(), false, {.floor_bytes = 8 << 20, .reserve_bytes = 1 << 20});
  EXPECT_FALSE(ro->reserve_held());
  EXPECT_NE(stat(ro->reserve_path().c_str(), &st), 0);
}

// A RocksKv with a guard refuses growth before RocksDB sees it: the engine never stops.
TEST(SpaceGuardTest, RocksKvRefusesGrowthBeforeTheEngineSeesIt) {
  testing::TempDir dir;
  auto g = SpaceGuard::Open(dir.path(), false, {.floor_bytes = 16 << 20, .reserve_bytes = 0});
  uint64_t free = 17 << 20;
  g->SetFreeBytesForTest([&] { return free; });
  auto kv = OpenRocksKv(dir.path() + "/db", {.create_if_missing = true, .space = g.get()});
  ASSERT_TRUE(kv.ok());
  Batch big;
  big.Put(Cf::kBlobs, "big", std::string(1 << 20, 'b'));
  EXPECT_EQ((*kv)->Write(big, true).code(), ENOSPC);
  Batch del;
  del.set_space_exempt();
  del.Delete(Cf::kBlobs, "big");
  EXPECT_TRUE((*kv)->Write(del, true).ok());
  free = 1ull << 30;
  g->SetFreeBytesForTest([&] { return free; });
  EXPECT_TRUE((*kv)->Write(big, true).ok());
  free = 1 << 20;
  g->SetFreeBytesForTest([&] { return free; });
  EXPECT_EQ((*kv)->CompactAll().code(), ENOSPC);
  auto v = (*kv)->Get(Cf::kBlobs, "big");
  ASSERT_TRUE(v.ok() && *v);
  EXPECT_EQ((*v)->size(), size_t{1} << 20);
}

// The flush gate (docs/design.md, "Full disks and damaged media"): RocksDB's own flushes are
// held while the disk has no room for them. The memtables flush at 1 MiB here; any table append
// fails (a flush would stop the engine).
class FlushGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    guard_ = SpaceGuard::Open("", true, {.floor_bytes = 4 << 20, .reserve_bytes = 0});
    guard_->SetFreeBytesForTest([this] {
      bool full = full_ || (full_once_a_flush_failed_ && faults_->appends_failed.load() > 0);
      return full ? uint64_t{512} << 10 : uint64_t{1} << 30;
    });
    Open(faults_);
  }
  void Open(std::shared_ptr<FileFaults> faults) {
    kv_.reset();
    RocksOptions o;
    o.create_if_missing = true;
    o.faults = std::move(faults);
    o.space = guard_.get();
    o.write_buffer_bytes = 1 << 20;
    auto k = OpenRocksKv(dir_.path() + "/db", o);
    ASSERT_TRUE(k.ok()) << k.status().message();
    kv_ = std::move(*k);
  }
  Status Put(const std::string& k, bool exempt, bool sync) {
    Batch b;
    if (exempt) b.set_space_exempt();
    b.Put(Cf::kWorkspace, k, Value(k));
    return kv_->Write(b, sync);
  }
  static std::string Value(const std::string& k) { return std::string(8000, static_cast<char>('a' + k.size() % 26)) + k; }
  // Every key in `acked` reads back its value; every key in `refused` is absent.
  void ExpectExactly(const std::vector<std::string>& acked, const std::vector<std::string>& refused) {
    for (const auto& k : acked) {
      auto v = kv_->Get(Cf::kWorkspace, k);
      ASSERT_TRUE(v.ok() && *v) << k << ": " << (v.ok() ? "absent" : v.status().message());
      ASSERT_EQ(**v, Value(k)) << k;
    }
    for (const auto& k : refused) {
      auto v = kv_->Get(Cf::kWorkspace, k);
      ASSERT_TRUE(v.ok()) << v.status().message();
      EXPECT_FALSE(*v) << k << " was refused but is there";
    }
  }
  testing::TempDir dir_;
  std::atomic<bool> full_{false};
  std::atomic<bool> full_once_a_flush_failed_{false};
  std::unique_ptr<SpaceGuard> guard_;
  std::shared_ptr<FileFaults> faults_ = std::make_shared<FileFaults>();
  std::unique_ptr<Kv> kv_;
};

// The disk fills from outside with half a memtable written. Writes the guard admits stop;
// deletions (exempt) go on past the memtable's flush size, and no flush is tried (it would fail:
// a stopped engine, a reopen); once there is room the flush runs and everything is there.
TEST_F(FlushGateTest, FlushesHeldOnAFullDiskWhileDeletionsGoOn) {
  std::vector<std::string> acked, refused;
  for (int i = 0; i < 60; i++) {
    std::string k = "before" + std::to_string(i);
    ASSERT_TRUE(Put(k, false, i % 10 == 9).ok()) << k;
    acked.push_back(k);
  }
  full_ = true;
  (void)guard_->FreeBytes();  // the guard notices at once (else within 200 ms)
  faults_->Arm(0, FileFaults::kTables);
  for (int i = 0; i < 300; i++) {
    std::string k = "exempt" + std::to_string(i);
    Status s = Put(k, true, i % 3 == 0);
    ASSERT_TRUE(s.ok()) << k << ": " << s.message();
    acked.push_back(k);
    if (i % 50 == 0) {
      std::string r = "refused" + std::to_string(i);
      Status rs = Put(r, false, true);
      EXPECT_EQ(rs.code(), ENOSPC) << rs.message();
      refused.push_back(r);
    }
  }
  // 2.8 MB went into memtables that flush at 1 MiB: no flush was tried, the engine never stopped.
  EXPECT_EQ(faults_->appends_failed.load(), 0);
  EXPECT_EQ(kv_->Flush().code(), ENOSPC);
  EXPECT_EQ(faults_->appends_failed.load(), 0);
  ExpectExactly(acked, refused);
  // Room again: the next admitted write ends the hold, and RocksDB flushes what is over.
  faults_->Disarm();
  full_ = false;
  ASSERT_TRUE(Put("after", false, true).ok());
  acked.push_back("after");
  ASSERT_TRUE(kv_->Flush().ok());
  ExpectExactly(acked, refused);
  // Nothing is left for a reopen to replay but what the flush left.
  Open(nullptr);
  ExpectExactly(acked, refused);
  auto st = kv_->Stats(Cf::kWorkspace);
  ASSERT_TRUE(st.ok());
  EXPECT_GE(st->entries, acked.size());
}

// A flush that fails anyway (the disk filled while it ran): the engine stops, the Kv reopens
// with flushes held, so the replayed memtables do not meet the same wall again; no acknowledged
// write is lost, no refused one appears, the process lives, and writes come back with room.
TEST_F(FlushGateTest, FlushFailingAnywayLosesNoAcknowledgedWrite) {
  faults_->Arm(0, FileFaults::kTables);
  // The disk is full from the moment the first flush failed.
  full_once_a_flush_failed_ = true;
  std::vector<std::string> acked, refused;
  int failed_at = -1;
  for (int i = 0; i < 400; i++) {
    std::string k = "k" + std::to_string(i);
    Status s = Put(k, false, i % 2 == 0);
    if (s.ok()) {
      acked.push_back(k);
    } else {
      EXPECT_EQ(s.code(), ENOSPC) << k << ": " << s.message();
      refused.push_back(k);
      if (failed_at < 0) failed_at = i;
    }
  }
  ASSERT_GE(faults_->appends_failed.load(), 1) << "no flush was tried: the test proves nothing";
  ASSERT_GE(failed_at, 0);
  // After the failure, deletions go on, others are refused; reads never stopped.
  std::string d = "exempt-after";
  // (The recovery thread may hold the stopped instance for a moment: EBUSY inside, ENOSPC out.)
  Status ds;
  for (int i = 0; i < 100; i++) {
    ds = Put(d, true, true);
    if (ds.ok()) break;
    (void)kv_->Recover();
  }
  ASSERT_TRUE(ds.ok()) << ds.message();
  acked.push_back(d);
  const int failures = faults_->appends_failed.load();
  for (int i = 0; i < 5; i++) {
    std::string k = "refused" + std::to_string(i);
    EXPECT_EQ(Put(k, false, true).code(), ENOSPC);
    refused.push_back(k);
  }
  // The reopen held flushes: no flush was tried again into the full disk.
  EXPECT_EQ(faults_->appends_failed.load(), failures);
  ExpectExactly(acked, refused);
  faults_->Disarm();
  full_once_a_flush_failed_ = false;
  ASSERT_TRUE(Put("after", false, true).ok());
  acked.push_back("after");
  ASSERT_TRUE(kv_->Flush().ok());
  Open(nullptr);
  ExpectExactly(acked, refused);
}

}  // namespace
}  // namespace layerfs::kv
