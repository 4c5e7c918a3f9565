#include "objects/tree.h"

#include <gtest/gtest.h>

#include "base/coding.h"
#include "base/hash.h"

namespace layerfs::objects {
namespace {

std::vector<TreeEntry> SampleEntries() {
  std::vector<TreeEntry> v;
  TreeEntry d;
  d.name = "dir";
  d.type = EntryType::kDir;
  d.mode = 0755;
  d.id = base::HashContent("subtree", 1);
  d.mtime_sec = -5;  // before the epoch
  d.mtime_nsec = 999999999;
  v.push_back(d);
  TreeEntry f;
  f.name = "file.txt";
  f.mode = 04755;
  f.uid = 1000;
  f.gid = 100;
  f.size = 123456789012ull;
  f.mtime_sec = 1700000000;
  f.mtime_nsec = 123;
  f.link_group = 77;
  f.chunked = true;
  f.id = base::HashContent("content", 1);
  f.xattrs = {{"user.a", "1"}, {"user.b", std::string("\0\xff", 2)}};
  v.push_back(f);
  TreeEntry e;
  e.name = "empty";
  v.push_back(e);
  std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.name < b.name; });
  TreeEntry l;
  l.name = "link";
  l.type = EntryType::kSymlink;
  l.mode = 0777;
  l.target = "../../etc/passwd";
  l.size = l.target.size();
  v.push_back(l);
  TreeEntry n;
  n.name = "node";
  n.type = EntryType::kChar;
  n.rdev = 0x0103;
  v.push_back(n);
  TreeEntry p;
  p.name = "pipe";
  p.type = EntryType::kFifo;
  v.push_back(p);
  return v;
}

void ExpectSameEntry(const TreeEntry& a, const TreeEntry& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.mode, b.mode);
  EXPECT_EQ(a.uid, b.uid);
  EXPECT_EQ(a.gid, b.gid);
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.mtime_sec, b.mtime_sec);
  EXPECT_EQ(a.mtime_nsec, b.mtime_nsec);
  EXPECT_EQ(a.rdev, b.rdev);
  EXPECT_EQ(a.link_group, b.link_group);
  EXPECT_EQ(a.chunked, b.chunked);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.xattrs, b.xattrs);
  EXPECT_EQ(a.summary, b.summary);
  EXPECT_EQ(a.subdirs, b.subdirs);
  EXPECT_EQ(a.links_below, b.links_below);
}

