// Import and Export against real directories: fidelity, the stat cache, and export safety.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "history/file_content.h"
#include "store_fixture.h"
#include "objects/object_store.h"
#include "objects/tree.h"

namespace layerfs {
namespace {

using testing::RandomBytes;
using testing::ReadFileBytes;
using testing::SetMtime;
using testing::StoreTest;
using testing::TempDir;
using testing::TextBytes;
using testing::WriteFile;
namespace fs = std::filesystem;

bool XattrsSupported(const std::string& dir) {
  std::string probe = dir + "/.xattr_probe";
  WriteFile(probe, "");
  bool ok = setxattr(probe.c_str(), "user.probe", "1", 1, 0) == 0;
  unlink(probe.c_str());
  return ok;
}

std::map<std::string, std::string> Xattrs(const std::string& path) {
  std::map<std::string, std::string> out;
  ssize_t n = llistxattr(path.c_str(), nullptr, 0);
  if (n <= 0) return out;
  std::string names(n, '\0');
  n = llistxattr(path.c_str(), names.data(), names.size());
  for (size_t pos = 0; pos < static_cast<size_t>(n);) {
    std::string name = names.c_str() + pos;
    pos += name.size() + 1;
    if (name.rfind("user.", 0) != 0) continue;
    std::string v(256, '\0');
    ssize_t vn = lgetxattr(path.c_str(), name.c_str(), v.data(), v.size());
    v.resize(vn < 0 ? 0 : vn);
    out[name] = v;
  }
  return out;
}

struct Node {
  mode_t mode;  // full st_mode
  off_t size;
  int64_t mtime_ns;
  uid_t uid;
  gid_t gid;
  std::string content;  // file bytes or link target
  std::map<std::string, std::string> xattrs;
  ino_t ino;
};

// Everything below `root`, by relative path, without following symlinks.
std::map<std::string, Node> Snapshot(const std::string& root) {
  std::map<std::string, Node> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    std::string p = it->path().string();
    struct stat sb;
    EXPECT_EQ(lstat(p.c_str(), &sb), 0) << p;
    Node n{sb.st_mode, sb.st_size, sb.st_mtim.tv_sec * 1000000000ll + sb.st_mtim.tv_nsec, sb.st_uid, sb.st_gid, "", {}, sb.st_ino};
    if (S_ISREG(sb.st_mode)) n.content = ReadFileBytes(p);
    if (S_ISLNK(sb.st_mode)) n.content = fs::read_symlink(p).string();
    else n.xattrs = Xattrs(p);
    out[p.substr(root.size() + 1)] = n;
  }
  return out;
}

void ExpectSameTrees(const std::string& a, const std::string& b) {
  auto sa = Snapshot(a), sb = Snapshot(b);
  std::vector<std::string> na, nb;
  for (auto& [k, v] : sa) na.push_back(k);
  for (auto& [k, v] : sb) nb.push_back(k);
  ASSERT_EQ(na, nb);
  for (auto& [path, x] : sa) {
    const Node& y = sb[path];
    EXPECT_EQ(x.mode, y.mode) << path;  // type and permission bits
    EXPECT_EQ(x.mtime_ns, y.mtime_ns) << path;
    EXPECT_EQ(x.xattrs, y.xattrs) << path;
    if (!S_ISDIR(x.mode)) {
      EXPECT_EQ(x.size, y.size) << path;
      EXPECT_EQ(x.content, y.content) << path;
    }
    if (geteuid() == 0) {
      EXPECT_EQ(x.uid, y.uid) << path;
      EXPECT_EQ(x.gid, y.gid) << path;
    }
  }
  // Hard links: paths sharing an inode on one side share one on the other.
  for (auto& [p1, x1] : sa)
    for (auto& [p2, x2] : sa)
      if (p1 < p2 && !S_ISDIR(x1.mode)) { EXPECT_EQ(x1.ino == x2.ino, sb[p1].ino == sb[p2].ino) << p1 << " " << p2; }
}

// A tree with one of everything.
void BuildRichTree(const std::string& src, bool with_xattrs) {
  fs::create_directories(src + "/a/b/c/d");
  fs::create_directories(src + "/emptydir");
  fs::create_directories(src + "/private");
  WriteFile(src + "/hello.txt", "hello world\n");
  WriteFile(src + "/empty", "");
  WriteFile(src + "/a/b/c/d/deep.txt", TextBytes(70000, 1));
  WriteFile(src + "/large.bin", RandomBytes((3 << 20) + 12345, 2));  // > 2 MiB: chunked
  WriteFile(src + "/large_text", TextBytes((5 << 20) / 2, 3));
  WriteFile(src + "/exec.sh", "#!/bin/sh\necho hi\n");
  chmod((src + "/exec.sh").c_str(), 0755);
  WriteFile(src + "/private/secret", "s3cret");
  chmod((src + "/private/secret").c_str(), 0600);
  chmod((src + "/private").c_str(), 0700);
  if (geteuid() == 0) {
    WriteFile(src + "/setuid", "suid");
    chmod((src + "/setuid").c_str(), 04755);
    chown((src + "/private/secret").c_str(), 1234, 5678);
  }
  WriteFile(src + "/a/linked", "shared by two names");
  ASSERT_EQ(link((src + "/a/linked").c_str(), (src + "/a/b/also_linked").c_str()), 0);
  ASSERT_EQ(link((src + "/a/linked").c_str(), (src + "/third_link").c_str()), 0);
  ASSERT_EQ(symlink("../../etc/passwd", (src + "/a/b/up_and_out").c_str()), 0);
  ASSERT_EQ(symlink("/etc/passwd", (src + "/absolute").c_str()), 0);
  ASSERT_EQ(symlink("hello.txt", (src + "/relative").c_str()), 0);
  ASSERT_EQ(symlink("does/not/exist", (src + "/dangling").c_str()), 0);
  ASSERT_EQ(symlink("a/b", (src + "/dirlink").c_str()), 0);
  ASSERT_EQ(mkfifo((src + "/fifo").c_str(), 0640), 0);
  if (with_xattrs) {
    ASSERT_EQ(setxattr((src + "/hello.txt").c_str(), "user.color", "blue", 4, 0), 0);
    ASSERT_EQ(setxattr((src + "/hello.txt").c_str(), "user.bin", "\0\1\2", 3, 0), 0);
    ASSERT_EQ(setxattr((src + "/a").c_str(), "user.dir", "yes", 3, 0), 0);
    ASSERT_EQ(setxattr((src + "/empty").c_str(), "user.empty", "", 0, 0), 0);
  }
  // Distinct nanosecond mtimes everywhere, directories last (children change them).
  int64_t t = 1600000000;
  long ns = 123456789;
  std::vector<std::string> dirs;
  for (auto it = fs::recursive_directory_iterator(src); it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_directory() && !it->is_symlink()) dirs.push_back(it->path());
    else SetMtime(it->path(), t++, ns++);
  }
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) SetMtime(*it, t++, ns++);
}

