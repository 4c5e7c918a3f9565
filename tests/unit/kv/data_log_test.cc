// DataLog: appends read back (from files and in memory, across reopen), segments roll over at
// 64 MiB, Collect frees exactly the unreferenced segments and never runs under a pin.
#include "kv/data_log.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "../test_util.h"
#include "kv/space_guard.h"

namespace layerfs::kv {
namespace {

std::string ReadBack(DataLog& log, const DataRef& r) {
  std::string out(r.length, '?');
  Status s = log.Read(r, out.data());
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

size_t SegmentFiles(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".seg") n++;
  return n;
}

class DataLogTest : public ::testing::TestWithParam<bool> {
 protected:
  std::string dir() { return GetParam() ? tmp_ / "data" : std::string(); }
  testing::TempDir tmp_;
};

TEST_P(DataLogTest, AppendsReadBackExactly) {
  auto log = DataLog::Open(dir());
  ASSERT_TRUE(log.ok());
  std::vector<std::pair<DataRef, std::string>> written;
  for (uint32_t i = 0; i < 20; i++) {
    std::string d = testing::RandomBytes(1000 + i * 7919, i);
    auto r = (*log)->Append(d);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->length, d.size());
    written.emplace_back(*r, d);
  }
  for (auto& [r, d] : written) EXPECT_EQ(ReadBack(**log, r), d);
  // A sub-range of an append.
  auto& [r0, d0] = written[3];
  EXPECT_EQ(ReadBack(**log, {r0.segment, r0.offset + 10, 100}), d0.substr(10, 100));
  // Bytes past the end of a segment (a segment cut short) are EIO naming it, never zeros.
  DataRef past{r0.segment, written.back().first.offset + written.back().first.length + 5, 64};
  std::string buf64(64, '?');
  Status cut = (*log)->Read(past, buf64.data());
  EXPECT_EQ(cut.code(), EIO);
  EXPECT_NE(cut.message().find((*log)->SegmentPath(r0.segment)), std::string::npos) << cut.message();
  ASSERT_TRUE((*log)->Sync().ok());
  // A segment that does not exist is EIO, not zeros.
  std::string buf(8, '\0');
  Status s = (*log)->Read({r0.segment + 100, 0, 8}, buf.data());
  EXPECT_EQ(s.code(), EIO);
  if (!GetParam()) return;
  log->reset();
  auto again = DataLog::Open(dir());
  ASSERT_TRUE(again.ok());
  for (auto& [r, d] : written) EXPECT_EQ(ReadBack(**again, r), d);
  // New appends go to a new segment: the old ones are never appended to again.
  auto r = (*again)->Append("after reopen");
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->segment, written.back().first.segment);
  EXPECT_EQ(ReadBack(**again, *r), "after reopen");
}

INSTANTIATE_TEST_SUITE_P(FilesAndMemory, DataLogTest, ::testing::Bool());

TEST(DataLog, SegmentsRollOverAndCollectFreesOnlyUnreferencedOnes) {
  testing::TempDir tmp;
  std::string dir = tmp / "data";
  auto log = DataLog::Open(dir);
  ASSERT_TRUE(log.ok());
  const std::string mib = testing::RandomBytes(1 << 20, 1);
  std::vector<DataRef> refs;
  for (int i = 0; i < 130; i++) {  // 130 MiB: three segments
    auto r = (*log)->Append(mib);
    ASSERT_TRUE(r.ok());
    refs.push_back(*r);
  }
  EXPECT_EQ(refs.front().segment, refs[63].segment);
  EXPECT_NE(refs[63].segment, refs[64].segment);  // 64 MiB per segment
  EXPECT_EQ(SegmentFiles(dir), 3u);
  EXPECT_TRUE((*log)->collect_wanted());
  // Only the middle segment is still referenced.
  auto ran = (*log)->Collect([&]() -> Result<std::set<uint32_t>> { return std::set<uint32_t>{refs[64].segment}; });
  ASSERT_TRUE(ran.ok());
  EXPECT_TRUE(*ran);
  EXPECT_EQ(SegmentFiles(dir), 1u);
  EXPECT_FALSE((*log)->collect_wanted());
  EXPECT_EQ(ReadBack(**log, refs[64]), mib);
  std::string buf(16, '\0');
  EXPECT_EQ((*log)->Read(refs[0], buf.data()).code(), EIO);
  // The active segment was freed too: the next append starts a new one.
  auto r = (*log)->Append("x");
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->segment, refs.back().segment);
  ASSERT_TRUE((*log)->Collect([]() -> Result<std::set<uint32_t>> { return std::set<uint32_t>{}; }).ok());
  EXPECT_TRUE((*log)->empty());
  EXPECT_EQ(SegmentFiles(dir), 0u);
  EXPECT_FALSE(std::filesystem::exists(dir));  // nothing left behind
  auto again = (*log)->Append("again");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(ReadBack(**log, *again), "again");
  EXPECT_EQ(SegmentFiles(dir), 1u);
}

