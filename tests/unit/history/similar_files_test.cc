// SimilarFiles: which stored file a file without a version of its own takes as its delta base.
#include "history/similar_files.h"

#include <gtest/gtest.h>

namespace layerfs::history {
namespace {

// Handles are the tags; 0 means none was found.
uint64_t Tag(const std::optional<uint64_t>& h) { return h ? *h : 0; }

TEST(SimilarFilesTest, PrefersThePathThenTheNameThenASiblingOfTheSameExtension) {
  SimilarFiles s;
  s.Add(1, "index.js", 1000, false, 1);      // dir 1's previous index.js
  s.Add(2, "index.js", 5000, false, 2);
  s.Add(3, "index.js", 1200, false, 3);
  s.Add(3, "util.js", 900, false, 4);
  s.Add(3, "notes.md", 950, false, 5);
  // The path's previous version, whatever its size.
  EXPECT_EQ(Tag(s.Find(1, "index.js", 90000, false)), 1);
  // The same name elsewhere, nearest in size.
  EXPECT_EQ(Tag(s.Find(4, "index.js", 1150, false)), 3);
  EXPECT_EQ(Tag(s.Find(4, "index.js", 4000, false)), 2);
  // No file of that name: a sibling with the same extension; none: nothing.
  EXPECT_EQ(Tag(s.Find(3, "rule.js", 1000, false)), 4);  // util.js: 100 bytes apart, index.js 200
  EXPECT_EQ(Tag(s.Find(3, "other.md", 1000, false)), 5);
  EXPECT_EQ(Tag(s.Find(3, "Makefile", 1000, false)), 0);
  EXPECT_EQ(Tag(s.Find(9, "rule.js", 1000, false)), 0);
  // Directory 0 is "anywhere": found by name, never as a sibling.
  s.Add(0, "moved.c", 500, false, 9);
  EXPECT_EQ(Tag(s.Find(5, "moved.c", 520, false)), 9u);
  EXPECT_EQ(Tag(s.Find(5, "other.c", 500, false)), 0u);
  EXPECT_EQ(Tag(s.Find(0, "other.c", 500, false)), 0u);
  // Sizes far apart never pair (other names); empty files never ask.
  EXPECT_EQ(Tag(s.Find(4, "index.js", 100000, false)), 0);
  EXPECT_EQ(Tag(s.Find(1, "index.js", 0, false)), 0);
}

TEST(SimilarFilesTest, ChunkedFilesPairOnlyWithTheirPathsChunkedVersion) {
  SimilarFiles s;
  s.Add(1, "big.bin", 8 << 20, true, 1);
  s.Add(1, "small.bin", 100, false, 2);
  EXPECT_EQ(Tag(s.Find(1, "big.bin", 9 << 20, true)), 1);
  EXPECT_EQ(Tag(s.Find(2, "big.bin", 9 << 20, true)), 0);       // not by name elsewhere
  EXPECT_EQ(Tag(s.Find(1, "small.bin", 3 << 20, true)), 0);     // a chunked file, a small version
  EXPECT_EQ(Tag(s.Find(1, "big.bin", 8 << 20, false)), 0);      // a small file, a chunked version
  EXPECT_EQ(Tag(s.Find(2, "x.bin", 4 << 20, false)), 0);        // chunked files are not siblings
  // A later Add of the same path replaces the earlier.
  s.Add(1, "small.bin", 120, false, 3);
  EXPECT_EQ(Tag(s.Find(1, "small.bin", 110, false)), 3);
}

TreeEntry Entry(const std::string& name, EntryType type = EntryType::kFile) {
  TreeEntry e;
  e.name = name;
  e.type = type;
  return e;
}

ObjectId Id(uint8_t tag) {
  ObjectId id;
  id.bytes[0] = tag;
  return id;
}

TEST(SimilarTreesTest, TheLastListingWithTheSameNamesAndTypes) {
  SimilarTrees s;
  const std::vector<TreeEntry> pkg{Entry("index.js"), Entry("shim.js"), Entry("test", EntryType::kDir)};
  EXPECT_FALSE(s.Find(pkg));
  s.Add(pkg, Id(1), std::nullopt);
  EXPECT_EQ(s.Find(pkg), Id(1));
  // Times, sizes, modes and ids do not matter; names and types do, and so does every entry.
  auto later = pkg;
  later[0].mtime_nsec = 12345;
  later[1].size = 99;
  later[0].id = Id(7);
  EXPECT_EQ(s.Find(later), Id(1));
  auto other_type = pkg;
  other_type[2].type = EntryType::kFile;
  EXPECT_FALSE(s.Find(other_type));
  EXPECT_FALSE(s.Find({Entry("index.js"), Entry("shim.js")}));
  EXPECT_FALSE(s.Find({Entry("index.jsshim.js"), Entry("test", EntryType::kDir)}));
  EXPECT_FALSE(s.Find({}));  // an empty listing has no look-alike
  // The last one stored wins.
  s.Add(later, Id(2), Id(1));
  EXPECT_EQ(s.Find(pkg), Id(2));
}

TEST(SimilarTreesTest, ChainsOfLookAlikeHintsAreCut) {
  SimilarTrees s;
  const std::vector<TreeEntry> pkg{Entry("a"), Entry("b")};
  std::optional<ObjectId> base;
  uint32_t hinted = 0;
  for (uint32_t i = 1; i <= 3 * SimilarTrees::kMaxHops; i++) {
    base = s.Find(pkg);
    hinted += base.has_value();
    ObjectId id;
    id.bytes[0] = static_cast<uint8_t>(i);
    id.bytes[1] = static_cast<uint8_t>(i >> 8);
    s.Add(pkg, id, base);
  }
  // A chain of kMaxHops hints, then one stored without, and so on: 3 * 64 listings, 3 without.
  EXPECT_EQ(hinted, 3 * SimilarTrees::kMaxHops - 3);
}

}  // namespace
}  // namespace layerfs::history