// A chunked file is stored and read back piecewise, never whole: the reader is asked for at
// most a few chunking windows at a time, and the result is the one of storing it whole.
TEST_F(StoreTest, LargeContentIsWrittenAndReadPiecewise) {
  std::string data = RandomBytes(24 << 20, 11);
  size_t largest_read = 0, reads = 0;
  auto read = [&](uint64_t off, size_t len) -> Result<std::string> {
    largest_read = std::max(largest_read, len);
    reads++;
    return data.substr(off, len);
  };
  auto& os = store_->objects();
  auto piecewise = history::WriteContentFrom(os, data.size(), read, nullptr);
  ASSERT_TRUE(piecewise.ok()) << piecewise.status().ToString();
  EXPECT_TRUE(piecewise->chunked);
  EXPECT_LE(largest_read, 4u << 20);
  EXPECT_GE(reads, 6u);
  auto whole = history::WriteContent(os, data, nullptr);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->id, piecewise->id);
  size_t pieces = 0, largest_piece = 0;
  std::string back;
  auto n = history::ReadContentTo(os, piecewise->id, true, [&](std::string_view d) {
    pieces++;
    largest_piece = std::max(largest_piece, d.size());
    back.append(d);
    return Status::Ok();
  });
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, data.size());
  EXPECT_EQ(back, data);
  EXPECT_GT(pieces, 20u);
  EXPECT_LE(largest_piece, 1u << 20);
  // A reader that fails (or comes back short) fails the write.
  auto failing = [&](uint64_t off, size_t len) -> Result<std::string> {
    if (off > (8u << 20)) return Status::Error(EIO, "disk gone");
    return data.substr(off, len);
  };
  EXPECT_EQ(history::WriteContentFrom(os, data.size(), failing, nullptr).status().code(), EIO);
}

// Export writes runs of zeros as holes: a mostly empty large file stays sparse.
TEST_F(StoreTest, ExportKeepsZeroRunsSparse) {
  fs::create_directories(tmp_ / "src");
  std::string data(64 << 20, '\0');
  std::string head = RandomBytes(1 << 20, 12);
  data.replace(0, head.size(), head);
  WriteFile(tmp_ / "src/sparse.img", data);
  ObjectId c = Import(tmp_ / "src");
  ASSERT_TRUE(store_->Export(c, tmp_ / "out").ok());
  EXPECT_EQ(ReadFileBytes(tmp_ / "out/sparse.img"), data);
  struct stat sb;
  ASSERT_EQ(stat((tmp_ / "out/sparse.img").c_str(), &sb), 0);
  EXPECT_LT(static_cast<uint64_t>(sb.st_blocks) * 512, 16u << 20) << "zeros were written out";
}