// A collection asked for while one runs (a commit deleting blocks after the records were read)
// is still wanted afterwards: before, the run cleared the request on its way out and the
// segments the commit emptied waited for some later request.
TEST(DataLog, ARequestMadeDuringACollectionIsKept) {
  auto log = DataLog::Open("");
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE((*log)->Append("x").ok());
  (*log)->RequestCollect();
  auto ran = (*log)->Collect([&]() -> Result<std::set<uint32_t>> {
    EXPECT_FALSE((*log)->collect_wanted());  // taken by this run
    (*log)->RequestCollect();
    return std::set<uint32_t>{};
  });
  ASSERT_TRUE(ran.ok());
  EXPECT_TRUE(*ran);
  EXPECT_TRUE((*log)->collect_wanted());
  // A failed run leaves the request standing.
  auto failed = (*log)->Collect([&]() -> Result<std::set<uint32_t>> { return Status::Error(EIO, "damaged"); });
  EXPECT_FALSE(failed.ok());
  EXPECT_TRUE((*log)->collect_wanted());
}

TEST(DataLog, CollectDoesNotRunWhileAPinIsHeld) {
  auto log = DataLog::Open("");
  ASSERT_TRUE(log.ok());
  auto pin = (*log)->PinSegments();
  auto r = (*log)->Append("pinned");
  ASSERT_TRUE(r.ok());
  bool called = false;
  Result<bool> ran = false;
  std::thread t([&] {
    ran = (*log)->Collect([&]() -> Result<std::set<uint32_t>> {
      called = true;
      return std::set<uint32_t>{};
    });
  });
  t.join();
  ASSERT_TRUE(ran.ok());
  EXPECT_FALSE(*ran);
  EXPECT_FALSE(called);
  EXPECT_EQ(ReadBack(**log, *r), "pinned");
  pin.unlock();
  ran = (*log)->Collect([&]() -> Result<std::set<uint32_t>> { return std::set<uint32_t>{}; });
  ASSERT_TRUE(ran.ok());
  EXPECT_TRUE(*ran);
  EXPECT_TRUE((*log)->empty());
}

// Appends hand each 8 MiB to writeback as they pass it, and drop the range handed off the time
// before from the page cache once written: a long append leaves only its last ranges in memory,
// and what was dropped reads back from the disk unchanged.
TEST(DataLog, WrittenRangesLeaveThePageCache) {
  testing::TempDir tmp;
  auto log = DataLog::Open(tmp / "data");
  ASSERT_TRUE(log.ok());
  constexpr size_t kMiB = 1 << 20;
  std::vector<std::pair<DataRef, std::string>> written;
  for (uint32_t i = 0; i < 40; i++) {
    std::string d = testing::RandomBytes(kMiB, 100 + i);
    auto r = (*log)->Append(d);
    ASSERT_TRUE(r.ok()) << r.status().message();
    written.emplace_back(*r, std::move(d));
    // Dropping is best effort (pages still being written back stay), so make the first range
    // clean before the append that drops it.
    if (i == 12) {
      ASSERT_TRUE((*log)->Sync().ok());
    }
  }
  const uint32_t seg = written.front().first.segment;
  ASSERT_EQ(written.back().first.segment, seg);
  const std::string path = fmt::format("{}/{:08}.seg", tmp / "data", seg);
  const size_t pages = 8 * kMiB / static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // The first 8 MiB were handed off at the 9th MiB and dropped at the 17th.
  EXPECT_LE(testing::ResidentPages(path, 0, 8 * kMiB), pages / 20);
  // The last appends are neither: still in memory.
  EXPECT_GE(testing::ResidentPages(path, 32 * kMiB, 8 * kMiB), pages / 2);
  for (auto& [r, d] : written) EXPECT_TRUE(ReadBack(**log, r) == d) << "append at " << r.offset;
}

