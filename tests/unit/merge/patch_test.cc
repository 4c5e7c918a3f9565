// UnifiedPatch: Git's unified diff of one change, header and hunks, byte for byte.
#include "merge/patch.h"

#include <gtest/gtest.h>

#include "merge/file_merge.h"

namespace layerfs::merge {
namespace {

TreeEntry File(uint32_t mode, std::string_view content) {
  TreeEntry e;
  e.type = EntryType::kFile;
  e.mode = mode;
  e.size = content.size();
  return e;
}

TreeEntry Link(std::string target) {
  TreeEntry e;
  e.type = EntryType::kSymlink;
  e.mode = 0777;
  e.size = target.size();
  e.target = std::move(target);
  return e;
}

DiffEntry Change(std::string path, char c, std::optional<TreeEntry> before, std::optional<TreeEntry> after) {
  return DiffEntry{std::move(path), c, std::move(before), std::move(after)};
}

TEST(PatchTest, ModifiedTextHasGitsHeaderAndHunksWithThreeLinesOfContext) {
  const std::string before = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
  const std::string after = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
  EXPECT_EQ(UnifiedPatch(Change("d/f.txt", 'M', File(0644, before), File(0644, after)), before, after),
            "diff --git a/d/f.txt b/d/f.txt\n"
            "index 0719398..4c5701d 100644\n"  // git hash-object's ids, abbreviated
            "--- a/d/f.txt\n"
            "+++ b/d/f.txt\n"
            "@@ -2,7 +2,7 @@\n"
            " 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
}

TEST(PatchTest, AddedRemovedAndNoNewlineAtEnd) {
  EXPECT_EQ(UnifiedPatch(Change("n", 'A', std::nullopt, File(0755, "x")), "", "x"),
            "diff --git a/n b/n\nnew file mode 100755\nindex 0000000..c1b0730\n--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+x\n"
            "\\ No newline at end of file\n");
  EXPECT_EQ(UnifiedPatch(Change("g", 'D', File(0600, "a\nb\n"), std::nullopt), "a\nb\n", ""),
            "diff --git a/g b/g\ndeleted file mode 100600\nindex 422c2b7..0000000\n--- a/g\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n");
  // An empty file: the header alone, as Git prints it.
  EXPECT_EQ(UnifiedPatch(Change("e", 'A', std::nullopt, File(0644, "")), "", ""),
            "diff --git a/e b/e\nnew file mode 100644\nindex 0000000..e69de29\n");
}

TEST(PatchTest, ModeChangeAloneIsTheModeLines) {
  EXPECT_EQ(UnifiedPatch(Change("run.sh", 'P', File(0644, "echo\n"), File(0755, "echo\n")), "echo\n", "echo\n"),
            "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n");
}

TEST(PatchTest, BinaryAndOversizedContentIsNotDiffedByLines) {
  const std::string bin("a\0b", 3);
  EXPECT_EQ(UnifiedPatch(Change("b", 'M', File(0644, "text\n"), File(0644, bin)), "text\n", bin),
            "diff --git a/b b/b\nindex 8e27be7..20b5be9 100644\nBinary files a/b and b/b differ\n");
  // Over kMaxTextBytes: binary from the entry's size alone, its content never read (so no index
  // line).
  TreeEntry big = File(0644, "");
  big.size = kMaxTextBytes + 1;
  EXPECT_FALSE(NeedsContent(big));
  EXPECT_EQ(UnifiedPatch(Change("big", 'A', std::nullopt, big), "", ""),
            "diff --git a/big b/big\nnew file mode 100644\nBinary files /dev/null and b/big differ\n");
}

TEST(PatchTest, SymlinksShowTheirTargetAndATypeChangeIsARemovalThenAnAddition) {
  EXPECT_EQ(UnifiedPatch(Change("l", 'M', Link("a"), Link("b")), "a", "b"),
            "diff --git a/l b/l\nindex 2e65efe..63d8dbd 120000\n--- a/l\n+++ b/l\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n"
            "\\ No newline at end of file\n");
  EXPECT_EQ(UnifiedPatch(Change("l", 'T', Link("a"), File(0644, "x\n")), "a", "x\n"),
            "diff --git a/l b/l\ndeleted file mode 120000\nindex 2e65efe..0000000\n--- a/l\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"
            "\\ No newline at end of file\n"
            "diff --git a/l b/l\nnew file mode 100644\nindex 0000000..587be6b\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+x\n");
}

TEST(PatchTest, DirectoriesAndSpecialFilesHaveNoPatch) {
  TreeEntry dir;
  dir.type = EntryType::kDir;
  TreeEntry fifo;
  fifo.type = EntryType::kFifo;
  EXPECT_EQ(UnifiedPatch(Change("d", 'A', std::nullopt, dir), "", ""), "");
  EXPECT_EQ(UnifiedPatch(Change("p", 'D', fifo, std::nullopt), "", ""), "");
  EXPECT_FALSE(HasPatchContent(dir));
  // A file that became a directory: the file's removal.
  EXPECT_EQ(UnifiedPatch(Change("x", 'T', File(0644, "1\n"), dir), "1\n", ""),
            "diff --git a/x b/x\ndeleted file mode 100644\nindex d00491f..0000000\n--- a/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-1\n");
}

}  // namespace
}  // namespace layerfs::merge
