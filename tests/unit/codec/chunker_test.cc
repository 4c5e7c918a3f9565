#include "codec/chunker.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "../test_util.h"

namespace layerfs::codec {
namespace {

using layerfs::testing::RandomBytes;

size_t Sum(const std::vector<size_t>& v) { return std::accumulate(v.begin(), v.end(), size_t{0}); }

TEST(Chunker, EmptyAndSmall) {
  EXPECT_TRUE(ChunkLengths("").empty());
  auto one = ChunkLengths("abc");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], 3u);
  std::string small = RandomBytes(64 << 10, 1);  // == min_size: one chunk
  auto v = ChunkLengths(small);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0], small.size());
}

TEST(Chunker, DeterministicAndCovering) {
  std::string data = RandomBytes(8 << 20, 2);
  auto a = ChunkLengths(data);
  auto b = ChunkLengths(data);
  EXPECT_EQ(a, b);
  EXPECT_EQ(Sum(a), data.size());
  EXPECT_GT(a.size(), 8u);   // ~256 KiB average over 8 MiB
  EXPECT_LT(a.size(), 130u);
}

// Cutting a stream with a window of max_size bytes ahead gives the cuts of the whole.
TEST(Chunker, NextCutLengthStreamsTheSameCuts) {
  ChunkerParams p;
  std::string data = RandomBytes(9 << 20, 5) + std::string(3 << 20, '\0') + RandomBytes(700000, 6);
  std::vector<size_t> streamed;
  for (size_t off = 0; off < data.size();) {
    std::string_view window = std::string_view(data).substr(off, p.max_size);
    size_t n = NextCutLength(window, p);
    ASSERT_GT(n, 0u);
    streamed.push_back(n);
    off += n;
  }
  EXPECT_EQ(streamed, ChunkLengths(data));
}

TEST(Chunker, MinAndMaxRespected) {
  ChunkerParams p;
  std::string data = RandomBytes(6 << 20, 3);
  auto v = ChunkLengths(data, p);
  ASSERT_GT(v.size(), 2u);
  for (size_t i = 0; i < v.size(); i++) {
    EXPECT_LE(v[i], p.max_size);
    if (i + 1 < v.size()) { EXPECT_GT(v[i], p.min_size); }
  }
  // Data with no content boundaries (all zeros) is cut at max_size.
  std::string zeros(5 << 20, '\0');
  auto z = ChunkLengths(zeros, p);
  EXPECT_EQ(Sum(z), zeros.size());
  for (size_t i = 0; i < z.size(); i++) {
    EXPECT_LE(z[i], p.max_size);
    if (i + 1 < z.size()) { EXPECT_EQ(z[i], p.max_size); }
  }
  // Small custom parameters.
  ChunkerParams q{1024, 4096, 16384};
  auto w = ChunkLengths(data.substr(0, 1 << 20), q);
  EXPECT_EQ(Sum(w), size_t{1} << 20);
  for (size_t i = 0; i + 1 < w.size(); i++) {
    EXPECT_GT(w[i], q.min_size);
    EXPECT_LE(w[i], q.max_size);
  }
  EXPECT_GT(w.size(), 40u);
}

TEST(Chunker, InsertionInTheMiddleChangesFewChunks) {
  std::string data = RandomBytes(8 << 20, 4);
  std::string edited = data.substr(0, 4 << 20) + "a few inserted bytes" + data.substr(4 << 20);
  auto a = ChunkLengths(data), b = ChunkLengths(edited);
  auto chunks = [](const std::string& d, const std::vector<size_t>& lens) {
    std::multiset<std::string> s;
    size_t off = 0;
    for (size_t n : lens) {
      s.insert(d.substr(off, n));
      off += n;
    }
    return s;
  };
  auto ca = chunks(data, a), cb = chunks(edited, b);
  size_t new_chunks = 0;
  for (const auto& c : cb)
    if (!ca.count(c)) new_chunks++;
  EXPECT_GE(new_chunks, 1u);
  EXPECT_LE(new_chunks, 3u);
  EXPECT_GT(cb.size(), 10u);
}

}  // namespace
}  // namespace layerfs::codec