// The scan (with the caller's WAL sync in it) runs with pins held off; the dead segments'
// unlinks do not: a segment whose pages are still being written back makes its unlink wait, and
// reads and writes must not wait with it. The FileIo's Unlink takes a pin on another thread and
// records whether that succeeded while the unlink was pending.
TEST(DataLog, ScanHoldsPinsOffAndUnlinksDoNot) {
  struct Io : FileIo {
    DataLog* log = nullptr;
    bool pinned_in_unlink = false;
    int unlinks = 0;
    std::future<void> pin;  // outlives the unlink: under a held-off pin it could not end there
    int Unlink(const std::string& path) override {
      unlinks++;
      pin = std::async(std::launch::async, [this] { auto p = log->PinSegments(); });
      pinned_in_unlink = pin.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
      return FileIo::Unlink(path);
    }
  };
  testing::TempDir tmp;
  const std::string dir = tmp / "data";
  auto io = std::make_shared<Io>();
  auto log = DataLog::Open(dir, {.io = io});
  ASSERT_TRUE(log.ok());
  io->log = log->get();
  auto dead = (*log)->Append(testing::RandomBytes(1000, 1));
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(SegmentFiles(dir), 1u);
  bool pinned_in_scan = true;
  std::future<void> waiting;  // outlives the scan: its destructor waits for the pin
  auto ran = (*log)->Collect([&]() -> Result<std::set<uint32_t>> {
    waiting = std::async(std::launch::async, [&] { auto p = (*log)->PinSegments(); });
    pinned_in_scan = waiting.wait_for(std::chrono::milliseconds(200)) == std::future_status::ready;
    return std::set<uint32_t>{};
  });
  waiting.get();  // taken once the scan's hold ended
  if (io->pin.valid()) io->pin.get();
  ASSERT_TRUE(ran.ok()) << ran.status().message();
  EXPECT_TRUE(*ran);
  EXPECT_FALSE(pinned_in_scan);
  EXPECT_EQ(io->unlinks, 1);
  EXPECT_TRUE(io->pinned_in_unlink);
  EXPECT_EQ(SegmentFiles(dir), 0u);
  // The log goes on in a new segment.
  auto next = (*log)->Append("after");
  ASSERT_TRUE(next.ok());
  EXPECT_GT(next->segment, dead->segment);
  EXPECT_EQ(ReadBack(**log, *next), "after");
}

// A collection that empties the log removes data/; an append starting a segment meanwhile (its
// mkdir of data/ found it, its create comes next) must not lose the directory in between. The
// FileIo below forces that order if the code allows it: the collector's rmdir waits for the
// appender's mkdir, the appender's create for the rmdir (each for at most 300 ms).
TEST(DataLog, EmptyingTheLogDoesNotRemoveTheDirectoryUnderAnAppend) {
  struct Io : FileIo {
    std::mutex m;
    std::condition_variable cv;
    bool armed = false, at_rmdir = false, mkdir_done = false, rmdir_done = false;
    bool WaitFor(bool& flag) {
      std::unique_lock l(m);
      return cv.wait_for(l, std::chrono::milliseconds(300), [&] { return flag; });
    }
    void Set(bool& flag) {
      std::lock_guard l(m);
      flag = true;
      cv.notify_all();
    }
    int Mkdir(const std::string& path, mode_t mode) override {
      if (armed) WaitFor(at_rmdir);
      int r = FileIo::Mkdir(path, mode);
      if (armed) Set(mkdir_done);
      return r;
    }
    int Rmdir(const std::string& path) override {
      if (!armed) return FileIo::Rmdir(path);
      Set(at_rmdir);
      WaitFor(mkdir_done);
      int r = FileIo::Rmdir(path);
      Set(rmdir_done);
      return r;
    }
    int Open(const std::string& path, int flags, mode_t mode) override {
      if (armed && (flags & O_CREAT)) WaitFor(rmdir_done);
      return FileIo::Open(path, flags, mode);
    }
  };
  testing::TempDir tmp;
  auto io = std::make_shared<Io>();
  auto log = DataLog::Open(tmp / "data", {.io = io});
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE((*log)->Append("dead").ok());
  io->armed = true;
  std::thread collector([&] {
    auto ran = (*log)->Collect([]() -> Result<std::set<uint32_t>> { return std::set<uint32_t>{}; });
    EXPECT_TRUE(ran.ok());
  });
  io->WaitFor(io->at_rmdir);  // the collector is at its rmdir (or holds mu_ there)
  auto r = (*log)->Append("alive");
  collector.join();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(ReadBack(**log, *r), "alive");
  EXPECT_EQ(SegmentFiles(tmp / "data"), 1u);
}