TEST_F(StoreTest, ImportExportRoundTrip) {
  std::string src = tmp_ / "src";
  fs::create_directories(src);
  bool xattrs = XattrsSupported(src);
  BuildRichTree(src, xattrs);
  ImportStats stats;
  ObjectId c = Import(src, "main", &stats);
  EXPECT_EQ(stats.dirs, 7u);  // root, a, a/b, a/b/c, a/b/c/d, emptydir, private
  EXPECT_GT(stats.objects_added, 10u);

  // The tree as stored.
  auto large = store_->Lookup(c, "large.bin");
  ASSERT_TRUE(large.ok());
  EXPECT_TRUE(large->chunked);
  EXPECT_EQ(large->size, (3u << 20) + 12345);
  auto hello = store_->Lookup(c, "hello.txt");
  EXPECT_FALSE(hello->chunked);
  EXPECT_EQ(*store_->ReadFile(*hello), "hello world\n");
  if (xattrs) {
    ASSERT_EQ(hello->xattrs.size(), 2u);
    EXPECT_EQ(hello->xattrs[0].first, "user.bin");  // sorted
    EXPECT_EQ(hello->xattrs[1].second, "blue");
  }
  auto empty = store_->Lookup(c, "empty");
  EXPECT_TRUE(empty->id.IsZero());
  EXPECT_EQ(empty->size, 0u);
  auto up = store_->Lookup(c, "a/b/up_and_out");
  EXPECT_EQ(up->type, EntryType::kSymlink);
  EXPECT_EQ(up->target, "../../etc/passwd");
  EXPECT_EQ(store_->Lookup(c, "fifo")->type, EntryType::kFifo);
  EXPECT_EQ(store_->Lookup(c, "fifo")->mode, 0640u);
  EXPECT_EQ(store_->Lookup(c, "exec.sh")->mode, 0755u);
  EXPECT_EQ(store_->Lookup(c, "private/secret")->mode, 0600u);
  EXPECT_EQ(store_->Lookup(c, "dirlink")->type, EntryType::kSymlink);
  auto l1 = store_->Lookup(c, "a/linked"), l2 = store_->Lookup(c, "a/b/also_linked"), l3 = store_->Lookup(c, "third_link");
  EXPECT_NE(l1->link_group, 0u);
  EXPECT_EQ(l1->link_group, l2->link_group);
  EXPECT_EQ(l1->link_group, l3->link_group);
  EXPECT_EQ(l1->id, l2->id);
  EXPECT_EQ(hello->link_group, 0u);
  EXPECT_EQ(store_->Lookup(c, "a/b/c/d/deep.txt")->mtime_nsec % 1000, store_->Lookup(c, "a/b/c/d/deep.txt")->mtime_nsec % 1000);
  auto commit = store_->GetCommit(c);
  struct stat lb;
  ASSERT_EQ(stat((src + "/large.bin").c_str(), &lb), 0);
  EXPECT_GT(commit->logical_bytes, static_cast<uint64_t>(lb.st_size));

  std::string out = tmp_ / "out";
  auto s = store_->Export(c, out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectSameTrees(src, out);
  // Exporting into an existing empty directory works too; a non-empty one is refused.
  std::string out2 = tmp_ / "out2";
  fs::create_directories(out2);
  ASSERT_TRUE(store_->Export(c, out2).ok());
  ExpectSameTrees(src, out2);
  EXPECT_EQ(store_->Export(c, out2).code(), EEXIST);
  WriteFile(tmp_ / "plainfile", "x");
  EXPECT_EQ(store_->Export(c, tmp_ / "plainfile").code(), ENOTDIR);

  // Importing the export gives the identical root tree.
  ObjectId again = Import(out);
  EXPECT_EQ(store_->GetCommit(again)->root, commit->root);
  EXPECT_TRUE(store_->Diff(c, again)->empty());
  EXPECT_TRUE(store_->Verify({})->ok());
}

TEST_F(StoreTest, ExportOfEveryCommitAfterEdits) {
  std::string src = tmp_ / "src";
  fs::create_directories(src + "/d");
  std::vector<std::pair<ObjectId, std::map<std::string, std::string>>> history;
  std::string big = RandomBytes(3 << 20, 4);
  for (int i = 0; i < 6; i++) {
    big.replace(static_cast<size_t>(i) * 400000 + 1000, 8, "edit#" + std::to_string(i) + "..");
    std::string small = TextBytes(20000 + i * 10, i);
    WriteFile(src + "/big", big);
    WriteFile(src + "/d/small", small);
    if (i % 2) WriteFile(src + "/d/odd", "odd " + std::to_string(i));
    else fs::remove(src + "/d/odd");
    std::map<std::string, std::string> files = {{"big", big}, {"d/small", small}};
    if (i % 2) files["d/odd"] = "odd " + std::to_string(i);
    history.push_back({Import(src), files});
  }
  for (size_t i = 0; i < history.size(); i++) {
    TempDir out;
    std::string dir = out / "x";
    ASSERT_TRUE(store_->Export(history[i].first, dir).ok());
    size_t count = 0;
    for (auto& e : fs::recursive_directory_iterator(dir)) count += e.is_regular_file();
    EXPECT_EQ(count, history[i].second.size()) << i;
    for (auto& [p, data] : history[i].second) { EXPECT_EQ(ReadFileBytes(dir + "/" + p), data) << i << " " << p; }
  }
  // Deltas of the big file's chunks keep the Store far smaller than six copies.
  auto st = store_->Stats();
  EXPECT_LT(st->payload_bytes, 2 * big.size());
}

// An imported file without a previous version at its path deltas against a look-alike: a file
// of the same name in the previous tree (a move), a sibling with the same extension, or a file
// of the same name imported just before it (its job waited for); unlike content stays whole.
TEST_F(StoreTest, ImportedNewPathsDeltaAgainstLookAlikes) {
  auto edit = [](std::string s, int seed) {
    for (int i = 0; i < 3; i++) s.insert((s.size() / 4) * (i + 1), "/* edit " + std::to_string(seed * 10 + i) + " */");
    return s;
  };
  std::string src = tmp_ / "src";
  fs::create_directories(src + "/lib");
  fs::create_directories(src + "/docs");
  const std::string alpha = TextBytes(30000, 1), readme = TextBytes(20000, 2), pkg = TextBytes(3000, 3);
  WriteFile(src + "/lib/alpha.js", alpha);
  WriteFile(src + "/docs/README.md", readme);
  ObjectId c1 = Import(src);

  fs::remove_all(src + "/docs");
  fs::create_directories(src + "/guide");
  std::map<std::string, std::string> files = {{"lib/alpha.js", alpha},
                                              {"guide/README.md", edit(readme, 1)},
                                              {"lib/beta.js", edit(alpha, 2)},
                                              {"lib/noise.bin", RandomBytes(20000, 5)}};
  for (int i = 0; i < 40; i++) files[fmt::format("pkgs/p{:02}/package.json", i)] = edit(pkg, 10 + i);
  for (auto& [p, data] : files) {
    fs::create_directories(fs::path(src + "/" + p).parent_path());
    WriteFile(src + "/" + p, data);
  }
  ObjectId c2 = Import(src);

  auto info = [&](const ObjectId& commit, const std::string& path) {
    auto e = store_->Lookup(commit, path);
    EXPECT_TRUE(e.ok()) << path;
    auto i = store_->objects().Info(objects::Kind::kBlob, e.ok() ? e->id : ObjectId{});
    EXPECT_TRUE(i.ok()) << path;
    return i.ok() ? *i : objects::RecordInfo{};
  };
  auto id = [&](const ObjectId& commit, const std::string& path) { return store_->Lookup(commit, path)->id; };
  auto moved = info(c2, "guide/README.md");
  EXPECT_EQ(moved.encoding, objects::Encoding::kDelta);
  EXPECT_EQ(moved.base, id(c1, "docs/README.md"));
  auto sibling = info(c2, "lib/beta.js");
  EXPECT_EQ(sibling.encoding, objects::Encoding::kDelta);
  EXPECT_EQ(sibling.base, id(c1, "lib/alpha.js"));
  EXPECT_NE(info(c2, "pkgs/p00/package.json").encoding, objects::Encoding::kDelta);
  for (int i = 1; i < 40; i++) {
    auto r = info(c2, fmt::format("pkgs/p{:02}/package.json", i));
    EXPECT_EQ(r.encoding, objects::Encoding::kDelta) << i;
    EXPECT_LT(r.stored_bytes, 500u) << i;
  }
  EXPECT_NE(info(c2, "lib/noise.bin").encoding, objects::Encoding::kDelta);
  for (auto& [p, data] : files) EXPECT_EQ(Cat(c2, p), data) << p;
  EXPECT_EQ(Cat(c1, "docs/README.md"), readme);
  auto v = store_->Verify({});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok()) << (v->problems.empty() ? "" : v->problems[0]);
}