TEST(Tree, RoundTrip) {
  auto entries = SampleEntries();
  std::string enc = EncodeTree(entries);
  auto dec = DecodeTree(enc);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  ASSERT_EQ(dec->size(), entries.size());
  for (size_t i = 0; i < entries.size(); i++) ExpectSameEntry((*dec)[i], entries[i]);
  EXPECT_EQ(EncodeTree(*dec), enc);  // canonical
  auto empty = DecodeTree(EncodeTree({}));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(Tree, TruncationAndTrailingBytesFail) {
  std::string enc = EncodeTree(SampleEntries());
  for (size_t n = 0; n < enc.size(); n++) {
    auto d = DecodeTree(std::string_view(enc).substr(0, n));
    EXPECT_FALSE(d.ok()) << n;
    if (!d.ok()) { EXPECT_EQ(d.status().code(), EIO); }
  }
  EXPECT_EQ(DecodeTree(enc + "x").status().code(), EIO);
}

TEST(Tree, InvalidNamesAndOrderRejected) {
  for (const char* bad : {"", ".", "..", "a/b", "/"}) {
    TreeEntry e;
    e.name = bad;
    EXPECT_EQ(DecodeTree(EncodeTree({e})).status().code(), EIO) << bad;
  }
  TreeEntry nul;
  nul.name = std::string("a\0b", 3);
  EXPECT_EQ(DecodeTree(EncodeTree({nul})).status().code(), EIO);
  TreeEntry longname;
  longname.name = std::string(256, 'x');
  EXPECT_EQ(DecodeTree(EncodeTree({longname})).status().code(), EIO);
  longname.name = std::string(255, 'x');
  EXPECT_TRUE(DecodeTree(EncodeTree({longname})).ok());

  TreeEntry a, b;
  a.name = "a";
  b.name = "b";
  EXPECT_EQ(DecodeTree(EncodeTree({b, a})).status().code(), EIO);  // out of order
  EXPECT_EQ(DecodeTree(EncodeTree({a, a})).status().code(), EIO);  // duplicate
  TreeEntry dup_sym = a;
  dup_sym.type = EntryType::kSymlink;
  dup_sym.target = "/";
  TreeEntry dup_dir = a;
  dup_dir.type = EntryType::kDir;
  EXPECT_EQ(DecodeTree(EncodeTree({dup_sym, dup_dir})).status().code(), EIO);
}

TEST(Tree, InvalidFieldsRejected) {
  TreeEntry e;
  e.name = "x";
  e.mode = 010000;
  EXPECT_EQ(DecodeTree(EncodeTree({e})).status().code(), EIO);
  e.mode = 0644;
  e.mtime_nsec = 1000000000;
  EXPECT_EQ(DecodeTree(EncodeTree({e})).status().code(), EIO);
  e.mtime_nsec = 0;
  e.type = static_cast<EntryType>(9);
  EXPECT_EQ(DecodeTree(EncodeTree({e})).status().code(), EIO);
  // A huge entry count.
  std::string s;
  base::PutVarint(&s, 1ull << 40);
  EXPECT_EQ(DecodeTree(s).status().code(), EIO);
}

// Format 7: a directory entry's summary round-trips; flags that make no sense are damage; and
// SummarizeDir knows a summary only when every subdirectory has one.
TEST(Tree, DirectorySummaries) {
  TreeEntry sub;
  sub.name = "sub";
  sub.type = EntryType::kDir;
  sub.id = base::HashContent("sub", 1);
  sub.subtree_entries = 9;
  sub.summary = true;
  sub.subdirs = 3;
  sub.links_below = true;
  TreeEntry plain = sub;
  plain.name = "t";
  plain.summary = false;
  plain.subdirs = 0;
  plain.links_below = false;
  std::string enc = EncodeTree({sub, plain});
  auto dec = DecodeTree(enc);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  ExpectSameEntry((*dec)[0], sub);
  ExpectSameEntry((*dec)[1], plain);
  EXPECT_EQ(EncodeTree(*dec), enc);

  auto with_flags = [&](TreeEntry e, uint8_t flags) {
    std::string one = EncodeTree({e});
    // The flags byte follows the link group, the last varint before it (all one byte here).
    size_t pos = 1 + 1 + e.name.size() + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1;
    one[pos] = static_cast<char>(flags);
    return DecodeTree(one);
  };
  TreeEntry small = sub;
  small.subtree_entries = 5;
  small.subdirs = 2;
  small.mode = 0;
  ASSERT_TRUE(with_flags(small, 2 | 4).ok());
  EXPECT_EQ(with_flags(small, 4).status().code(), EIO);      // links without a summary
  EXPECT_EQ(with_flags(small, 1 | 2).status().code(), EIO);  // a chunked directory
  EXPECT_EQ(with_flags(small, 8 | 2).status().code(), EIO);
  TreeEntry file;
  file.name = "f";
  file.id = base::HashContent("c", 1);
  file.mode = 0;  // one-byte varints: the flags byte is where with_flags looks
  ASSERT_TRUE(with_flags(file, 1).ok());
  EXPECT_EQ(with_flags(file, 2).status().code(), EIO);
  TreeEntry lying = sub;
  lying.subdirs = 10;  // more subdirectories than entries below
  EXPECT_EQ(DecodeTree(EncodeTree({lying})).status().code(), EIO);

  TreeEntry linked_file = file;
  linked_file.link_group = 4;
  TreeEntry dir;
  SummarizeDir({file, plain}, &dir);
  EXPECT_FALSE(dir.summary) << "t has no summary";
  SummarizeDir({file}, &dir);
  EXPECT_TRUE(dir.summary && dir.subdirs == 0 && !dir.links_below);
  TreeEntry quiet = sub;
  quiet.links_below = false;
  SummarizeDir({file, quiet}, &dir);
  EXPECT_TRUE(dir.summary && dir.subdirs == 1 && !dir.links_below);
  SummarizeDir({linked_file, quiet}, &dir);
  EXPECT_TRUE(dir.summary && dir.links_below);
  SummarizeDir({file, sub}, &dir);
  EXPECT_TRUE(dir.summary && dir.subdirs == 1 && dir.links_below) << "from below";
}

TEST(Tree, ValidName) {
  EXPECT_TRUE(ValidName("a"));
  EXPECT_TRUE(ValidName("..."));
  EXPECT_TRUE(ValidName(".hidden"));
  EXPECT_FALSE(ValidName(""));
  EXPECT_FALSE(ValidName("."));
  EXPECT_FALSE(ValidName(".."));
  EXPECT_FALSE(ValidName("a/b"));
}

TEST(Commit, RoundTrip) {
  CommitInfo c;
  c.root = base::HashContent("root", 2);
  c.parents = {base::HashContent("p1", 2), base::HashContent("p2", 2)};
  c.message = "a message\nwith two lines";
  c.time_sec = 1700000000;
  c.time_nsec = 42;
  c.logical_bytes = 1ull << 40;
  c.files = 12345;
  std::string enc = EncodeCommit(c);
  auto d = DecodeCommit(enc);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->root, c.root);
  EXPECT_EQ(d->parents, c.parents);
  EXPECT_EQ(d->message, c.message);
  EXPECT_EQ(d->time_sec, c.time_sec);
  EXPECT_EQ(d->time_nsec, c.time_nsec);
  EXPECT_EQ(d->logical_bytes, c.logical_bytes);
  EXPECT_EQ(d->files, c.files);
  for (size_t n = 0; n < enc.size(); n++) { EXPECT_FALSE(DecodeCommit(enc.substr(0, n)).ok()) << n; }
  EXPECT_FALSE(DecodeCommit(enc + "x").ok());
  std::string badver = enc;
  badver[0] = 2;
  EXPECT_EQ(DecodeCommit(badver).status().code(), EIO);
}

TEST(ChunkList, RoundTrip) {
  std::vector<ChunkRef> chunks;
  for (int i = 0; i < 10; i++) chunks.push_back({base::HashContent(std::to_string(i), 3), 65536u + i});
  std::string enc = EncodeChunkList(chunks);
  auto d = DecodeChunkList(enc);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), chunks.size());
  for (size_t i = 0; i < chunks.size(); i++) {
    EXPECT_EQ((*d)[i].id, chunks[i].id);
    EXPECT_EQ((*d)[i].length, chunks[i].length);
  }
  for (size_t n = 0; n < enc.size(); n++) { EXPECT_FALSE(DecodeChunkList(enc.substr(0, n)).ok()) << n; }
  EXPECT_FALSE(DecodeChunkList(enc + "x").ok());
}

}  // namespace
}  // namespace layerfs::objects