// A ref that no segment can hold is damage at decode (found by fuzz.data_log_record: an offset
// near 2^64 made offset + length wrap past the bounds check of a read, and the read copied from
// outside the segment). A ref ending exactly at the largest segment's end is fine.
TEST(DataRef, RefsPastTheLargestSegmentAreMalformed) {
  auto encoded = [](uint64_t offset, uint32_t length) {
    std::string s;
    DataRef(1, offset, length).EncodeTo(&s);
    return s;
  };
  DataRef ref;
  EXPECT_TRUE(DataRef::Decode(encoded(DataLog::kSegmentBytes - 10, 10), &ref));
  EXPECT_EQ(ref.offset, DataLog::kSegmentBytes - 10);
  EXPECT_TRUE(DataRef::Decode(encoded(0, 65536), &ref));
  EXPECT_FALSE(DataRef::Decode(encoded(DataLog::kSegmentBytes - 10, 11), &ref));
  EXPECT_FALSE(DataRef::Decode(encoded(DataLog::kSegmentBytes + 1, 0), &ref));
  EXPECT_FALSE(DataRef::Decode(encoded(~uint64_t{0} - 129, 200), &ref));  // wraps to 70
  // And a read of such a ref, were one made by hand, stays inside the segment.
  auto log = DataLog::Open("");
  ASSERT_TRUE(log.ok());
  auto r = (*log)->Append(std::string(300, 'x'));
  ASSERT_TRUE(r.ok());
  std::string out(200, '\0');
  DataRef wrapping(r->segment, ~uint64_t{0} - 129, 200);
  EXPECT_EQ((*log)->Read(wrapping, out.data()).code(), EIO);
  Status past = (*log)->ReadPart(*r, 299, 2, out.data());
  EXPECT_FALSE(past.ok());
  EXPECT_EQ((*log)->ReadPart(*r, ~uint64_t{0}, 2, out.data()).code(), past.code());  // wraps to 1
}

TEST(DataLog, ACollectorErrorFreesNothing) {
  auto log = DataLog::Open("");
  ASSERT_TRUE(log.ok());
  auto r = (*log)->Append("keep");
  ASSERT_TRUE(r.ok());
  auto ran = (*log)->Collect([]() -> Result<std::set<uint32_t>> { return Status::Corrupt("damaged record"); });
  EXPECT_FALSE(ran.ok());
  EXPECT_EQ(ReadBack(**log, *r), "keep");
}

}  // namespace
}  // namespace layerfs::kv