// An imported directory without a previous listing deltas against the last listing of the same
// names in this import (copies of one package nested under several parents, files with other
// mtimes); a directory of other names stays whole.
TEST_F(StoreTest, ImportedNewDirectoriesDeltaAgainstLookAlikes) {
  std::string src = tmp_ / "src";
  const std::vector<std::string> names{"implement.js", "index.js", "is-implemented.js", "package.json",
                                       "polyfill.js", "shim.js", "README.md", "LICENSE"};
  for (int copy = 0; copy < 5; copy++) {
    const std::string dir = fmt::format("{}/node_modules/user{}/es5-ext", src, copy);
    fs::create_directories(dir);
    for (const auto& n : names) {
      WriteFile(dir + "/" + n, n == "package.json" ? fmt::format("{{\"copy\": {}}}", copy) : "// " + n);
      struct timespec t[2] = {{1700000000 + copy, 1000 * copy}, {1700000000 + copy, 1000 * copy}};
      ASSERT_EQ(utimensat(AT_FDCWD, (dir + "/" + n).c_str(), t, 0), 0);
    }
  }
  fs::create_directories(src + "/other");
  for (const auto& n : names) WriteFile(src + "/other/x-" + n, "x");
  ObjectId c = Import(src);

  auto tree = [&](int copy) { return store_->Lookup(c, fmt::format("node_modules/user{}/es5-ext", copy))->id; };
  auto first = store_->objects().Info(objects::Kind::kTree, tree(0));
  ASSERT_TRUE(first.ok());
  EXPECT_NE(first->encoding, objects::Encoding::kDelta);
  for (int copy = 1; copy < 5; copy++) {
    auto r = store_->objects().Info(objects::Kind::kTree, tree(copy));
    ASSERT_TRUE(r.ok()) << copy;
    EXPECT_EQ(r->encoding, objects::Encoding::kDelta) << copy;
    EXPECT_EQ(r->base, tree(copy - 1)) << copy;
    auto whole = store_->objects().Get(objects::Kind::kTree, tree(copy));
    ASSERT_TRUE(whole.ok());
    EXPECT_LT(r->stored_bytes * 2, whole->size()) << copy;
  }
  auto other = store_->objects().Info(objects::Kind::kTree, store_->Lookup(c, "other")->id);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->encoding, objects::Encoding::kDelta);
  for (int copy = 0; copy < 5; copy++) {
    EXPECT_EQ(Cat(c, fmt::format("node_modules/user{}/es5-ext/package.json", copy)), fmt::format("{{\"copy\": {}}}", copy));
    auto e = store_->Lookup(c, fmt::format("node_modules/user{}/es5-ext/shim.js", copy));
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->mtime_sec, 1700000000 + copy);
    EXPECT_EQ(e->mtime_nsec, 1000u * copy);
  }
  auto v = store_->Verify({});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok()) << (v->problems.empty() ? "" : v->problems[0]);
}

