#include "base/coding.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace layerfs::base {
namespace {

TEST(Coding, VarintRoundTrip) {
  std::vector<uint64_t> values = {0, 1, 127, 128, 255, 300, 16383, 16384, (1ull << 32) - 1, 1ull << 32,
                                  (1ull << 63), std::numeric_limits<uint64_t>::max()};
  std::string s;
  for (uint64_t v : values) PutVarint(&s, v);
  Reader r(s);
  for (uint64_t v : values) {
    uint64_t got = 0;
    ASSERT_TRUE(r.Varint(&got));
    EXPECT_EQ(got, v);
  }
  EXPECT_TRUE(r.AtEnd());
  EXPECT_TRUE(r.ok());
}

TEST(Coding, VarintSizes) {
  std::string s;
  PutVarint(&s, 127);
  EXPECT_EQ(s.size(), 1u);
  s.clear();
  PutVarint(&s, 128);
  EXPECT_EQ(s, std::string("\x80\x01", 2));
  s.clear();
  PutVarint(&s, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(s.size(), 10u);
}

TEST(Coding, SVarintRoundTrip) {
  std::vector<int64_t> values = {0, 1, -1, 63, -64, 64, -65, 1'000'000'000'000, -1'000'000'000'000,
                                 std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  std::string s;
  for (int64_t v : values) PutSVarint(&s, v);
  Reader r(s);
  for (int64_t v : values) {
    int64_t got = 0;
    ASSERT_TRUE(r.SVarint(&got));
    EXPECT_EQ(got, v);
  }
  EXPECT_TRUE(r.AtEnd());
  // Zigzag: small magnitudes stay small.
  s.clear();
  PutSVarint(&s, -1);
  EXPECT_EQ(s, std::string("\x01", 1));
}

TEST(Coding, FixedRoundTripAndLittleEndian) {
  std::string s;
  PutFixed32(&s, 0x01020304u);
  PutFixed64(&s, 0x0102030405060708ull);
  EXPECT_EQ(s.substr(0, 4), std::string("\x04\x03\x02\x01", 4));
  EXPECT_EQ(s.substr(4, 8), std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
  Reader r(s);
  uint32_t a;
  uint64_t b;
  ASSERT_TRUE(r.Fixed32(&a));
  ASSERT_TRUE(r.Fixed64(&b));
  EXPECT_EQ(a, 0x01020304u);
  EXPECT_EQ(b, 0x0102030405060708ull);
  EXPECT_TRUE(r.AtEnd());
}

TEST(Coding, BigEndianSortsNumerically) {
  std::string a, b;
  PutBigEndian64(&a, 255);
  PutBigEndian64(&b, 256);
  EXPECT_LT(a, b);
  EXPECT_EQ(GetBigEndian64(a.data()), 255u);
  EXPECT_EQ(GetBigEndian64(b.data()), 256u);
  std::string c;
  PutBigEndian32(&c, 0x01020304u);
  EXPECT_EQ(c, std::string("\x01\x02\x03\x04", 4));
}

TEST(Coding, BytesRoundTrip) {
  std::string s;
  PutBytes(&s, "hello");
  PutBytes(&s, "");
  PutBytes(&s, std::string(300, 'x'));
  PutU8(&s, 7);
  Reader r(s);
  std::string_view v;
  ASSERT_TRUE(r.Bytes(&v));
  EXPECT_EQ(v, "hello");
  ASSERT_TRUE(r.Bytes(&v));
  EXPECT_EQ(v, "");
  ASSERT_TRUE(r.Bytes(&v));
  EXPECT_EQ(v, std::string(300, 'x'));
  uint8_t u;
  ASSERT_TRUE(r.U8(&u));
  EXPECT_EQ(u, 7);
  EXPECT_TRUE(r.AtEnd());
}

TEST(Coding, TruncatedVarintFails) {
  std::string s;
  PutVarint(&s, 1ull << 40);
  for (size_t n = 0; n < s.size(); n++) {
    Reader r(std::string_view(s).substr(0, n));
    uint64_t v;
    EXPECT_FALSE(r.Varint(&v)) << n;
    EXPECT_FALSE(r.ok());
  }
}

TEST(Coding, OverlongVarintFails) {
  std::string s(11, '\x80');
  Reader r(s);
  uint64_t v;
  EXPECT_FALSE(r.Varint(&v));
  EXPECT_FALSE(r.ok());
}

TEST(Coding, TruncatedFixedFails) {
  std::string s;
  PutFixed64(&s, 42);
  for (size_t n = 0; n < 8; n++) {
    Reader r(std::string_view(s).substr(0, n));
    uint64_t v;
    EXPECT_FALSE(r.Fixed64(&v)) << n;
  }
  for (size_t n = 0; n < 4; n++) {
    Reader r(std::string_view(s).substr(0, n));
    uint32_t v;
    EXPECT_FALSE(r.Fixed32(&v)) << n;
  }
  Reader empty("");
  uint8_t u;
  EXPECT_FALSE(empty.U8(&u));
}

TEST(Coding, TruncatedBytesFails) {
  std::string s;
  PutBytes(&s, "abcdef");
  for (size_t n = 0; n < s.size(); n++) {
    Reader r(std::string_view(s).substr(0, n));
    std::string_view v;
    EXPECT_FALSE(r.Bytes(&v)) << n;
  }
  // A length far beyond the input must fail, not wrap.
  std::string huge;
  PutVarint(&huge, std::numeric_limits<uint64_t>::max());
  huge += "abc";
  Reader r(huge);
  std::string_view v;
  EXPECT_FALSE(r.Bytes(&v));
}

TEST(Coding, FailureIsSticky) {
  std::string s;
  PutU8(&s, 1);
  Reader r(s);
  uint32_t v;
  EXPECT_FALSE(r.Fixed32(&v));
  uint8_t u;
  EXPECT_FALSE(r.U8(&u));  // would succeed on its own, but the reader already failed
  EXPECT_FALSE(r.ok());
  std::string_view raw;
  EXPECT_FALSE(r.Raw(0, &raw));
}

TEST(Coding, RawAndRest) {
  Reader r("abcdef");
  std::string_view v;
  ASSERT_TRUE(r.Raw(2, &v));
  EXPECT_EQ(v, "ab");
  EXPECT_EQ(r.Rest(), "cdef");
  EXPECT_FALSE(r.Raw(5, &v));
}

}  // namespace
}  // namespace layerfs::base