namespace layerfs::kv {
namespace {

// Format 6 refs carry a checksum (flagged in the length word); format 3 to 5 refs decode as before.
TEST(DataRefTest, EncodesWithAndWithoutChecksum) {
  DataRef old(7, DataLog::kSegmentBytes - 65536, 65536);  // the last block a segment can hold
  std::string e;
  old.EncodeTo(&e);
  EXPECT_EQ(e.size(), 16u);
  DataRef back;
  ASSERT_TRUE(DataRef::Decode(e, &back));
  EXPECT_FALSE(back.has_hash);
  EXPECT_EQ(back.segment, 7u);
  EXPECT_EQ(back.offset, DataLog::kSegmentBytes - 65536);
  EXPECT_EQ(back.length, 65536u);
  DataRef now = DataRef::Of(9, 4096, "some bytes");
  std::string n;
  now.EncodeTo(&n);
  EXPECT_EQ(n.size(), 24u);
  size_t used = 0;
  n += "patch bytes after it";
  ASSERT_TRUE(DataRef::DecodePrefix(n, &back, &used));
  EXPECT_EQ(used, 24u);
  EXPECT_TRUE(back.has_hash);
  EXPECT_EQ(back.length, 10u);
  EXPECT_EQ(back.hash, now.hash);
  EXPECT_FALSE(DataRef::Decode(n, &back));  // trailing bytes
  EXPECT_FALSE(DataRef::Decode(std::string_view(n).substr(0, 20), &back));  // a cut checksum
}

// Every read of a checked ref reads it whole and compares: a flipped byte is EIO naming the
// segment, in the part read and outside it alike.
TEST(DataLogChecks, FlippedByteIsEioNamingTheSegment) {
  testing::TempDir tmp;
  auto log = DataLog::Open(tmp / "data");
  ASSERT_TRUE(log.ok());
  const std::string a = testing::RandomBytes(65536, 1), b = testing::RandomBytes(65536, 2);
  auto r = (*log)->Append(a + b);
  ASSERT_TRUE(r.ok());
  DataRef ra = DataRef::Of(r->segment, r->offset, a), rb = DataRef::Of(r->segment, r->offset + a.size(), b);
  std::string out(65536, '\0');
  ASSERT_TRUE((*log)->Read(rb, out.data()).ok());
  EXPECT_EQ(out, b);
  const std::string seg = (*log)->SegmentPath(r->segment);
  int fd = ::open(seg.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c = static_cast<char>(b[40000] ^ 0x10);
  ASSERT_EQ(pwrite(fd, &c, 1, static_cast<off_t>(rb.offset + 40000)), 1);
  ::close(fd);
  Status s = (*log)->Read(rb, out.data());
  EXPECT_EQ(s.code(), EIO);
  EXPECT_NE(s.message().find(seg), std::string::npos) << s.message();
  std::string part(10, '\0');
  EXPECT_EQ((*log)->ReadPart(rb, 0, 10, part.data()).code(), EIO);  // far from the flip: still caught
  ASSERT_TRUE((*log)->ReadPart(ra, 100, 10, part.data()).ok());
  EXPECT_EQ(part, a.substr(100, 10));
  // A ref without checksum (format 3) reads what is there.
  DataRef unchecked(rb.segment, rb.offset, rb.length);
  ASSERT_TRUE((*log)->Read(unchecked, out.data()).ok());
}

// Appends are admitted by the SpaceGuard before anything is written; a read-only log appends
// and collects nothing.
TEST(DataLogChecks, RefusedAppendWritesNothingAndReadOnlyLogWritesNothing) {
  testing::TempDir tmp;
  auto guard = SpaceGuard::Open(tmp.path(), false, {.floor_bytes = 16 << 20, .reserve_bytes = 0});
  uint64_t free = 20 << 20;
  guard->SetFreeBytesForTest([&] { return free; });
  auto log = DataLog::Open(tmp / "data", {.space = guard.get()});
  ASSERT_TRUE(log.ok());
  auto ok = (*log)->Append(std::string(1 << 20, 'a'));
  ASSERT_TRUE(ok.ok());
  auto no = (*log)->Append(std::string(8 << 20, 'b'));
  EXPECT_EQ(no.status().code(), ENOSPC);
  ASSERT_TRUE((*log)->Sync().ok());
  EXPECT_EQ(std::filesystem::file_size((*log)->SegmentPath(ok->segment)), size_t{1} << 20);
  log->reset();
  auto ro = DataLog::Open(tmp / "data", {.read_only = true});
  ASSERT_TRUE(ro.ok());
  EXPECT_EQ((*ro)->Append("x").status().code(), EROFS);
  auto collected = (*ro)->Collect([] { return Result<std::set<uint32_t>>(std::set<uint32_t>{}); });
  ASSERT_TRUE(collected.ok());
  EXPECT_FALSE(*collected);
  EXPECT_EQ(SegmentFiles(tmp / "data"), 1u);
  std::string out(1 << 20, '\0');
  ASSERT_TRUE((*ro)->Read(*ok, out.data()).ok());
}

}  // namespace
}  // namespace layerfs::kv