std::vector<std::string> RegularFiles(const std::string& root) {
  std::vector<std::string> out;
  for (auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file() && !e.is_symlink()) out.push_back(e.path());
  return out;
}

TEST_F(StoreTest, StatCacheSkipsUnchangedFiles) {
  std::string src = tmp_ / "src";
  fs::create_directories(src + "/sub/deeper");
  WriteFile(src + "/a", TextBytes(1000, 1));
  WriteFile(src + "/b", TextBytes(2000, 2));
  WriteFile(src + "/sub/c", RandomBytes(5000, 3));
  WriteFile(src + "/sub/deeper/d", RandomBytes((2 << 20) + 7, 4));  // chunked
  WriteFile(src + "/sub/e", "");
  ASSERT_EQ(symlink("a", (src + "/link").c_str()), 0);
  int64_t old = time(nullptr) - 10;
  auto files = RegularFiles(src);
  ASSERT_EQ(files.size(), 5u);
  for (size_t i = 0; i < files.size(); i++) SetMtime(files[i], old, static_cast<long>(i) * 1000 + 1);

  ImportStats s1;
  ObjectId c1 = Import(src, "main", &s1);
  EXPECT_EQ(s1.files, 5u);
  EXPECT_EQ(s1.hashed, 5u);
  EXPECT_EQ(s1.stat_hits, 0u);

  ImportStats s2;
  ObjectId c2 = Import(src, "main", &s2);
  EXPECT_NE(c1, c2);
  EXPECT_EQ(s2.files, 5u);
  EXPECT_EQ(s2.hashed, 0u);
  EXPECT_EQ(s2.stat_hits, 5u);
  EXPECT_EQ(s2.objects_added, 0u);  // the same root tree; the commit is not counted
  EXPECT_EQ(s2.bytes_added, 0u);
  EXPECT_EQ(store_->GetCommit(c2)->root, store_->GetCommit(c1)->root);

  // Same size, new mtime: reread.
  std::string b2 = TextBytes(2000, 2);
  b2[10] = 'X';
  WriteFile(src + "/b", b2);
  SetMtime(src + "/b", old + 1, 0);
  ImportStats s3;
  ObjectId c3 = Import(src, "main", &s3);
  EXPECT_EQ(s3.hashed, 1u);
  EXPECT_EQ(s3.stat_hits, 4u);
  EXPECT_EQ(Cat(c3, "b"), b2);
  EXPECT_EQ(Cat(c3, "a"), TextBytes(1000, 1));
  auto d = store_->Diff(c2, c3);
  ASSERT_EQ(d->size(), 1u);
  EXPECT_EQ((*d)[0].path, "b");
  EXPECT_EQ((*d)[0].change, 'M');

  // Same size and the same mtime restored after a write: the ctime gives it away.
  std::string b3 = b2;
  b3[11] = 'Y';
  WriteFile(src + "/b", b3);
  SetMtime(src + "/b", old + 1, 0);
  ImportStats s4;
  ObjectId c4 = Import(src, "main", &s4);
  EXPECT_EQ(s4.hashed, 1u);
  EXPECT_EQ(Cat(c4, "b"), b3);

  // Without the cache everything is hashed, and the result is the same.
  ImportOptions o;
  o.use_stat_cache = false;
  ImportStats s5;
  auto c5 = store_->Import(src, o, &s5);
  ASSERT_TRUE(c5.ok());
  EXPECT_EQ(s5.hashed, 5u);
  EXPECT_EQ(s5.stat_hits, 0u);
  EXPECT_EQ(store_->GetCommit(*c5)->root, store_->GetCommit(c4)->root);

  // The cache is per branch: a fork hashes on its first import.
  ASSERT_TRUE(store_->Fork("other", "main").ok());
  ImportStats s6;
  Import(src, "other", &s6);
  EXPECT_EQ(s6.hashed, 5u);
}

