#include "codec/zstd_codec.h"

#include <gtest/gtest.h>

#include "../test_util.h"

namespace layerfs::codec {
namespace {

using layerfs::testing::RandomBytes;
using layerfs::testing::TextBytes;

TEST(ZstdCodec, CompressRoundTrip) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{100}, size_t{70000}, size_t{3} << 20}) {
    std::string src = TextBytes(n, n);
    auto z = Compress(src, 3);
    ASSERT_TRUE(z.ok()) << z.status().ToString();
    if (n >= 70000) { EXPECT_LT(z->size(), src.size() / 2); }
    auto d = Decompress(*z, src.size());
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(*d, src);
  }
}

TEST(ZstdCodec, IncompressibleRoundTrip) {
  std::string src = RandomBytes(200000, 1);
  auto z = Compress(src, 3);
  ASSERT_TRUE(z.ok());
  auto d = Decompress(*z, src.size());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, src);
}

TEST(ZstdCodec, DeltaRoundTrip) {
  std::string base = RandomBytes(300000, 2);
  std::string target = base.substr(0, 100000) + "inserted text" + base.substr(100000, 150000) + RandomBytes(500, 3);
  auto delta = EncodeDelta(base, target, 3);
  ASSERT_TRUE(delta.ok()) << delta.status().ToString();
  EXPECT_LT(delta->size(), 2000u);
  auto d = DecodeDelta(base, *delta, target.size());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, target);
}

TEST(ZstdCodec, DeltaOfSmallEditOfOneMiBIsTiny) {
  std::string base = RandomBytes(1 << 20, 4);
  std::string target = base;
  target[500000] ^= 0x55;
  target.replace(700000, 10, "0123456789");
  auto delta = EncodeDelta(base, target, 3);
  ASSERT_TRUE(delta.ok());
  EXPECT_LT(delta->size(), 512u);
  auto d = DecodeDelta(base, *delta, target.size());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, target);
}

TEST(ZstdCodec, DeltaAgainstEmptyBase) {
  std::string target = TextBytes(50000, 9);
  auto delta = EncodeDelta("", target, 3);
  ASSERT_TRUE(delta.ok());
  auto d = DecodeDelta("", *delta, target.size());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, target);
}

TEST(ZstdCodec, WrongDecodedSizeIsEio) {
  std::string src = TextBytes(100000, 5);
  auto z = Compress(src, 3);
  ASSERT_TRUE(z.ok());
  for (size_t n : {src.size() - 1, src.size() + 1, size_t{0}, src.size() * 2}) {
    auto d = Decompress(*z, n);
    EXPECT_FALSE(d.ok()) << n;
    EXPECT_EQ(d.status().code(), EIO) << n;
  }
  std::string base = RandomBytes(100000, 6), target = base + "tail";
  auto delta = EncodeDelta(base, target, 3);
  ASSERT_TRUE(delta.ok());
  auto d = DecodeDelta(base, *delta, target.size() - 1);
  EXPECT_EQ(d.status().code(), EIO);
  d = DecodeDelta(base, *delta, target.size() + 1);
  EXPECT_EQ(d.status().code(), EIO);
}

TEST(ZstdCodec, TruncatedFramesAreEio) {
  std::string src = TextBytes(100000, 7);
  auto z = Compress(src, 3);
  ASSERT_TRUE(z.ok());
  for (size_t n = 0; n < z->size(); n += std::max<size_t>(1, z->size() / 50)) {
    auto d = Decompress(std::string_view(*z).substr(0, n), src.size());
    EXPECT_FALSE(d.ok()) << n;
    EXPECT_EQ(d.status().code(), EIO) << n;
  }
  auto d = Decompress(std::string_view(*z).substr(0, z->size() - 1), src.size());
  EXPECT_EQ(d.status().code(), EIO);
}

TEST(ZstdCodec, TrailingGarbageIsEio) {
  std::string src = TextBytes(10000, 8);
  auto z = Compress(src, 3);
  ASSERT_TRUE(z.ok());
  auto d = Decompress(*z + "xyz", src.size());
  EXPECT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), EIO);
}

TEST(ZstdCodec, CorruptedFramesNeverCrashAndNeverLie) {
  // Flip every byte position (one at a time) of a small frame, and a sample of a larger one: the
  // result is either EIO or exactly some output of the requested size, never a crash.
  std::string src = TextBytes(5000, 10);
  auto z = Compress(src, 3);
  ASSERT_TRUE(z.ok());
  int failures = 0;
  for (size_t i = 0; i < z->size(); i++) {
    std::string bad = *z;
    bad[i] ^= 0xff;
    auto d = Decompress(bad, src.size());
    if (!d.ok()) {
      EXPECT_EQ(d.status().code(), EIO);
      failures++;
    } else {
      EXPECT_EQ(d->size(), src.size());
    }
  }
  EXPECT_GT(failures, 0);
  // Pure garbage.
  for (uint64_t seed = 0; seed < 50; seed++) {
    auto d = Decompress(RandomBytes(64 + seed * 13, seed), 1000);
    EXPECT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), EIO);
    auto dd = DecodeDelta(src, RandomBytes(64 + seed * 7, seed + 100), 5000);
    EXPECT_FALSE(dd.ok());
    EXPECT_EQ(dd.status().code(), EIO);
  }
}

TEST(ZstdCodec, DeltaWithWrongBaseFailsOrDiffers) {
  std::string base = RandomBytes(100000, 11), target = base;
  target[50] = 'x';
  auto delta = EncodeDelta(base, target, 3);
  ASSERT_TRUE(delta.ok());
  std::string other = RandomBytes(100000, 12);
  auto d = DecodeDelta(other, *delta, target.size());
  if (d.ok()) { EXPECT_NE(*d, target); }
  else { EXPECT_EQ(d.status().code(), EIO); }
}

}  // namespace
}  // namespace layerfs::codec
