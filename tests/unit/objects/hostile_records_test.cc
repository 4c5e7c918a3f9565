// Hostile and malformed records and trees (docs/reliability.md, "Hostile input"): each test is a
// finding of the fuzz targets (tests/fuzz) or of the crafted-Store review, kept as a regression.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "../test_util.h"
#include "base/coding.h"
#include "base/hash.h"
#include "codec/zstd_codec.h"
#include "objects/object_store.h"
#include "objects/tree.h"

namespace layerfs::objects {
namespace {

constexpr uint64_t kHostileSeed = 0x5eedull;

// Peak resident memory since the last ResetPeak (VmHWM, reset through clear_refs).
void ResetPeak() { std::ofstream("/proc/self/clear_refs") << "5"; }
uint64_t PeakKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}
uint64_t RssKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

std::string Header(Kind kind, Encoding enc, uint64_t depth, uint64_t size) {
  std::string h;
  base::PutU8(&h, static_cast<uint8_t>(kind));
  base::PutU8(&h, static_cast<uint8_t>(enc));
  base::PutVarint(&h, depth);
  base::PutVarint(&h, size);
  return h;
}

class HostileRecordTest : public ::testing::Test {
 protected:
  void Store(kv::Cf cf, const ObjectId& id, const std::string& record) {
    kv::Batch b;
    b.Put(cf, id.AsKey(), record);
    ASSERT_TRUE(kv_->Write(b, false).ok());
  }
  std::unique_ptr<kv::Kv> kv_ = kv::NewMemKv();
  ObjectStore os_{kv_.get(), kHostileSeed, Policy{}};
};

// Fuzz finding (record target): a record declaring a decoded size of 2^62 made the reader
// allocate it (std::length_error: the daemon died). Now the header is refused.
TEST_F(HostileRecordTest, DeclaredSizeBeyondItsKindIsDamageNotAnAllocation) {
  auto frame = codec::Compress("tiny", 3);
  ASSERT_TRUE(frame.ok());
  const ObjectId id = base::HashContent("tiny", kHostileSeed);
  for (uint64_t size : {uint64_t{1} << 62, uint64_t{3} << 20, ~uint64_t{0}}) {
    Store(kv::Cf::kBlobs, id, Header(Kind::kBlob, Encoding::kZstd, 0, size) + *frame);
    auto got = os_.Get(Kind::kBlob, id);
    EXPECT_EQ(got.status().code(), EIO) << size;
    EXPECT_NE(got.status().message().find("more than a blob holds"), std::string::npos) << got.status().message();
    EXPECT_EQ(os_.Info(Kind::kBlob, id).status().code(), EIO);
  }
}

// A tree record declaring 200 MiB (under the cap) over a 10-byte frame is found out before the
// reader has touched anywhere near 200 MiB.
TEST_F(HostileRecordTest, ShortFrameUnderALargeDeclaredSizeCostsLittleMemory) {
  auto frame = codec::Compress("0123456789", 3);
  ASSERT_TRUE(frame.ok());
  const ObjectId id = base::HashContent("0123456789", kHostileSeed);
  Store(kv::Cf::kTrees, id, Header(Kind::kTree, Encoding::kZstd, 0, 200 << 20) + *frame);
  const uint64_t before = RssKiB();
  ResetPeak();
  auto got = os_.Get(Kind::kTree, id);
  EXPECT_EQ(got.status().code(), EIO);
  EXPECT_LT(PeakKiB(), before + (32 << 10)) << "peak RSS grew by more than 32 MiB";
}

// A frame header asking for a larger window than its declared size needs is refused, not
// allocated (a crafted header can ask for 2 GiB).
TEST_F(HostileRecordTest, FrameAskingForMoreWindowThanItsSizeIsRefused) {
  auto big = codec::Compress(std::string(1 << 20, 'a') + testing::RandomBytes(1 << 20, 1), 3);
  ASSERT_TRUE(big.ok());
  // Declared 100 bytes: the decoder's window limit follows the declared size, and this frame's
  // header asks for a window fit for 2 MiB.
  auto d = codec::Decompress(*big, 100);
  EXPECT_FALSE(d.ok());
  auto whole = codec::Decompress(*big, 2 << 20);
  EXPECT_TRUE(whole.ok()) << whole.status().ToString();
}

TEST_F(HostileRecordTest, PutBeyondAKindsLimitIsEfbig) {
  auto r = os_.Put(Kind::kBlob, std::string((2 << 20) + 1, 'x'), std::nullopt);
  EXPECT_EQ(r.status().code(), EFBIG);
  EXPECT_TRUE(os_.Put(Kind::kBlob, std::string(2 << 20, 'x'), std::nullopt).ok());
}

// A delta whose base is itself (and a two-record loop) is refused by the depth check.
TEST_F(HostileRecordTest, DeltaLoopsAndLyingDepthsAreDamage) {
  const ObjectId a = base::HashContent("a", kHostileSeed), b = base::HashContent("b", kHostileSeed);
  auto delta = [&](uint64_t depth, const ObjectId& base) {
    return Header(Kind::kBlob, Encoding::kDelta, depth, 1) + std::string(base.AsKey()) + "xx";
  };
  Store(kv::Cf::kBlobs, a, delta(3, a));
  EXPECT_EQ(os_.Get(Kind::kBlob, a).status().code(), EIO);
  Store(kv::Cf::kBlobs, a, delta(5, b));
  Store(kv::Cf::kBlobs, b, delta(4, a));
  EXPECT_EQ(os_.Get(Kind::kBlob, a).status().code(), EIO);
  Store(kv::Cf::kBlobs, a, delta(1024, b));
  Store(kv::Cf::kBlobs, b, delta(7, a));
  EXPECT_EQ(os_.Get(Kind::kBlob, a).status().code(), EIO);
}

// ---- Trees ----

TreeEntry File(const std::string& name) {
  TreeEntry e;
  e.name = name;
  e.id = base::HashContent(name, kHostileSeed);
  e.size = name.size();
  return e;
}

TEST(HostileTreeTest, NamesThatCouldLeaveADirectoryAreRefused) {
  for (const std::string& bad : std::vector<std::string>{"", ".", "..", "a/b", "../x", std::string("a\0b", 3),
                                                          std::string(256, 'n')}) {
    auto t = DecodeTree(EncodeTree({File(bad)}));
    EXPECT_FALSE(t.ok()) << "name '" << bad << "' (" << bad.size() << " bytes) decoded";
  }
  EXPECT_TRUE(DecodeTree(EncodeTree({File(std::string(255, 'n'))})).ok());
}

// Extended attributes are user.* only, as a Workspace takes them: a crafted tree must not have
// export (as root) set security.capability on a file it writes.
TEST(HostileTreeTest, OnlyUserXattrsDecode) {
  TreeEntry e = File("f");
  e.xattrs = {{"security.capability", "x"}};
  EXPECT_FALSE(DecodeTree(EncodeTree({e})).ok());
  e.xattrs = {{"trusted.x", "x"}};
  EXPECT_FALSE(DecodeTree(EncodeTree({e})).ok());
  e.xattrs = {{"user.b", "1"}, {"user.a", "2"}};  // unsorted
  EXPECT_FALSE(DecodeTree(EncodeTree({e})).ok());
  e.xattrs = {{"user.a", std::string(kMaxXattrValue + 1, 'v')}};
  EXPECT_FALSE(DecodeTree(EncodeTree({e})).ok());
  e.xattrs = {{"user.a", "1"}, {"user.b", std::string(kMaxXattrValue, 'v')}};
  EXPECT_TRUE(DecodeTree(EncodeTree({e})).ok());
}

TEST(HostileTreeTest, DirectoriesInLinkGroupsAndBadTargetsAreRefused) {
  TreeEntry d;
  d.name = "d";
  d.type = EntryType::kDir;
  d.link_group = 3;
  EXPECT_FALSE(DecodeTree(EncodeTree({d})).ok());
  TreeEntry s;
  s.name = "s";
  s.type = EntryType::kSymlink;
  s.target = std::string("/etc\0/x", 7);
  EXPECT_FALSE(DecodeTree(EncodeTree({s})).ok());
  s.target = std::string(kMaxSymlinkTarget, 't');
  EXPECT_FALSE(DecodeTree(EncodeTree({s})).ok());
  s.target = std::string(kMaxSymlinkTarget - 1, 't');
  EXPECT_TRUE(DecodeTree(EncodeTree({s})).ok());
  // A uid of 2^32 would wrap to root: one fifo entry encoded by hand with that uid.
  auto fifo = [](uint64_t uid) {
    std::string t;
    base::PutVarint(&t, 1);
    base::PutBytes(&t, "p");
    base::PutU8(&t, static_cast<uint8_t>(EntryType::kFifo));
    for (uint64_t v : {uint64_t{0644}, uid, uint64_t{0}, uint64_t{0}}) base::PutVarint(&t, v);  // mode uid gid size
    for (int i = 0; i < 4; i++) base::PutVarint(&t, 0);  // mtime sec, nsec, rdev, link group
    base::PutU8(&t, 0);                                  // flags
    base::PutVarint(&t, 0);                              // xattrs
    return t;
  };
  EXPECT_TRUE(DecodeTree(fifo(1000)).ok());
  EXPECT_FALSE(DecodeTree(fifo(uint64_t{1} << 32)).ok());
}

// A count of entries the bytes cannot hold is refused before anything is reserved for it.
TEST(HostileTreeTest, EntryCountsBeyondTheBytesAreRefused) {
  std::string t;
  base::PutVarint(&t, 1 << 20);
  t += std::string(100, '\0');
  EXPECT_FALSE(DecodeTree(t).ok());
  std::string l;
  base::PutVarint(&l, 1 << 20);
  l += std::string(100, '\0');
  EXPECT_FALSE(DecodeChunkList(l).ok());
  EXPECT_FALSE(DecodeChunkList(EncodeChunkList({{base::HashContent("c", kHostileSeed), 0}})).ok());
  EXPECT_FALSE(DecodeChunkList(EncodeChunkList({{base::HashContent("c", kHostileSeed), kMaxChunkLength + 1}})).ok());
  EXPECT_TRUE(DecodeChunkList(EncodeChunkList({{base::HashContent("c", kHostileSeed), kMaxChunkLength}})).ok());
}

}  // namespace
}  // namespace layerfs::objects