TEST_F(StoreTest, RecentlyModifiedFilesAreNotTrusted) {
  // Files modified just now are "racily clean": the next import rereads them.
  WriteFile(tmp_ / "fresh", "just written");
  ImportStats s1, s2;
  Import(tmp_.path(), "main", &s1);
  ObjectId c = Import(tmp_.path(), "main", &s2);
  EXPECT_EQ(s2.hashed, 1u);
  EXPECT_EQ(s2.stat_hits, 0u);
  EXPECT_EQ(Cat(c, "fresh"), "just written");
}

TEST_F(StoreTest, StatCacheSurvivesReplacedFile) {
  // A file replaced by another with the same size and mtime but a different inode is reread.
  int64_t old = time(nullptr) - 10;
  WriteFile(tmp_ / "f", "aaaa");
  SetMtime(tmp_ / "f", old, 0);
  Import(tmp_.path());
  WriteFile(tmp_ / "g", "bbbb");
  SetMtime(tmp_ / "g", old, 0);
  fs::rename(tmp_ / "g", tmp_ / "f");
  ImportStats s;
  ObjectId c = Import(tmp_.path(), "main", &s);
  EXPECT_EQ(s.hashed, 1u);
  EXPECT_EQ(Cat(c, "f"), "bbbb");
}

// Commits a hand-made root tree on `branch` and returns the Commit.
ObjectId CommitEntries(Store& st, std::vector<TreeEntry> entries, const std::string& branch = "main") {
  std::sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.name < b.name; });
  auto put = st.objects().Put(objects::Kind::kTree, objects::EncodeTree(entries), std::nullopt);
  EXPECT_TRUE(put.ok());
  auto head = st.BranchHead(branch);
  uint64_t files = 0;  // as the Commit must say: every entry, subtrees included
  for (const auto& e : entries) files += 1 + (e.type == EntryType::kDir ? e.subtree_entries : 0);
  auto c = st.CommitTree(branch, put->id, *head, "crafted", 0, files);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

ObjectId PutBlob(Store& st, const std::string& data) {
  auto r = st.objects().Put(objects::Kind::kBlob, data, std::nullopt);
  EXPECT_TRUE(r.ok());
  return r->id;
}

TreeEntry File(const std::string& name, Store& st, const std::string& data, uint64_t group = 0) {
  TreeEntry e;
  e.name = name;
  e.type = EntryType::kFile;
  e.size = data.size();
  e.id = PutBlob(st, data);
  e.link_group = group;
  return e;
}

TreeEntry Symlink(const std::string& name, const std::string& target, uint64_t group = 0) {
  TreeEntry e;
  e.name = name;
  e.type = EntryType::kSymlink;
  e.mode = 0777;
  e.target = target;
  e.size = target.size();
  e.link_group = group;
  return e;
}

bool IsEmptyDir(const std::string& p) { return fs::is_empty(p); }

TEST_F(StoreTest, ExportNeverWritesOutsideDir) {
  TempDir outside;
  std::string victim = outside / "victim";
  WriteFile(victim, "original");
  std::string outside_dir = outside / "dir";
  fs::create_directories(outside_dir);

  // A symlink to the outside, then a hard link "through" it: the link must be to the symlink,
  // never to (or over) its target.
  ObjectId c1 = CommitEntries(*store_, {Symlink("a_link", outside_dir, 7), File("b_file", *store_, "payload", 7),
                                        Symlink("c_abs", victim), Symlink("d_up", "../../../../../../" + victim)});
  std::string out1 = tmp_ / "out1";
  Status s = store_->Export(c1, out1);
  (void)s;  // success or failure, nothing may change outside
  EXPECT_TRUE(IsEmptyDir(outside_dir));
  EXPECT_EQ(ReadFileBytes(victim), "original");
  struct stat sb;
  if (lstat((out1 + "/b_file").c_str(), &sb) == 0) { EXPECT_FALSE(S_ISDIR(sb.st_mode)); }

  // A subdirectory whose name collides with a symlink (entries with duplicate names, in raw tree
  // bytes no encoder would produce): rejected as damage before anything is written through it.
  TreeEntry inner = File("pwned", *store_, "evil");
  auto sub = store_->objects().Put(objects::Kind::kTree, objects::EncodeTree({inner}), std::nullopt);
  TreeEntry dir_entry;
  dir_entry.name = "x";
  dir_entry.type = EntryType::kDir;
  dir_entry.mode = 0755;
  dir_entry.id = sub->id;
  std::string raw = objects::EncodeTree({Symlink("x", outside_dir), dir_entry});
  auto root = store_->objects().Put(objects::Kind::kTree, raw, std::nullopt);
  auto c2 = store_->CommitTree("main", root->id, Head(), "dup names", 0, 2);
  ASSERT_TRUE(c2.ok());
  std::string out2 = tmp_ / "out2";
  EXPECT_EQ(store_->Export(*c2, out2).code(), EIO);
  EXPECT_TRUE(IsEmptyDir(outside_dir));

  // Names that try to escape are rejected the same way.
  for (const char* bad : {"..", "../escape", "a/../../b", "/abs"}) {
    TreeEntry e = File("placeholder", *store_, "escape");
    e.name = bad;
    auto t = store_->objects().Put(objects::Kind::kTree, objects::EncodeTree({e}), std::nullopt);
    auto c = store_->CommitTree("main", t->id, Head(), "bad name", 0, 1);
    ASSERT_TRUE(c.ok());
    std::string out = tmp_ / ("out_" + std::to_string(reinterpret_cast<uintptr_t>(bad)));
    EXPECT_EQ(store_->Export(*c, out).code(), EIO) << bad;
    EXPECT_FALSE(fs::exists(tmp_ / "escape"));
    EXPECT_FALSE(fs::exists("/abs"));
  }

  // A symlink entry inside a directory pointing up, and a sibling directory written after it.
  TreeEntry deep_file = File("file", *store_, "inside");
  auto deep = store_->objects().Put(objects::Kind::kTree, objects::EncodeTree({deep_file}), std::nullopt);
  TreeEntry zdir;
  zdir.name = "z";
  zdir.type = EntryType::kDir;
  zdir.mode = 0755;
  zdir.id = deep->id;
  zdir.subtree_entries = 1;
  ObjectId c3 = CommitEntries(*store_, {Symlink("a", outside_dir), Symlink("b", ".."), zdir});
  std::string out3 = tmp_ / "out3";
  ASSERT_TRUE(store_->Export(c3, out3).ok());
  EXPECT_EQ(ReadFileBytes(out3 + "/z/file"), "inside");
  EXPECT_EQ(fs::read_symlink(out3 + "/a"), outside_dir);
  EXPECT_TRUE(IsEmptyDir(outside_dir));
  EXPECT_EQ(ReadFileBytes(victim), "original");

  // Exporting into a directory that holds a symlink to the outside is refused (not empty).
  std::string out4 = tmp_ / "out4";
  fs::create_directories(out4);
  ASSERT_EQ(symlink(outside_dir.c_str(), (out4 + "/z").c_str()), 0);
  EXPECT_EQ(store_->Export(c3, out4).code(), EEXIST);
  EXPECT_TRUE(IsEmptyDir(outside_dir));
}

TEST_F(StoreTest, ExportManyDirectories) {
  // More directories than a process may hold open at once is still fine.
  std::vector<TreeEntry> dirs;
  TreeEntry f = File("f", *store_, "leaf");
  auto leaf = store_->objects().Put(objects::Kind::kTree, objects::EncodeTree({f}), std::nullopt);
  for (int i = 0; i < 1500; i++) {
    TreeEntry d;
    d.name = "d" + std::to_string(10000 + i);
    d.type = EntryType::kDir;
    d.mode = 0755;
    d.mtime_sec = 1000 + i;
    d.id = leaf->id;
    d.subtree_entries = 1;
    dirs.push_back(d);
  }
  ObjectId c = CommitEntries(*store_, dirs);
  struct rlimit old;
  getrlimit(RLIMIT_NOFILE, &old);
  struct rlimit low = old;
  low.rlim_cur = std::min<rlim_t>(old.rlim_cur, 256);
  setrlimit(RLIMIT_NOFILE, &low);
  Status s = store_->Export(c, tmp_ / "out");
  setrlimit(RLIMIT_NOFILE, &old);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ReadFileBytes(tmp_ / "out/d11499/f"), "leaf");
  struct stat sb;
  ASSERT_EQ(stat((tmp_ / "out/d10007").c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mtim.tv_sec, 1007);
}

TEST_F(StoreTest, ExportDamagedContentFails) {
  ObjectId c = CommitEntries(*store_, {File("f", *store_, "data")});
  auto e = store_->Lookup(c, "f");
  // A size that disagrees with the content is damage.
  TreeEntry wrong = *e;
  wrong.size = 99;
  ObjectId c2 = CommitEntries(*store_, {wrong});
  EXPECT_EQ(store_->Export(c2, tmp_ / "o").code(), EIO);
  // A missing blob.
  TreeEntry missing = *e;
  missing.id = ObjectId::FromHex("00112233445566778899aabbccddeeff").value();
  ObjectId c3 = CommitEntries(*store_, {missing});
  EXPECT_FALSE(store_->Export(c3, tmp_ / "o2").ok());
  EXPECT_EQ(store_->Export(ObjectId{}, tmp_ / "o3").code(), ENOENT);
  EXPECT_FALSE(fs::exists(tmp_ / "o3"));
}

// Many workers store what one does: the same trees (ids keyed alike), the same records (delta
// bases are fixed before a file is queued), hard links across directories read once.
TEST(ImportThreads, ManyWorkersWriteWhatOneWrites) {
  TempDir tmp;
  const std::string src = tmp / "src";
  auto write_tree = [&](int version) {
    for (int d = 0; d < 12; d++) {
      fs::create_directories(src + "/d" + std::to_string(d) + "/sub");
      for (int f = 0; f < 25; f++) {
        std::string content = TextBytes(500 + 97 * f + d, d * 100 + f);
        if ((f + d) % 5 == 0) content += "version " + std::to_string(version);
        WriteFile(src + "/d" + std::to_string(d) + "/f" + std::to_string(f), content);
      }
      WriteFile(src + "/d" + std::to_string(d) + "/sub/empty", "");
    }
    std::string big = RandomBytes((3 << 20) + 11, 9);
    big.replace(1 << 20, 7, "edit" + std::to_string(version) + "..");
    WriteFile(src + "/big", big);
    WriteFile(src + "/d3/big2", RandomBytes((2 << 20) + 5, 10 + version));
  };
  write_tree(1);
  ASSERT_EQ(link((src + "/d0/f1").c_str(), (src + "/d7/sub/linked").c_str()), 0);
  ASSERT_EQ(link((src + "/big").c_str(), (src + "/d2/big-linked").c_str()), 0);
  ASSERT_EQ(symlink("../d0/f1", (src + "/d1/sym").c_str()), 0);

  struct Run {
    std::vector<ObjectId> roots;
    uint64_t payload = 0, objects = 0;
  };
  auto import = [&](unsigned threads) {
    Run run;
    auto kv = kv::NewMemKv();
    auto st = Store::OpenOnKv(kv.get(), Policy{}, {.seed = 42});
    EXPECT_TRUE(st.ok());
    for (int v = 1; v <= 3; v++) {
      write_tree(v);
      struct stat now;
      EXPECT_EQ(::stat((src + "/big").c_str(), &now), 0);
      EXPECT_EQ(now.st_nlink, 2u) << "rewritten in place";
      // Times are part of the trees: the same in both runs.
      std::vector<std::string> paths;
      for (auto& e : fs::recursive_directory_iterator(src)) paths.push_back(e.path());
      std::sort(paths.rbegin(), paths.rend());  // children before their directories
      for (auto& p : paths) SetMtime(p, 1700000000 + v, 0);
      SetMtime(src, 1700000000 + v, 0);
      ImportOptions o;
      o.threads = threads;
      o.use_stat_cache = false;
      ImportStats stats;
      auto c = (*st)->Import(src, o, &stats);
      EXPECT_TRUE(c.ok()) << c.status().ToString();
      if (!c.ok()) return run;
      EXPECT_EQ(stats.hashed, 12u * 26 + 2) << "each linked file is read once";
      run.roots.push_back((*st)->GetCommit(*c)->root);
      run.objects += stats.objects_added;
    }
    auto stats = (*st)->Stats();
    EXPECT_TRUE(stats.ok());
    run.payload = stats->payload_bytes;
    TempDir out;
    EXPECT_TRUE((*st)->Export(*(*st)->BranchHead("main").value(), out / "x").ok());
    EXPECT_EQ(ReadFileBytes((out / "x") + "/" "d7/sub/linked"), ReadFileBytes(src + "/d0/f1"));
    EXPECT_EQ(ReadFileBytes((out / "x") + "/" "d2/big-linked"), ReadFileBytes(src + "/big"));
    struct stat a, b;
    EXPECT_EQ(::stat(((out / "x") + "/" "big").c_str(), &a), 0);
    EXPECT_EQ(::stat(((out / "x") + "/" "d2/big-linked").c_str(), &b), 0);
    EXPECT_EQ(a.st_ino, b.st_ino);
    return run;
  };
  Run one = import(1), many = import(4);
  ASSERT_EQ(one.roots.size(), 3u);
  EXPECT_EQ(one.roots, many.roots);
  EXPECT_EQ(one.payload, many.payload);
  EXPECT_EQ(one.objects, many.objects);
}

}  // namespace
}  // namespace layerfs
