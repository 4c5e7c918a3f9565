// Workspace without FUSE: inode operations, commits of exactly what was written, and a
// random-operation test against an in-memory model with every Commit read back.
#include "workspace/workspace.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/xattr.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "base/coding.h"
#include "kv/kv.h"
#include "objects/object_store.h"
#include "workspace/collector.h"
#include "workspace/inode.h"
#include "workspace/registry.h"
#include "../test_util.h"

namespace layerfs::workspace {
namespace {

class WorkspaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kv_ = kv::NewMemKv();
    auto st = Store::OpenOnKv(kv_.get(), Policy{});
    ASSERT_TRUE(st.ok()) << st.status().message();
    store_ = std::move(*st);
    Reopen();
  }
  void Reopen() {
    ws_.reset();
    auto ws = Workspace::Open(*store_, {.read_only = false, .branch = "main", .commit = {}});
    ASSERT_TRUE(ws.ok()) << ws.status().message();
    ws_ = std::move(*ws);
  }
  // The key schema of the one Workspace in the Kv (its id from its first record), for tests
  // that plant damaged records.
  Keys WorkspaceKeys() {
    std::string any;
    EXPECT_TRUE(kv_->Scan(kv::Cf::kWorkspace, std::string(), std::string(64, '\xff'), [&](auto k, auto) {
      any = std::string(k);
      return false;
    }).ok());
    EXPECT_GE(any.size(), 8u);
    any.resize(8, '\0');
    return Keys(base::GetBigEndian64(any.data()));
  }
  Ino Create(Ino dir, const std::string& name, const std::string& data = "") {
    auto a = ws_->Mknod(dir, name, S_IFREG | 0644, 0, {});
    EXPECT_TRUE(a.ok()) << a.status().message();
    if (!data.empty()) {
      EXPECT_TRUE(ws_->Write(a->ino, 0, data).ok());
    }
    return a->ino;
  }
  // The id of what `path` names in `commit` (file content or subtree).
  ObjectId IdOf(const ObjectId& commit, const std::string& path) {
    auto e = store_->Lookup(commit, path);
    EXPECT_TRUE(e.ok()) << path;
    return e.ok() ? e->id : ObjectId{};
  }
  std::string Cat(const ObjectId& commit, const std::string& path) {
    auto e = store_->Lookup(commit, path);
    if (!e.ok()) return "<" + e.status().message() + ">";
    auto d = store_->ReadFile(*e);
    return d.ok() ? *d : "<" + d.status().message() + ">";
  }
  std::unique_ptr<kv::Kv> kv_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Workspace> ws_;
};

TEST_F(WorkspaceTest, WriteCommitReadBack) {
  Ino d = ws_->Mkdir(kRootIno, "src", 0755, {})->ino;
  Create(d, "a.txt", "hello");
  Ino b = Create(kRootIno, "b.txt", "world");
  auto c1 = ws_->Commit("one");
  ASSERT_TRUE(c1.ok()) << c1.status().message();
  EXPECT_EQ(Cat(*c1, "src/a.txt"), "hello");
  EXPECT_EQ(Cat(*c1, "b.txt"), "world");
  ASSERT_TRUE(ws_->Write(b, 2, "RLD!!").ok());
  auto c2 = ws_->Commit("two");
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(Cat(*c2, "b.txt"), "woRLD!!");
  EXPECT_EQ(Cat(*c1, "b.txt"), "world");  // history is immutable
  auto head = store_->BranchHead("main");
  EXPECT_EQ(**head, *c2);
  auto info = store_->GetCommit(*c2);
  EXPECT_EQ(info->logical_bytes, 5u + 7u);
  EXPECT_EQ(info->files, 3u);
}

// A SETATTR may carry a ctime (the kernel's own, under its writeback cache); else it is now.
TEST_F(WorkspaceTest, SetAttrTakesAGivenCtimeElseNow) {
  Ino f = Create(kRootIno, "f", "x");
  AttrChange ch;
  ch.mtime = timespec{1000, 5};
  ch.ctime = timespec{2000, 7};
  auto a = ws_->SetAttr(f, ch);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->mtime.tv_sec, 1000);
  EXPECT_EQ(a->ctime.tv_sec, 2000);
  EXPECT_EQ(a->ctime.tv_nsec, 7);
  AttrChange mode;
  mode.mode = 0600;
  const time_t before = time(nullptr);
  a = ws_->SetAttr(f, mode);
  ASSERT_TRUE(a.ok());
  EXPECT_GE(a->ctime.tv_sec, before);
  EXPECT_EQ(a->mtime.tv_sec, 1000);
  EXPECT_EQ(ws_->GetAttr(f)->ctime.tv_sec, a->ctime.tv_sec);
}

// Git's commit --amend: the new Commit has the head's parents and the head's tree with what was
// written since; the branch moves from the head to it, and the head stays readable in history.
TEST_F(WorkspaceTest, AmendReplacesTheHead) {
  auto root = store_->BranchHead("main");
  ASSERT_TRUE(root.ok() && root->has_value());
  Ino b = Create(kRootIno, "b.txt", "world");
  auto c1 = ws_->Commit("one");
  ASSERT_TRUE(c1.ok());
  ASSERT_TRUE(ws_->Write(b, 0, "W").ok());
  Create(kRootIno, "c.txt", "new");
  auto c2 = ws_->Amend("one, amended");
  ASSERT_TRUE(c2.ok()) << c2.status().message();
  EXPECT_NE(*c2, *c1);
  auto info = store_->GetCommit(*c2);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->parents, std::vector<ObjectId>{**root});
  EXPECT_EQ(info->message, "one, amended");
  EXPECT_EQ(Cat(*c2, "b.txt"), "World");
  EXPECT_EQ(Cat(*c2, "c.txt"), "new");
  EXPECT_EQ(Cat(*c1, "b.txt"), "world");
  EXPECT_EQ(**store_->BranchHead("main"), *c2);
  auto changes = ws_->Changes();
  ASSERT_TRUE(changes.ok());
  EXPECT_TRUE(changes->empty());
  // Amending with nothing written changes only the message, and keeps the parents.
  auto c3 = ws_->Amend("again");
  ASSERT_TRUE(c3.ok());
  EXPECT_EQ(store_->GetCommit(*c3)->root, info->root);
  EXPECT_EQ(store_->GetCommit(*c3)->parents, std::vector<ObjectId>{**root});
  auto c4 = ws_->Commit("two");
  ASSERT_TRUE(c4.ok());
  EXPECT_EQ(store_->GetCommit(*c4)->parents, std::vector<ObjectId>{*c3});
}

TEST_F(WorkspaceTest, ErrnosMatchPosix) {
  Ino d = ws_->Mkdir(kRootIno, "d", 0755, {})->ino;
  Create(d, "f", "x");
  EXPECT_EQ(ws_->Mkdir(kRootIno, "d", 0755, {}).status().code(), EEXIST);
  EXPECT_EQ(ws_->Rmdir(kRootIno, "d").code(), ENOTEMPTY);
  EXPECT_EQ(ws_->Unlink(kRootIno, "d").code(), EISDIR);
  EXPECT_EQ(ws_->Rmdir(d, "f").code(), ENOTDIR);
  EXPECT_EQ(ws_->Lookup(kRootIno, "nope").status().code(), ENOENT);
  EXPECT_EQ(ws_->Lookup(kRootIno, std::string(256, 'a')).status().code(), ENAMETOOLONG);
  EXPECT_TRUE(ws_->Mknod(kRootIno, std::string(255, 'a'), S_IFREG | 0644, 0, {}).ok());
  EXPECT_EQ(ws_->Link(d, kRootIno, "dl").status().code(), EPERM);
  Create(kRootIno, "g", "y");
  EXPECT_EQ(ws_->Rename(kRootIno, "g", kRootIno, "d", 0).code(), EISDIR);
  EXPECT_EQ(ws_->Rename(kRootIno, "d", kRootIno, "g", 0).code(), ENOTDIR);
  EXPECT_EQ(ws_->Rename(kRootIno, "g", d, "f", RENAME_NOREPLACE).code(), EEXIST);
  EXPECT_EQ(ws_->Rename(kRootIno, "d", d, "sub", 0).code(), EINVAL);
  EXPECT_TRUE(ws_->Rename(kRootIno, "g", d, "f", RENAME_EXCHANGE).ok());
  EXPECT_EQ(*ws_->Read(ws_->Lookup(d, "f")->ino, 0, 10), "y");
  EXPECT_EQ(*ws_->Read(ws_->Lookup(kRootIno, "g")->ino, 0, 10), "x");
  EXPECT_EQ(ws_->SetXattr(d, "user.k", "v", XATTR_REPLACE).code(), ENODATA);
  EXPECT_TRUE(ws_->SetXattr(d, "user.k", "v", XATTR_CREATE).ok());
  EXPECT_EQ(ws_->SetXattr(d, "user.k", "v", XATTR_CREATE).code(), EEXIST);
  EXPECT_EQ(*ws_->GetXattr(d, "user.k"), "v");
}

TEST_F(WorkspaceTest, SparseTruncateAndSeek) {
  Ino f = Create(kRootIno, "sparse");
  ASSERT_TRUE(ws_->Write(f, 5ull << 30, "tail").ok());
  EXPECT_EQ(ws_->GetAttr(f)->size, (5ull << 30) + 4);
  EXPECT_EQ(*ws_->Read(f, 1000, 4), std::string(4, '\0'));
  EXPECT_EQ(*ws_->Read(f, 5ull << 30, 10), "tail");
  EXPECT_EQ(*ws_->Lseek(f, 0, SEEK_DATA), (5ull << 30) / kBlockSize * kBlockSize);
  EXPECT_EQ(*ws_->Lseek(f, 0, SEEK_HOLE), 0u);
  ASSERT_TRUE(ws_->SetAttr(f, {.size = 10}).ok());
  EXPECT_EQ(*ws_->Read(f, 0, 100), std::string(10, '\0'));
  ASSERT_TRUE(ws_->Write(f, 0, "abcdefghij").ok());
  ASSERT_TRUE(ws_->SetAttr(f, {.size = 3}).ok());
  ASSERT_TRUE(ws_->SetAttr(f, {.size = 6}).ok());
  EXPECT_EQ(*ws_->Read(f, 0, 100), std::string("abc\0\0\0", 6));
}

// A file that is all hole has no blocks (as on ext4: `truncate -s 1G f; du f` is 0); once written
// or committed, its size counts.
TEST_F(WorkspaceTest, AFileThatIsAllHoleHasNoBlocks) {
  // 64 MiB: any size shows it; a larger one only made the commit read more zeros.
  Ino f = Create(kRootIno, "hole");
  ASSERT_TRUE(ws_->SetAttr(f, {.size = 64ull << 20}).ok());
  EXPECT_EQ(ws_->GetAttr(f)->size, 64ull << 20);
  EXPECT_EQ(ws_->GetAttr(f)->blocks(), 0u);
  EXPECT_EQ(ws_->Lseek(f, 0, SEEK_DATA).status().code(), ENXIO);
  ASSERT_TRUE(ws_->Write(f, 100, "x").ok());
  EXPECT_EQ(ws_->GetAttr(f)->blocks(), (64ull << 20) / 512);
  Ino g = Create(kRootIno, "hole2");
  ASSERT_TRUE(ws_->SetAttr(g, {.size = 4096}).ok());
  ASSERT_TRUE(ws_->Commit("holes").ok());
  Reopen();  // committed content now: its size counts
  g = ws_->Lookup(kRootIno, "hole2")->ino;
  EXPECT_EQ(ws_->GetAttr(g)->blocks(), 8u);
  EXPECT_EQ(ws_->GetAttr(ws_->Lookup(kRootIno, "hole")->ino)->blocks(), (64ull << 20) / 512);
}

TEST_F(WorkspaceTest, CopyOnWriteOverCommittedFile) {
  std::string big(3 << 20, 'q');
  for (size_t i = 0; i < big.size(); i++) big[i] = static_cast<char>('a' + (i * 7919) % 26);
  const std::string original = big;
  Create(kRootIno, "big", big);
  auto c1 = ws_->Commit("big");
  ASSERT_TRUE(c1.ok());
  Reopen();  // a fresh process: committed content, nothing in blocks
  Ino f = ws_->Lookup(kRootIno, "big")->ino;
  EXPECT_EQ(*ws_->Read(f, 100000, 50), big.substr(100000, 50));
  ASSERT_TRUE(ws_->Write(f, 200000, "ZZZZ").ok());
  big.replace(200000, 4, "ZZZZ");
  EXPECT_EQ(*ws_->Read(f, 199990, 20), big.substr(199990, 20));
  auto c2 = ws_->Commit("edit");
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(Cat(*c2, "big"), big);
  EXPECT_EQ(Cat(*c1, "big"), original);
  // A fork at the first commit sees the old bytes; its workspace is independent.
  ASSERT_TRUE(store_->Fork("old", c1->Hex()).ok());
  auto ws2 = Workspace::Open(*store_, {.read_only = false, .branch = "old", .commit = {}});
  ASSERT_TRUE(ws2.ok());
  Ino f2 = (*ws2)->Lookup(kRootIno, "big")->ino;
  EXPECT_EQ((*ws2)->Read(f2, 200000, 4).value(), original.substr(200000, 4));
  ASSERT_TRUE((*ws2)->Write(f2, 0, "fork").ok());
  EXPECT_EQ(*ws_->Read(f, 0, 4), big.substr(0, 4));
}

TEST_F(WorkspaceTest, UncommittedStateSurvivesReopenAndCommitSeesIt) {
  Create(kRootIno, "kept", "data");
  Reopen();
  auto changes = ws_->Changes();
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_EQ((*changes)[0].path, "kept");
  EXPECT_EQ((*changes)[0].change, 'A');
  auto c = ws_->Commit("later");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Cat(*c, "kept"), "data");
  EXPECT_TRUE(ws_->Changes()->empty());
}

// status encodes and stores nothing: it hashes the changed content only, and still names every
// change the next commit makes.
TEST_F(WorkspaceTest, ChangesStoresNothing) {
  Ino f = Create(kRootIno, "f", std::string(300000, 'x'));
  Create(kRootIno, "g", "small");
  ASSERT_TRUE(ws_->Commit("base").ok());
  auto objects = [&] {
    auto st = store_->Stats();
    EXPECT_TRUE(st.ok());
    uint64_t n = 0;
    for (auto& [k, v] : st->objects) n += v;
    return n;
  };
  uint64_t before = objects();
  ASSERT_TRUE(ws_->Write(f, 1000, "changed").ok());
  Create(kRootIno, "big", std::string(5 << 20, 'b'));  // chunked
  ASSERT_TRUE(ws_->Unlink(kRootIno, "g").ok());
  auto ch = ws_->Changes();
  ASSERT_TRUE(ch.ok()) << ch.status().message();
  std::map<std::string, char> got;
  for (const auto& d : *ch) got[d.path] = d.change;
  EXPECT_EQ(got, (std::map<std::string, char>{{"big", 'A'}, {"f", 'M'}, {"g", 'D'}}));
  EXPECT_EQ(objects(), before);
  // The same content written back: no change at all.
  ASSERT_TRUE(ws_->Write(f, 1000, "xxxxxxx").ok());
  ch = ws_->Changes();
  ASSERT_TRUE(ch.ok());
  for (const auto& d : *ch) EXPECT_NE(d.path, "f");
}

// copy_file_range: a committed file copied whole into an empty one is cloned (the copy takes
// the content id: its commit stores nothing new, whole files and chunked ones alike); writes to
// either copy afterwards leave the other as it was.
TEST_F(WorkspaceTest, CopyRangeClonesACommittedFileWhole) {
  std::string small(300000, '\0'), big(5 << 20, '\0');
  for (size_t i = 0; i < small.size(); i++) small[i] = static_cast<char>('a' + (i * 31) % 26);
  for (size_t i = 0; i < big.size(); i++) big[i] = static_cast<char>((i * 7919 + i / 4099) % 251);
  Create(kRootIno, "small", small);
  Create(kRootIno, "big", big);  // chunked
  auto c1 = ws_->Commit("base");
  ASSERT_TRUE(c1.ok()) << c1.status().message();
  Reopen();  // committed content only, nothing in blocks
  Ino s = ws_->Lookup(kRootIno, "small")->ino, b = ws_->Lookup(kRootIno, "big")->ino;
  Ino s2 = Create(kRootIno, "small2"), b2 = Create(kRootIno, "big2");
  auto n = ws_->CopyRange(s, 0, s2, 0, uint64_t{1} << 40);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, small.size());
  n = ws_->CopyRange(b, 0, b2, 0, big.size());
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, big.size());
  EXPECT_EQ(ws_->GetAttr(b2)->size, big.size());
  EXPECT_EQ(*ws_->Read(s2, 0, small.size() + 10), small);
  EXPECT_EQ(*ws_->Read(b2, (3 << 20) - 7, 100), big.substr((3 << 20) - 7, 100));
  auto c2 = ws_->Commit("copies");
  ASSERT_TRUE(c2.ok()) << c2.status().message();
  EXPECT_EQ(IdOf(*c2, "small2"), IdOf(*c1, "small"));
  EXPECT_EQ(IdOf(*c2, "big2"), IdOf(*c1, "big"));
  EXPECT_EQ(Cat(*c2, "big2"), big);
  // Independent afterwards, both ways.
  ASSERT_TRUE(ws_->Write(s2, 10, "COPY").ok());
  ASSERT_TRUE(ws_->Write(b, 1 << 20, "ORIG").ok());
  EXPECT_EQ(*ws_->Read(s, 8, 8), small.substr(8, 8));
  EXPECT_EQ(*ws_->Read(s2, 8, 8), small.substr(8, 2) + "COPY" + small.substr(14, 2));
  EXPECT_EQ(*ws_->Read(b2, 1 << 20, 4), big.substr(1 << 20, 4));
  auto c3 = ws_->Commit("edits");
  ASSERT_TRUE(c3.ok());
  EXPECT_EQ(Cat(*c3, "small"), small);
  EXPECT_EQ(Cat(*c3, "big2"), big);
  // Into a file that is not empty: no clone, the bytes are written over it.
  Ino t = Create(kRootIno, "t", "xyz");
  n = ws_->CopyRange(s, 0, t, 0, small.size());
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, small.size());
  EXPECT_EQ(*ws_->Read(t, 0, small.size() + 1), small);
  // A file truncated shorter than its committed content: the copy has its size and its bytes
  // (the valid length goes with the content id).
  workspace::AttrChange ch;
  ch.size = 1000;
  ASSERT_TRUE(ws_->SetAttr(s, ch).ok());
  Ino u = Create(kRootIno, "u");
  n = ws_->CopyRange(s, 0, u, 0, uint64_t{1} << 30);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1000u);
  EXPECT_EQ(*ws_->Read(u, 0, 5000), small.substr(0, 1000));
}

// copy_file_range at any offsets, into holes, past the source's end, within one file, and over
// more than one piece: the result is what reading and writing the bytes would give.
TEST_F(WorkspaceTest, CopyRangeCopiesBytesAtAnyOffsets) {
  std::string src(200000, '\0');
  for (size_t i = 0; i < src.size(); i++) src[i] = static_cast<char>('A' + (i * 13) % 57);
  Ino a = Create(kRootIno, "a", src);  // written, not committed: blocks
  Ino d = Create(kRootIno, "d");
  auto n = ws_->CopyRange(a, 1000, d, 70000, 100000);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, 100000u);
  EXPECT_EQ(*ws_->Read(d, 0, 1 << 20), std::string(70000, '\0') + src.substr(1000, 100000));
  n = ws_->CopyRange(a, 150000, d, 5, 1 << 20);  // short: the source ends
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 50000u);
  std::string want = std::string(70000, '\0') + src.substr(1000, 100000);
  want.replace(5, 50000, src.substr(150000));
  EXPECT_EQ(*ws_->Read(d, 0, 1 << 20), want);
  n = ws_->CopyRange(a, 200000, d, 0, 10);  // at the end: nothing
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  n = ws_->CopyRange(a, 0, d, 0, 0);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  EXPECT_EQ(ws_->GetAttr(d)->size, want.size());
  // Within one file, past its end: the gap reads as zeros.
  n = ws_->CopyRange(a, 0, a, 250000, 1000);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1000u);
  EXPECT_EQ(*ws_->Read(a, 0, 1 << 20), src + std::string(50000, '\0') + src.substr(0, 1000));
  // More than one piece, at offsets aligned to nothing, from committed content under a patch.
  std::string big(Workspace::kCopyPiece * 2 + 12345, '\0');
  for (size_t i = 0; i < big.size(); i++) big[i] = static_cast<char>((i * 2654435761u) >> 24);
  Ino b = Create(kRootIno, "b", big);
  ASSERT_TRUE(ws_->Commit("b").ok());
  ASSERT_TRUE(ws_->Write(b, 3 << 20, "patch").ok());
  big.replace(3 << 20, 5, "patch");
  Ino e = Create(kRootIno, "e", "head");
  n = ws_->CopyRange(b, 77, e, 3, big.size());
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, big.size() - 77);
  EXPECT_EQ(*ws_->Read(e, 0, big.size() + 10), "hea" + big.substr(77));
  auto c = ws_->Commit("copied");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(Cat(*c, "e"), "hea" + big.substr(77));
  EXPECT_EQ(Cat(*c, "d"), want);
}

// Blocks filed by older builds (prefix|I|ino|block) are moved to their current keys when the
// Workspace opens, and read back the same.
TEST_F(WorkspaceTest, LegacyBlockKeysAreMigratedOnOpen) {
  std::string data(3 * kBlockSize + 100, '\0');
  for (size_t i = 0; i < data.size(); i++) data[i] = static_cast<char>('a' + i % 23);
  // Partial-block writes: B records, as older builds stored every block (whole blocks now go to
  // the data log).
  Ino f = Create(kRootIno, "f");
  for (size_t o = 0; o < data.size(); o += 4000)
    ASSERT_TRUE(ws_->Write(f, o, std::string_view(data).substr(o, 4000)).ok());
  // Rewrite every block key the old way.
  std::vector<std::pair<std::string, std::string>> blocks;
  ASSERT_TRUE(kv_->Scan(kv::Cf::kWorkspace, std::string(), std::string(64, '\xff'), [&](auto k, auto v) {
    if (k.size() == Keys::kLegacyBlockKeySize && k[8] == kTagBlock) blocks.emplace_back(std::string(k), std::string(v));
    return true;
  }).ok());
  ASSERT_EQ(blocks.size(), 4u);
  kv::Batch b;
  for (const auto& [k, v] : blocks) {
    std::string legacy = k;
    legacy[8] = kTagInode;
    b.Put(kv::Cf::kWorkspace, legacy, v);
    b.Delete(kv::Cf::kWorkspace, k);
  }
  ASSERT_TRUE(kv_->Write(b, false).ok());
  Reopen();
  auto back = ws_->Read(f, 0, data.size() + 10);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, data);
  size_t legacy_left = 0, current = 0;
  ASSERT_TRUE(kv_->Scan(kv::Cf::kWorkspace, std::string(), std::string(64, '\xff'), [&](auto k, auto) {
    if (k.size() == Keys::kLegacyBlockKeySize) (k[8] == kTagInode ? legacy_left : current)++;
    return true;
  }).ok());
  EXPECT_EQ(legacy_left, 0u);
  EXPECT_EQ(current, 4u);
  auto c = ws_->Commit("after migration");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Cat(*c, "f"), data);
}

// Damaged records that put a directory inside itself: commit and status refuse with one error
// naming the loop instead of following it to the depth limit (fuzz.workspace: 2,048 nested
// frames overflowed the stack of an ASan build).
TEST_F(WorkspaceTest, ADirectoryInsideItselfIsDamageNotACrash) {
  auto d = ws_->Mkdir(kRootIno, "d", 0755, {});
  ASSERT_TRUE(d.ok());
  auto e = ws_->Mkdir(d->ino, "e", 0755, {});
  ASSERT_TRUE(e.ok());
  Create(e->ino, "f", "x");
  Keys keys = WorkspaceKeys();
  std::string v;
  base::PutVarint(&v, d->ino);
  v.push_back(static_cast<char>(EntryType::kDir));
  kv::Batch b;
  b.Put(kv::Cf::kWorkspace, keys.Entry(e->ino, "loop"), v);
  ASSERT_TRUE(kv_->Write(b, false).ok());
  ASSERT_TRUE(ws_->Lookup(e->ino, "loop").ok());  // the damage is really there
  auto c = ws_->Commit("loop");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), EIO);
  EXPECT_NE(c.status().message().find("inside itself"), std::string::npos) << c.status().message();
  auto ch = ws_->Changes();
  ASSERT_FALSE(ch.ok());
  EXPECT_NE(ch.status().message().find("inside itself"), std::string::npos) << ch.status().message();
}

// A block key inside a file's range whose block number lies outside it (damaged records; the
// workspace fuzzer made one) is damage to report, not an index past the read's blocks.
TEST_F(WorkspaceTest, ABlockKeyNamingABlockOutsideItsRangeIsDamageNotACrash) {
  auto f = Create(kRootIno, "f", "x");
  Keys keys = WorkspaceKeys();
  std::string key = keys.Block(f, 0);
  base::PutBigEndian64(&key, 12345);  // sorts between blocks 0 and 1, names block 12345
  kv::Batch b;
  b.Put(kv::Cf::kWorkspace, key, "zz");
  ASSERT_TRUE(kv_->Write(b, false).ok());
  auto r = ws_->Read(f, 0, 100);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EIO) << r.status().message();
  auto ch = ws_->Changes();
  ASSERT_FALSE(ch.ok());
  EXPECT_EQ(ch.status().code(), EIO) << ch.status().message();
}

TEST_F(WorkspaceTest, ResetDiscardsChanges) {
  Create(kRootIno, "a", "1");
  auto c1 = ws_->Commit("a");
  Create(kRootIno, "b", "2");
  ASSERT_TRUE(ws_->Reset(std::nullopt).ok());
  EXPECT_EQ(ws_->Lookup(kRootIno, "b").status().code(), ENOENT);
  EXPECT_TRUE(ws_->Lookup(kRootIno, "a").ok());
  ASSERT_TRUE(ws_->Reset(store_->Resolve("main~1").value()).ok());
  EXPECT_EQ(ws_->Lookup(kRootIno, "a").status().code(), ENOENT);
}

// A commit with enough changed content is encoded by several workers: every file, duplicates
// across workers, a chunked one and a delta over its committed version read back exactly.
TEST_F(WorkspaceTest, ParallelEncodingStoresEveryFile) {
  std::mt19937 rng(7);
  auto text = [&](size_t n) {
    std::string s(n, '\0');
    for (auto& ch : s) ch = static_cast<char>('a' + rng() % 16);
    return s;
  };
  std::map<std::string, std::string> want;
  for (int i = 0; i < 12; i++) want["f" + std::to_string(i)] = text(40000 + i * 9000);
  want["same1"] = want["same2"] = text(200000);
  want["big"] = text(3 << 20);  // chunked
  for (const auto& [name, data] : want) Create(kRootIno, name, data);
  auto c1 = ws_->Commit("one");
  ASSERT_TRUE(c1.ok()) << c1.status().message();
  for (const auto& [name, data] : want) EXPECT_EQ(Cat(*c1, name), data) << name;
  EXPECT_EQ(store_->Lookup(*c1, "same1")->id, store_->Lookup(*c1, "same2")->id);
  EXPECT_TRUE(store_->Lookup(*c1, "big")->chunked);
  // Second round: every file edited in place, so each is a delta over its committed version.
  for (auto& [name, data] : want) {
    auto a = ws_->Lookup(kRootIno, name);
    ASSERT_TRUE(a.ok());
    std::string patch = text(100);
    uint64_t off = data.size() / 2;
    ASSERT_TRUE(ws_->Write(a->ino, off, patch).ok());
    data.replace(off, patch.size(), patch);
  }
  auto c2 = ws_->Commit("two");
  ASSERT_TRUE(c2.ok()) << c2.status().message();
  for (const auto& [name, data] : want) EXPECT_EQ(Cat(*c2, name), data) << name;
  auto rep = store_->Verify({});
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->problems.empty()) << rep->problems[0];
}

// Every path's inode number, walking depth-first (or, with `reverse`, each directory's entries
// last to first, so directories are materialised in another order).
static std::map<std::string, Ino> Numbers(Workspace& ws, bool reverse, Ino dir = kRootIno,
                                          const std::string& path = "") {
  std::map<std::string, Ino> out;
  auto entries = ws.ReadDir(dir);
  EXPECT_TRUE(entries.ok()) << entries.status().message();
  if (!entries.ok()) return out;
  if (reverse) std::reverse(entries->begin(), entries->end());
  for (const auto& e : *entries) {
    auto a = ws.Lookup(dir, e.name);
    EXPECT_TRUE(a.ok()) << path << "/" << e.name;
    if (!a.ok()) continue;
    out[path + "/" + e.name] = a->ino;
    if (S_ISDIR(a->mode)) out.merge(Numbers(ws, reverse, a->ino, path + "/" + e.name));
  }
  return out;
}

// Inode numbers of a Commit's entries are its depth-first order, whatever order they are first
// seen in: a fork, a read-only view and a remount agree, and a fork that was only read can be
// dropped at unmount (WorkspaceRegistry::Release) and come back with the same numbers.
TEST_F(WorkspaceTest, InodeNumbersFollowTheCommitAndPristineForksAreReleased) {
  Ino a = ws_->Mkdir(kRootIno, "a", 0755, {})->ino;
  Ino ab = ws_->Mkdir(a, "b", 0755, {})->ino;
  Create(ab, "deep", "1");
  Ino f = Create(a, "file", "2");
  ASSERT_TRUE(ws_->Link(f, kRootIno, "link").ok());
  ASSERT_TRUE(ws_->Mkdir(kRootIno, "empty", 0700, {}).ok());
  ASSERT_TRUE(ws_->Symlink(kRootIno, "sym", "a/file", {}).ok());
  Create(kRootIno, "z", "3");
  auto c = ws_->Commit("tree");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(store_->Fork("f1", c->Hex()).ok());

  WorkspaceRegistry reg(*store_);
  auto w1 = reg.Get("f1");
  ASSERT_TRUE(w1.ok());
  auto forward = Numbers(**w1, false);
  ASSERT_EQ(forward.size(), 8u);
  // Depth-first: /a=2, /a/b=3, /a/b/deep=4, /a/file=5, /empty=6, /link=/a/file, /sym=8, /z=9.
  EXPECT_EQ(forward["/a"], 2u);
  EXPECT_EQ(forward["/a/b"], 3u);
  EXPECT_EQ(forward["/a/b/deep"], 4u);
  EXPECT_EQ(forward["/a/file"], forward["/link"]);
  EXPECT_EQ(forward["/empty"], 6u);
  EXPECT_EQ(forward["/z"], 9u);
  EXPECT_TRUE((*w1)->pristine());

  auto view = Workspace::Open(*store_, {.read_only = true, .branch = "", .commit = *c});
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(Numbers(**view, true), forward);

  // Released: the state is gone; reopened and walked in another order, the same numbers.
  w1->reset();
  reg.Release("f1");
  EXPECT_FALSE(kv_->Get(kv::Cf::kMeta, "ws/f1").value().has_value());
  auto w2 = reg.Get("f1");
  ASSERT_TRUE(w2.ok());
  EXPECT_EQ(Numbers(**w2, true), forward);

  // A change makes it keep its state; a new file's number is above the Commit's range.
  auto n = (*w2)->Mknod(kRootIno, "new", S_IFREG | 0644, 0, {});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->ino, 10u);
  EXPECT_FALSE((*w2)->pristine());
  w2->reset();
  reg.Release("f1");
  EXPECT_TRUE(kv_->Get(kv::Cf::kMeta, "ws/f1").value().has_value());
  auto w3 = reg.Get("f1");
  ASSERT_TRUE(w3.ok());
  auto after = Numbers(**w3, false);
  EXPECT_EQ(after["/new"], 10u);
  after.erase("/new");
  EXPECT_EQ(after, forward);
  // Held elsewhere: not released even when pristine.
  auto w4 = reg.Get("main");
  ASSERT_TRUE(w4.ok());
  ASSERT_TRUE(store_->Fork("f2", c->Hex()).ok());
  auto w5 = reg.Get("f2");
  ASSERT_TRUE(w5.ok());
  reg.Release("f2");
  EXPECT_TRUE(kv_->Get(kv::Cf::kMeta, "ws/f2").value().has_value());
}

// A file without a previous version of its own (a new path, or a path whose file was replaced by
// a new inode, as editors and `git checkout` do) is stored as a delta against a look-alike: the
// path's previous version, a file of the same name (earlier in the same Commit too), or a
// sibling with the same extension; unlike content stays whole. Every content reads back exactly,
// whether encoded at the commit or by the background encoder.
TEST_F(WorkspaceTest, FilesWithoutAVersionOfTheirOwnDeltaAgainstLookAlikes) {
  auto text = [](uint32_t seed, size_t words) {
    static const char* kWords[] = {"const", "rule", "node", "report", "context", "return", "function",
                                   "value", "options", "schema", "message", "type", "fixer", "range"};
    std::mt19937 rng(seed);
    std::string s;
    while (s.size() < words * 6) s += std::string(kWords[rng() % 14]) + (rng() % 7 ? " " : ";\n");
    return s;
  };
  auto edit = [](std::string s, uint32_t seed) {
    std::mt19937 rng(seed);
    for (int i = 0; i < 3; i++) s.insert(rng() % s.size(), "/* changed " + std::to_string(rng()) + " */");
    return s;
  };
  for (int mode : {0, 1}) {
    SetUp();
    if (mode == 1) store_->StartBackgroundEncoding();
    const std::string rule_a = text(1, 4000), readme = text(2, 3000), pkg = text(3, 500);
    Ino lib = ws_->Mkdir(kRootIno, "lib", 0755, {})->ino;
    Ino docs = ws_->Mkdir(kRootIno, "docs", 0755, {})->ino;
    Create(lib, "alpha.js", rule_a);
    Create(docs, "README.md", readme);
    auto c1 = ws_->Commit("one");
    ASSERT_TRUE(c1.ok()) << c1.status().message();

    // Replaced by a new inode at the same path; a new sibling; the same name twice in one Commit;
    // and content like nothing stored.
    const std::string readme2 = edit(readme, 4), rule_b = edit(rule_a, 5), pkg2 = edit(pkg, 6);
    std::string noise(20000, '\0');
    std::mt19937 rng(7);
    for (auto& ch : noise) ch = static_cast<char>(rng());
    ASSERT_TRUE(ws_->Unlink(docs, "README.md").ok());
    Create(docs, "README.md", readme2);
    Create(lib, "beta.js", rule_b);
    Ino pkgs = ws_->Mkdir(kRootIno, "pkgs", 0755, {})->ino;
    Ino x = ws_->Mkdir(pkgs, "x", 0755, {})->ino;
    Ino y = ws_->Mkdir(pkgs, "y", 0755, {})->ino;
    Create(x, "package.json", pkg);
    Create(y, "package.json", pkg2);
    Create(lib, "noise.bin", noise);
    auto c2 = ws_->Commit("two");
    ASSERT_TRUE(c2.ok()) << c2.status().message();
    ASSERT_TRUE(store_->DrainEncoding().ok());

    auto expect_delta_on = [&](const std::string& path, const ObjectId& base) {
      auto info = store_->objects().Info(objects::Kind::kBlob, IdOf(*c2, path));
      ASSERT_TRUE(info.ok()) << path;
      EXPECT_EQ(info->encoding, objects::Encoding::kDelta) << path << " mode " << mode;
      EXPECT_EQ(info->base, base) << path << " mode " << mode;
      EXPECT_LT(info->stored_bytes, 1000u) << path;
    };
    expect_delta_on("docs/README.md", IdOf(*c1, "docs/README.md"));
    expect_delta_on("lib/beta.js", IdOf(*c1, "lib/alpha.js"));
    expect_delta_on("pkgs/y/package.json", IdOf(*c2, "pkgs/x/package.json"));
    auto first = store_->objects().Info(objects::Kind::kBlob, IdOf(*c2, "pkgs/x/package.json"));
    ASSERT_TRUE(first.ok());
    EXPECT_NE(first->encoding, objects::Encoding::kDelta);
    auto unlike = store_->objects().Info(objects::Kind::kBlob, IdOf(*c2, "lib/noise.bin"));
    ASSERT_TRUE(unlike.ok());
    EXPECT_NE(unlike->encoding, objects::Encoding::kDelta);

    EXPECT_EQ(Cat(*c2, "docs/README.md"), readme2);
    EXPECT_EQ(Cat(*c2, "lib/alpha.js"), rule_a);
    EXPECT_EQ(Cat(*c2, "lib/beta.js"), rule_b);
    EXPECT_EQ(Cat(*c2, "pkgs/x/package.json"), pkg);
    EXPECT_EQ(Cat(*c2, "pkgs/y/package.json"), pkg2);
    EXPECT_EQ(Cat(*c2, "lib/noise.bin"), noise);
    EXPECT_EQ(Cat(*c1, "docs/README.md"), readme);
    auto v = store_->Verify({});
    ASSERT_TRUE(v.ok()) << v.status().message();
    EXPECT_TRUE(v->ok()) << (v->problems.empty() ? "" : v->problems[0]);
  }
}

// A new directory (no listing of its own before) is stored as a delta against the last listing
// of this Commit with the same names: node_modules nests copies of one package, which differ
// in their files' mtimes. A directory of other names stays whole; everything reads back.
TEST_F(WorkspaceTest, DirectoriesWithoutAVersionOfTheirOwnDeltaAgainstLookAlikes) {
  const std::vector<std::string> files{"implement.js", "index.js", "is-implemented.js", "package.json",
                                       "polyfill.js", "shim.js", "README.md", "LICENSE"};
  for (int mode : {0, 1}) {
    SetUp();
    if (mode == 1) store_->StartBackgroundEncoding();
    Ino nm = ws_->Mkdir(kRootIno, "node_modules", 0755, {})->ino;
    std::vector<std::string> paths;
    for (int copy = 0; copy < 4; copy++) {
      const std::string parent = "user" + std::to_string(copy);
      Ino p = ws_->Mkdir(nm, parent, 0755, {})->ino;
      Ino d = ws_->Mkdir(p, "es6-symbol", 0755, {})->ino;
      for (const auto& f : files) Create(d, f, f == "package.json" ? "{\"copy\": " + std::to_string(copy) + "}" : "// " + f + "\n");
      paths.push_back("node_modules/" + parent + "/es6-symbol");
    }
    Ino other = ws_->Mkdir(kRootIno, "other", 0755, {})->ino;
    for (const auto& f : files) Create(other, "x-" + f, "x");
    auto c = ws_->Commit("packages");
    ASSERT_TRUE(c.ok()) << c.status().message();
    ASSERT_TRUE(store_->DrainEncoding().ok());

    auto tree_of = [&](const std::string& path) {
      auto e = store_->Lookup(*c, path);
      EXPECT_TRUE(e.ok()) << path;
      EXPECT_EQ(e.ok() ? e->type : EntryType::kFile, EntryType::kDir) << path;
      return e.ok() ? e->id : ObjectId{};
    };
    auto first = store_->objects().Info(objects::Kind::kTree, tree_of(paths[0]));
    ASSERT_TRUE(first.ok());
    EXPECT_NE(first->encoding, objects::Encoding::kDelta) << "mode " << mode;
    for (size_t i = 1; i < paths.size(); i++) {
      auto info = store_->objects().Info(objects::Kind::kTree, tree_of(paths[i]));
      ASSERT_TRUE(info.ok()) << paths[i];
      EXPECT_EQ(info->encoding, objects::Encoding::kDelta) << paths[i] << " mode " << mode;
      EXPECT_EQ(info->base, tree_of(paths[i - 1])) << paths[i] << " mode " << mode;
      auto whole = store_->objects().Get(objects::Kind::kTree, tree_of(paths[i]));
      ASSERT_TRUE(whole.ok());
      EXPECT_LT(info->stored_bytes * 2, whole->size()) << paths[i] << " mode " << mode;
    }
    auto unlike = store_->objects().Info(objects::Kind::kTree, tree_of("other"));
    ASSERT_TRUE(unlike.ok());
    EXPECT_NE(unlike->encoding, objects::Encoding::kDelta);

    for (size_t i = 0; i < paths.size(); i++) {
      EXPECT_EQ(Cat(*c, paths[i] + "/package.json"), "{\"copy\": " + std::to_string(i) + "}");
      EXPECT_EQ(Cat(*c, paths[i] + "/shim.js"), "// shim.js\n");
    }
    auto v = store_->Verify({});
    ASSERT_TRUE(v.ok()) << v.status().message();
    EXPECT_TRUE(v->ok()) << (v->problems.empty() ? "" : v->problems[0]);
  }
}

// A directory removed and made again (`rm -rf node_modules && npm ci`) has no listing of its
// own, but its path had one: that is its delta base, and its subdirectories' paths' listings
// theirs, however deep.
TEST_F(WorkspaceTest, DirectoriesMadeAgainDeltaAgainstTheirPathsPreviousListing) {
  const std::vector<std::string> files{"index.js", "package.json", "README.md", "LICENSE"};
  for (int mode : {0, 1}) {
    SetUp();
    if (mode == 1) store_->StartBackgroundEncoding();
    auto make = [&](const std::string& version) {
      Ino nm = ws_->Mkdir(kRootIno, "node_modules", 0755, {})->ino;
      for (const std::string pkg : {"alpha", "beta"}) {
        Ino p = ws_->Mkdir(nm, pkg, 0755, {})->ino;
        for (const auto& f : files) Create(p, f, pkg + "/" + f + (f == "package.json" ? version : ""));
        Ino lib = ws_->Mkdir(p, "lib", 0755, {})->ino;
        for (const auto& f : files) Create(lib, "lib-" + f, pkg + "/lib/" + f);
      }
    };
    auto remove = [&] {
      Ino nm = ws_->Lookup(kRootIno, "node_modules")->ino;
      for (const std::string pkg : {"alpha", "beta"}) {
        Ino p = ws_->Lookup(nm, pkg)->ino;
        Ino lib = ws_->Lookup(p, "lib")->ino;
        for (const auto& f : files) ASSERT_TRUE(ws_->Unlink(lib, "lib-" + f).ok());
        ASSERT_TRUE(ws_->Rmdir(p, "lib").ok());
        for (const auto& f : files) ASSERT_TRUE(ws_->Unlink(p, f).ok());
        ASSERT_TRUE(ws_->Rmdir(nm, pkg).ok());
      }
      ASSERT_TRUE(ws_->Rmdir(kRootIno, "node_modules").ok());
    };
    make("1");
    auto c1 = ws_->Commit("install");
    ASSERT_TRUE(c1.ok()) << c1.status().message();
    remove();
    make("2");
    auto c2 = ws_->Commit("reinstall");
    ASSERT_TRUE(c2.ok()) << c2.status().message();
    ASSERT_TRUE(store_->DrainEncoding().ok());

    // (node_modules itself: every entry changed, so whether its delta pays is the chooser's call.)
    for (const std::string path : {"node_modules/alpha", "node_modules/beta", "node_modules/alpha/lib",
                                   "node_modules/beta/lib"}) {
      ASSERT_NE(IdOf(*c1, path), IdOf(*c2, path)) << path;  // new mtimes
      auto info = store_->objects().Info(objects::Kind::kTree, IdOf(*c2, path));
      ASSERT_TRUE(info.ok()) << path;
      EXPECT_EQ(info->encoding, objects::Encoding::kDelta) << path << " mode " << mode;
      EXPECT_EQ(info->base, IdOf(*c1, path)) << path << " mode " << mode;
    }
    EXPECT_EQ(Cat(*c2, "node_modules/alpha/package.json"), "alpha/package.json2");
    EXPECT_EQ(Cat(*c1, "node_modules/alpha/package.json"), "alpha/package.json1");
    EXPECT_EQ(Cat(*c2, "node_modules/beta/lib/lib-index.js"), "beta/lib/index.js");
    auto v = store_->Verify({});
    ASSERT_TRUE(v.ok()) << v.status().message();
    EXPECT_TRUE(v->ok()) << (v->problems.empty() ? "" : v->problems[0]);
  }
}

// A random sequence of operations on the Workspace and on a std::map model of the tree (paths
// to contents, "" for directories); every few operations a Commit, and every Commit is read
// back in full against the model's snapshot at that point.
// Modes of encoding: 0 in each commit; 1 deferred and left pending (no encoder) until the end,
// so every read below reads pending records; 2 deferred with the background encoder running,
// finalizing while commits go on and their content is read back. Every Commit is read back at
// the end, so the time grows with the square of the steps: a third of them under a sanitizer.
TEST_F(WorkspaceTest, RandomOperationsAgainstModel) {
  const int steps = layerfs::testing::kSanitized ? 500 : 1500;
  for (auto [seed, mode] : std::vector<std::pair<uint32_t, int>>{{1, 0}, {2, 0}, {3, 1}, {4, 2}}) {
    // Under TSan only the mode with a second thread (the background encoder) has a race to find.
    if (layerfs::testing::kThreadSanitized && mode != 2) continue;
    SetUp();
    if (mode == 1) store_->objects().SetDeferring(true);
    if (mode == 2) store_->StartBackgroundEncoding();
    std::mt19937 rng(seed);
    std::map<std::string, std::optional<std::string>> model;  // nullopt = directory
    std::vector<std::pair<ObjectId, decltype(model)>> commits;
    auto pick = [&](bool dirs) -> std::string {
      std::vector<std::string> c;
      for (auto& [p, v] : model)
        if (!v.has_value() == dirs) c.push_back(p);
      if (c.empty()) return "";
      return c[rng() % c.size()];
    };
    auto resolve = [&](const std::string& path) -> Ino {
      Ino cur = kRootIno;
      size_t pos = 0;
      while (pos < path.size()) {
        size_t e = path.find('/', pos);
        if (e == std::string::npos) e = path.size();
        auto a = ws_->Lookup(cur, path.substr(pos, e - pos));
        if (!a.ok()) return 0;
        cur = a->ino;
        pos = e + 1;
      }
      return cur;
    };
    auto parent_of = [](const std::string& p) { auto s = p.rfind('/'); return s == std::string::npos ? std::string() : p.substr(0, s); };
    auto base_of = [](const std::string& p) { auto s = p.rfind('/'); return s == std::string::npos ? p : p.substr(s + 1); };
    for (int op = 0; op < steps; op++) {
      int kind = rng() % 11;
      std::string dir = rng() % 3 ? pick(true) : "";
      std::string name = "n" + std::to_string(rng() % 12);
      std::string path = dir.empty() ? name : dir + "/" + name;
      Ino d = resolve(dir);
      ASSERT_NE(d, 0u) << dir;
      if (kind <= 2) {  // create + write
        std::string data(rng() % 300000, '\0');
        for (auto& ch : data) ch = static_cast<char>('a' + rng() % 4);
        auto a = ws_->Mknod(d, name, S_IFREG | 0644, 0, {});
        if (model.count(path)) { EXPECT_EQ(a.status().code(), EEXIST); continue; }
        ASSERT_TRUE(a.ok());
        ASSERT_TRUE(ws_->Write(a->ino, 0, data).ok());
        model[path] = data;
      } else if (kind == 3) {
        auto a = ws_->Mkdir(d, name, 0755, {});
        if (model.count(path)) { EXPECT_EQ(a.status().code(), EEXIST); continue; }
        ASSERT_TRUE(a.ok());
        model[path] = std::nullopt;
      } else if (kind == 4 || kind == 5) {  // overwrite part of a file
        std::string f = pick(false);
        if (f.empty()) continue;
        Ino ino = resolve(f);
        uint64_t off = model[f]->empty() ? 0 : rng() % (model[f]->size() + 1000);
        std::string data(1 + rng() % 70000, static_cast<char>('A' + rng() % 26));
        ASSERT_TRUE(ws_->Write(ino, off, data).ok());
        auto& m = *model[f];
        if (m.size() < off + data.size()) m.resize(off + data.size(), '\0');
        m.replace(off, data.size(), data);
      } else if (kind == 6) {  // truncate
        std::string f = pick(false);
        if (f.empty()) continue;
        uint64_t n = rng() % (model[f]->size() + 100);
        ASSERT_TRUE(ws_->SetAttr(resolve(f), {.size = n}).ok());
        model[f]->resize(n, '\0');
      } else if (kind == 7) {  // unlink
        std::string f = pick(false);
        if (f.empty()) continue;
        ASSERT_TRUE(ws_->Unlink(resolve(parent_of(f)), base_of(f)).ok());
        model.erase(f);
      } else if (kind == 8) {  // rename a file
        std::string f = pick(false);
        if (f.empty() || model.count(path) || f == path) continue;
        ASSERT_TRUE(ws_->Rename(resolve(parent_of(f)), base_of(f), d, name, 0).ok()) << f << " -> " << path;
        model[path] = model[f];
        model.erase(f);
      } else if (kind == 10) {  // copy_file_range: into a new file (a clone if committed) or over one
        std::string f = pick(false), g = model.count(path) ? path : "";
        if (f.empty() || (model.count(path) && !model[path].has_value())) continue;
        const std::string src = *model[f];
        uint64_t off_in = g.empty() || src.empty() ? 0 : rng() % (src.size() + 10);
        uint64_t len = rng() % 3 ? uint64_t{1} << 40 : rng() % 200000;
        Ino in = resolve(f), out;
        if (g.empty()) {
          auto a = ws_->Mknod(d, name, S_IFREG | 0644, 0, {});
          ASSERT_TRUE(a.ok());
          out = a->ino;
          model[path] = std::string();
        } else {
          out = resolve(g);
        }
        auto& m = *model[path];
        uint64_t off_out = g.empty() || m.empty() ? 0 : rng() % (m.size() + 10);
        // One file to itself: the ranges may not overlap (the kernel refuses them).
        if (in == out && off_in < off_out + len && off_out < off_in + len) continue;
        auto n = ws_->CopyRange(in, off_in, out, off_out, len);
        ASSERT_TRUE(n.ok()) << n.status().message();
        const uint64_t want = off_in >= src.size() ? 0 : std::min<uint64_t>(len, src.size() - off_in);
        ASSERT_EQ(*n, want) << "seed " << seed << " op " << op;
        if (want > 0) {
          if (m.size() < off_out + want) m.resize(off_out + want, '\0');
          m.replace(off_out, want, src.substr(off_in, want));
        }
      } else {  // commit and read back
        auto c = ws_->Commit("op " + std::to_string(op));
        ASSERT_TRUE(c.ok()) << c.status().message();
        commits.emplace_back(*c, model);
      }
      // Read back what the workspace holds for one random path.
      std::string f = pick(false);
      if (!f.empty()) {
        Ino ino = resolve(f);
        auto got = ws_->Read(ino, 0, model[f]->size() + 10);
        ASSERT_TRUE(got.ok()) << f << ": " << got.status().message();
        ASSERT_EQ(*got, *model[f]) << "seed " << seed << " op " << op << " " << f;
      }
    }
    auto check_commits = [&] {
    for (const auto& [id, m] : commits) {
      for (const auto& [p, v] : m) {
        auto e = store_->Lookup(id, p);
        ASSERT_TRUE(e.ok()) << p << ": " << e.status().message();
        if (v) {
          ASSERT_EQ(e->type, EntryType::kFile);
          auto data = store_->ReadFile(*e);
          ASSERT_TRUE(data.ok()) << p << ": " << data.status().message();
          ASSERT_EQ(*data, *v) << p;
        } else {
          ASSERT_EQ(e->type, EntryType::kDir);
        }
      }
      auto info = store_->GetCommit(id);
      ASSERT_TRUE(info.ok());
      ASSERT_EQ(info->files, m.size());
    }
    auto rep = store_->Verify({});
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    ASSERT_TRUE(rep->ok()) << rep->problems[0];
    };
    check_commits();
    if (mode == 1) {
      EXPECT_GT(store_->PendingEncodings(), 0u);
    }
    // gc drains first, then frees what no branch reaches; everything committed reads the same.
    auto gc = store_->Gc();
    ASSERT_TRUE(gc.ok()) << gc.status().message();
    EXPECT_EQ(store_->PendingEncodings(), 0u);
    check_commits();
    auto st = store_->Stats();
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->pending_objects, 0u);
    EXPECT_LE(st->max_chain_depth["whole"], 16u);
    EXPECT_LE(st->max_chain_depth["metadata"], 8u);
    ws_.reset();
    store_.reset();  // stops the encoder (mode 2)
  }
}


// A Store on RocksDB in a temporary directory (the merge operator and snapshots are real).
class WorkspaceOnRocks : public ::testing::Test {
 protected:
  void SetUp() override {
    auto kv = kv::OpenRocksKv(dir_.path() + "/db", {.create_if_missing = true});
    ASSERT_TRUE(kv.ok());
    kv_ = std::move(*kv);
    auto st = Store::OpenOnKv(kv_.get(), Policy{});
    ASSERT_TRUE(st.ok());
    store_ = std::move(*st);
  }
  layerfs::testing::TempDir dir_;
  std::unique_ptr<kv::Kv> kv_;
  std::unique_ptr<Store> store_;
};

// Small writes are blind patches where an absent block reads as zeros and read-modify-writes
// below the committed content's valid length; on RocksDB (the merge operator) both must read
// back exactly, before and after a commit, across a truncate and a reopen.
TEST_F(WorkspaceOnRocks, SmallWritesOverCommittedAndNewBlocks) {
  auto& store = store_;
  auto open = [&] {
    auto ws = Workspace::Open(*store, {.read_only = false, .branch = "main", .commit = {}});
    EXPECT_TRUE(ws.ok());
    return std::move(*ws);
  };
  std::string model(300000, '\0');
  for (size_t i = 0; i < model.size(); i++) model[i] = static_cast<char>('a' + i % 23);
  {
    auto ws = open();
    auto a = ws->Mknod(kRootIno, "f", S_IFREG | 0644, 0, {});
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(ws->Write(a->ino, 0, model).ok());
    ASSERT_TRUE(ws->Commit("base").ok());
  }
  auto ws = open();  // committed content only
  Ino f = ws->Lookup(kRootIno, "f")->ino;
  uint32_t x = 7;
  auto write = [&](uint64_t off, const std::string& s) {
    ASSERT_TRUE(ws->Write(f, off, s).ok());
    if (model.size() < off + s.size()) model.resize(off + s.size(), '\0');
    model.replace(off, s.size(), s);
  };
  for (int i = 0; i < 400; i++) {
    x = x * 1664525 + 1013904223;
    write((x >> 4) % (model.size() + 70000), "w" + std::to_string(i));  // also past the end
    if (i == 200) {
      ASSERT_TRUE(ws->SetAttr(f, {.size = 150001}).ok());  // truncate mid-block
      model.resize(150001);
    }
  }
  EXPECT_EQ(*ws->Read(f, 0, model.size() + 10), model);
  auto c = ws->Commit("edits");
  ASSERT_TRUE(c.ok());
  auto e = store->Lookup(*c, "f");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*store->ReadFile(*e), model);
  ws.reset();
  ws = open();
  EXPECT_EQ(*ws->Read(f, 0, model.size() + 10), model);
}


// Reads run outside the Workspace lock, from a snapshot taken with the inode: each one must
// see every Write whole (one generation's bytes at the size written with them), while writes,
// truncates and commits go on in another thread, over blocks partly still committed content.
TEST_F(WorkspaceOnRocks, ReadsSeeEachWriteWholeWhileWritesAndCommitsRun) {
  auto& store = store_;
  auto ws = Workspace::Open(*store, {.read_only = false, .branch = "main", .commit = {}});
  ASSERT_TRUE(ws.ok());
  constexpr size_t kLen = 200000;  // spans four blocks, the last one partly
  Ino f = (*ws)->Mknod(kRootIno, "f", S_IFREG | 0644, 0, {})->ino;
  ASSERT_TRUE((*ws)->Write(f, 0, std::string(kLen, 'A')).ok());
  ASSERT_TRUE((*ws)->Commit("base").ok());
  std::atomic<bool> done{false};
  std::atomic<int> torn{0}, reads{0}, errors{0};
  std::thread reader([&] {
    while (!done) {
      auto r = (*ws)->Read(f, 0, kLen + 100);
      if (!r.ok()) {
        errors++;
        continue;
      }
      reads++;
      // Either the truncated (empty) file, or kLen bytes of one generation (never zeros).
      if (r->empty()) continue;
      if (r->size() != kLen || (*r)[0] == '\0' || r->find_first_not_of((*r)[0]) != std::string::npos) torn++;
    }
  });
  for (int g = 0; g < 600; g++) {
    char c = static_cast<char>('B' + g % 24);
    if (g % 10 == 9) {
      ASSERT_TRUE((*ws)->SetAttr(f, {.size = 0}).ok());
    }
    ASSERT_TRUE((*ws)->Write(f, 0, std::string(kLen, c)).ok());
    if (g % 40 == 39) {
      ASSERT_TRUE((*ws)->Commit("g" + std::to_string(g)).ok());
    }
  }
  done = true;
  reader.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(*(*ws)->Read(f, 0, kLen), std::string(kLen, static_cast<char>('B' + 599 % 24)));
}

// Changes of different inodes run under the shared lock with per-inode stripes: threads
// creating, writing, chmod'ing, linking and unlinking files in their own and in one shared
// directory, with commits running beside them, must leave every file as its thread wrote it,
// every inode number used once, and a reopened Workspace numbering new files past all of them.
TEST_F(WorkspaceOnRocks, ChangesOfManyThreadsKeepEveryFileAndNumber) {
  auto ws = Workspace::Open(*store_, {.read_only = false, .branch = "main", .commit = {}});
  ASSERT_TRUE(ws.ok());
  ASSERT_TRUE((*ws)->pristine());
  constexpr int kThreads = 4, kFiles = 150, kSlotsPerFile = 4;
  const Ino shared = (*ws)->Mkdir(kRootIno, "shared", 0755, {})->ino;
  EXPECT_FALSE((*ws)->pristine());
  std::vector<Ino> own(kThreads);
  for (int t = 0; t < kThreads; t++) own[t] = (*ws)->Mkdir(kRootIno, "t" + std::to_string(t), 0755, {})->ino;
  // One file every thread writes into, each its own 8-byte slots, growing it: each write
  // reads, changes and writes the inode record (size, blocks), so an update lost between two
  // threads shows as a short file or a missing slot.
  const Ino common = (*ws)->Mknod(kRootIno, "common", S_IFREG | 0644, 0, {})->ino;
  auto slot = [](int t, int i) { return fmt::format("{:02d}:{:04d}|", t, i); };
  std::vector<std::vector<Ino>> made(kThreads);
  std::atomic<int> failures{0};
  std::atomic<bool> done{false};
  auto content = [](int t, int i) { return fmt::format("thread {} file {}\n", t, i) + std::string(i * 37 % 5000, 'a' + t); };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kFiles; i++) {
        const std::string name = "f" + std::to_string(i);
        auto a = (*ws)->Mknod(own[t], name, S_IFREG | 0644, 0, {});
        if (!a.ok()) { failures++; continue; }
        made[t].push_back(a->ino);
        const std::string data = content(t, i);
        // Two writes, the second one growing the file: the inode record is read-modified-written.
        if (!(*ws)->Write(a->ino, 0, data.substr(0, data.size() / 2)).ok()) failures++;
        if (!(*ws)->Write(a->ino, data.size() / 2, data.substr(data.size() / 2)).ok()) failures++;
        if (!(*ws)->SetAttr(a->ino, {.mode = 0600}).ok()) failures++;
        if (!(*ws)->SetXattr(a->ino, "user.t", std::to_string(t), 0).ok()) failures++;
        const std::string link = fmt::format("l{}-{}", t, i);
        if (!(*ws)->Link(a->ino, shared, link).ok()) failures++;
        if (i % 3 == 0 && !(*ws)->Unlink(shared, link).ok()) failures++;
        for (int k = 0; k < kSlotsPerFile; k++) {
          const int j = i * kSlotsPerFile + k;
          if (!(*ws)->Write(common, (static_cast<uint64_t>(j) * kThreads + t) * 8, slot(t, j)).ok()) failures++;
        }
      }
    });
  }
  std::thread committer([&] {
    for (int c = 0; !done; c++) {
      if (!(*ws)->Commit("c" + std::to_string(c)).ok()) failures++;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  for (auto& th : threads) th.join();
  done = true;
  committer.join();
  ASSERT_EQ(failures.load(), 0);
  std::set<Ino> numbers{kRootIno, shared};
  for (Ino d : own) EXPECT_TRUE(numbers.insert(d).second);
  for (const auto& v : made)
    for (Ino ino : v) EXPECT_TRUE(numbers.insert(ino).second) << "inode " << ino << " used twice";
  auto check = [&](Workspace& w) {
    for (int t = 0; t < kThreads; t++) {
      for (int i = 0; i < kFiles; i++) {
        auto a = w.Lookup(own[t], "f" + std::to_string(i));
        ASSERT_TRUE(a.ok()) << t << "/" << i;
        EXPECT_EQ(a->mode & 07777, 0600u);
        EXPECT_EQ(a->nlink, i % 3 == 0 ? 1u : 2u);
        EXPECT_EQ(*w.Read(a->ino, 0, 10000), content(t, i));
        EXPECT_EQ(*w.GetXattr(a->ino, "user.t"), std::to_string(t));
        auto l = w.Lookup(shared, fmt::format("l{}-{}", t, i));
        EXPECT_EQ(l.ok(), i % 3 != 0);
        if (l.ok()) { EXPECT_EQ(l->ino, a->ino); }
      }
    }
  };
  check(**ws);
  std::string want;
  for (int j = 0; j < kFiles * kSlotsPerFile; j++)
    for (int t = 0; t < kThreads; t++) want += slot(t, j);
  EXPECT_EQ((*ws)->GetAttr(common)->size, want.size());
  EXPECT_TRUE(*(*ws)->Read(common, 0, want.size() + 10) == want) << "a slot of the common file was lost";
  auto last = (*ws)->Commit("last");
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*store_->ReadFile(*store_->Lookup(*last, "t2/f77")), content(2, 77));
  EXPECT_TRUE(*store_->ReadFile(*store_->Lookup(*last, "common")) == want) << "the commit lost a slot";
  // Reopened: numbers of new files are past every number handed out before.
  ws->reset();
  ws = Workspace::Open(*store_, {.read_only = false, .branch = "main", .commit = {}});
  ASSERT_TRUE(ws.ok());
  check(**ws);
  for (int i = 0; i < 20; i++) {
    auto a = (*ws)->Mknod(shared, "new" + std::to_string(i), S_IFREG | 0644, 0, {});
    ASSERT_TRUE(a.ok());
    EXPECT_TRUE(numbers.insert(a->ino).second) << "inode " << a->ino << " reused after a reopen";
  }
}

}  // namespace
}  // namespace layerfs::workspace

namespace layerfs::workspace {
namespace {

// A Store in a directory, so the Workspace's data log is segment files (STORE/data).
class WorkspaceDataLog : public ::testing::Test {
 protected:
  void SetUp() override {
    auto st = Store::Create(dir_ / "store", Policy{});
    ASSERT_TRUE(st.ok()) << st.status().message();
    store_ = std::move(*st);
    Open();
  }
  void Open() {
    auto ws = Workspace::Open(*store_, {.read_only = false, .branch = "main", .commit = {}});
    ASSERT_TRUE(ws.ok()) << ws.status().message();
    ws_ = std::move(*ws);
  }
  void ReopenStore() {
    ws_.reset();
    store_.reset();
    auto st = Store::Open(dir_ / "store");
    ASSERT_TRUE(st.ok()) << st.status().message();
    store_ = std::move(*st);
    Open();
  }
  uint64_t LogBytes() {
    uint64_t n = 0;
    std::error_code ec;
    for (auto& e : std::filesystem::directory_iterator(dir_ / "store/data", ec))
      if (e.path().extension() == ".seg") n += e.file_size();
    return n;
  }
  size_t Records(char tag) {
    size_t n = 0;
    EXPECT_TRUE(store_->kv().Scan(kv::Cf::kWorkspace, std::string(), std::string(64, '\xff'), [&](auto k, auto) {
      if (k.size() == 25 && k[8] == tag) n++;
      return true;
    }).ok());
    return n;
  }
  void Write(Ino f, uint64_t off, const std::string& s) {
    auto w = ws_->Write(f, off, s);
    ASSERT_TRUE(w.ok()) << w.status().message();
    if (model_.size() < off + s.size()) model_.resize(off + s.size(), '\0');
    model_.replace(off, s.size(), s);
  }
  // Commits, and checks `path` of the new Commit holds the model's bytes.
  void CommitAndExpect(const std::string& path, const std::string& message) {
    auto c = ws_->Commit(message);
    ASSERT_TRUE(c.ok()) << c.status().message();
    auto e = store_->Lookup(*c, path);
    ASSERT_TRUE(e.ok()) << e.status().message();
    EXPECT_EQ(*store_->ReadFile(*e), model_);
  }
  void ExpectReads(Ino f) {
    auto back = ws_->Read(f, 0, model_.size() + 100);
    ASSERT_TRUE(back.ok()) << back.status().message();
    ASSERT_EQ(back->size(), model_.size());
    EXPECT_TRUE(*back == model_) << "first difference at "
                                 << std::mismatch(back->begin(), back->end(), model_.begin()).first - back->begin();
    // Unaligned pieces too.
    for (uint64_t off : {uint64_t{1}, uint64_t{65535}, uint64_t{65537}, model_.size() / 3}) {
      if (off >= model_.size()) continue;
      auto part = ws_->Read(f, off, 100000);
      ASSERT_TRUE(part.ok());
      EXPECT_EQ(*part, model_.substr(off, 100000)) << off;
    }
  }
  layerfs::testing::TempDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Workspace> ws_;
  std::string model_;
};

// Whole blocks are written to the data log and only referenced from RocksDB; patches, folds,
// truncation and reopening read back exactly; the commit folds them into history and the
// segments are freed.
// A Commit does not record its root's attributes; a fresh Workspace's root belongs to the Store's
// owner, not to uid 0 (a user's own mount refused them any file at its top).
TEST_F(WorkspaceDataLog, TheRootOfAFreshWorkspaceBelongsToTheStoresOwner) {
  const std::string store_dir = dir_ / "store";
  if (geteuid() == 0) {
    ASSERT_EQ(chown(store_dir.c_str(), 4321, 4322), 0);
  }
  struct stat st {};
  ASSERT_EQ(stat(store_dir.c_str(), &st), 0);
  ASSERT_NE(st.st_uid, 0u);  // chowned above when root, else the user's own
  ASSERT_TRUE(store_->Fork("b", "main").ok());
  auto ws = Workspace::Open(*store_, {.read_only = false, .branch = "b", .commit = {}});
  ASSERT_TRUE(ws.ok()) << ws.status().message();
  auto a = (*ws)->GetAttr(kRootIno);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->uid, st.st_uid);
  EXPECT_EQ(a->gid, st.st_gid);
  EXPECT_EQ(a->mode, S_IFDIR | 0755u);
  // And after a reset, which starts the Workspace afresh.
  AttrChange ch;
  ch.uid = 7;
  ch.gid = 7;
  ASSERT_TRUE((*ws)->SetAttr(kRootIno, ch).ok());
  ASSERT_TRUE((*ws)->Reset(std::nullopt).ok());
  a = (*ws)->GetAttr(kRootIno);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->uid, st.st_uid);
  // A root left to uid 0 by an older build (the same state as a chown to 0) is given back to the
  // owner when the Workspace opens.
  ch.uid = 0;
  ch.gid = 0;
  ASSERT_TRUE((*ws)->SetAttr(kRootIno, ch).ok());
  ws->reset();
  ws = Workspace::Open(*store_, {.read_only = false, .branch = "b", .commit = {}});
  ASSERT_TRUE(ws.ok()) << ws.status().message();
  a = (*ws)->GetAttr(kRootIno);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->uid, st.st_uid);
  EXPECT_EQ(a->gid, st.st_gid);
}

// A reset in place (a mounted branch's) brings every kind of change back to the head, or to
// another Commit with the branch moved, without dropping the Workspace: a file with a second
// name made since loses it (Apply once left the second name of a hard link in place).
TEST_F(WorkspaceDataLog, AResetInPlaceUndoesEveryKindOfChange) {
  const Caller me{0, 0};
  auto f = ws_->Mknod(kRootIno, "f", S_IFREG | 0644, 0, me);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(ws_->Write(f->ino, 0, "head").ok());
  auto d = ws_->Mkdir(kRootIno, "d", 0755, me);
  ASSERT_TRUE(d.ok());
  auto g = ws_->Mknod(d->ino, "g", S_IFREG | 0644, 0, me);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(ws_->Write(g->ino, 0, "g").ok());
  auto first = ws_->Commit("first");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(ws_->Write(f->ino, 0, "second").ok());
  auto second = ws_->Commit("second");
  ASSERT_TRUE(second.ok());
  // Uncommitted: content, a hard link, a new tree, a removed tree, a mode.
  ASSERT_TRUE(ws_->Write(f->ino, 0, "scratch!").ok());
  ASSERT_TRUE(ws_->Link(f->ino, kRootIno, "f2").ok());
  auto n = ws_->Mkdir(kRootIno, "n", 0755, me);
  ASSERT_TRUE(n.ok());
  ASSERT_TRUE(ws_->Mknod(n->ino, "x", S_IFREG | 0600, 0, me).ok());
  ASSERT_TRUE(ws_->Unlink(d->ino, "g").ok());
  ASSERT_TRUE(ws_->Rmdir(kRootIno, "d").ok());
  AttrChange ch;
  ch.mode = 0700;
  ASSERT_TRUE(ws_->SetAttr(f->ino, ch).ok());
  auto before = ws_->Changes();
  ASSERT_TRUE(before.ok());
  EXPECT_GE(before->size(), 5u);

  ASSERT_TRUE(ws_->ResetInPlace(std::nullopt).ok());
  auto after = ws_->Changes();
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->empty()) << after->front().path;
  EXPECT_EQ(ws_->Lookup(kRootIno, "f2").status().code(), ENOENT);
  EXPECT_EQ(ws_->Lookup(kRootIno, "n").status().code(), ENOENT);
  auto f_now = ws_->LookupPath("f");
  ASSERT_TRUE(f_now.ok());
  EXPECT_EQ(f_now->nlink, 1u);
  EXPECT_EQ(f_now->mode & 07777, 0644u);
  EXPECT_EQ(*ws_->Read(f_now->ino, 0, 100), "second");
  auto g_now = ws_->LookupPath("d/g");
  ASSERT_TRUE(g_now.ok());
  EXPECT_EQ(*ws_->Read(g_now->ino, 0, 100), "g");
  EXPECT_EQ(ws_->base_commit(), *second);

  // To another Commit, the branch moving with it.
  ASSERT_TRUE(ws_->Write(f_now->ino, 0, "dirty again").ok());
  ASSERT_TRUE(ws_->ResetInPlace(*first).ok());
  EXPECT_EQ(ws_->base_commit(), *first);
  auto head = store_->BranchHead("main");
  ASSERT_TRUE(head.ok() && head->has_value());
  EXPECT_EQ(**head, *first);
  after = ws_->Changes();
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->empty());
  f_now = ws_->LookupPath("f");
  ASSERT_TRUE(f_now.ok());
  EXPECT_EQ(*ws_->Read(f_now->ino, 0, 100), "head");
  // And it survives a reopen as it is.
  ReopenStore();
  after = ws_->Changes();
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->empty());
  f_now = ws_->LookupPath("f");
  ASSERT_TRUE(f_now.ok());
  EXPECT_EQ(*ws_->Read(f_now->ino, 0, 100), "head");
}

TEST_F(WorkspaceDataLog, WholeBlocksLiveInTheLogUntilTheCommitFoldsThem) {
  Ino f = ws_->Mknod(kRootIno, "f", S_IFREG | 0644, 0, {})->ino;
  Write(f, 0, layerfs::testing::RandomBytes((1 << 20) + 1000, 1));
  EXPECT_EQ(Records(kTagRef), 16u);  // 16 whole blocks by reference
  EXPECT_EQ(Records(kTagBlock), 1u);  // the 1000-byte tail
  EXPECT_GE(LogBytes(), 1u << 20);
  ExpectReads(f);
  Write(f, 70000, "patched in place");  // a patch on a block in the log
  ExpectReads(f);
  for (int i = 0; i < 300; i++) Write(f, 2 * kBlockSize + (i * 211) % 60000, layerfs::testing::RandomBytes(100, i));  // folds
  ExpectReads(f);
  Write(f, 5 * kBlockSize, layerfs::testing::RandomBytes(kBlockSize, 9));  // a whole block over a patched one
  ASSERT_TRUE(ws_->SetAttr(f, {.size = 100000}).ok());  // mid-block, in the log
  model_.resize(100000);
  ExpectReads(f);
  Write(f, 300000, "past a hole");  // the cut block's tail and the hole read as zeros
  ExpectReads(f);
  ReopenStore();
  ExpectReads(f);
  CommitAndExpect("f", "folded");
  EXPECT_EQ(Records(kTagRef), 0u);
  EXPECT_EQ(LogBytes(), 0u);  // every segment freed
  ExpectReads(f);
}

// copy_file_range over blocks in the data log: whole unpatched blocks at aligned offsets are
// shared (the copy's records name the same log bytes, so the log does not grow), a patched
// block and the tail are copied as bytes; a shared block replaces the target's own records;
// either file then changes alone; the shared bytes outlive the source's records, and once a
// commit folded both files every segment is freed.
TEST_F(WorkspaceDataLog, CopyRangeSharesWholeBlocksOfTheLog) {
  Ino f = ws_->Mknod(kRootIno, "f", S_IFREG | 0644, 0, {})->ino;
  Write(f, 0, layerfs::testing::RandomBytes(20 * kBlockSize + 1000, 5));
  Write(f, 3 * kBlockSize + 10, "patched");  // block 3: a patched record, copied as bytes
  const std::string src = model_;
  ASSERT_EQ(Records(kTagRef), 20u);
  Ino g = ws_->Mknod(kRootIno, "g", S_IFREG | 0644, 0, {})->ino;
  const uint64_t log_before = LogBytes();
  auto n = ws_->CopyRange(f, 0, g, 0, uint64_t{1} << 40);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, src.size());
  EXPECT_EQ(LogBytes(), log_before + kBlockSize);  // block 3 alone was written again
  EXPECT_EQ(Records(kTagRef), 40u);
  EXPECT_EQ(*ws_->Read(g, 0, src.size() + 10), src);
  // Into a file with records of its own, at an aligned offset, over them and past its end.
  Ino h = ws_->Mknod(kRootIno, "h", S_IFREG | 0644, 0, {})->ino;
  std::string hm(100000, 'h');  // block 0 in the log, block 1 a B record
  ASSERT_TRUE(ws_->Write(h, 0, hm).ok());
  ASSERT_EQ(Records(kTagBlock), 3u);  // f's and g's tails, h's block 1
  n = ws_->CopyRange(f, 4 * kBlockSize, h, kBlockSize, 5 * kBlockSize);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, 5 * kBlockSize);
  hm.resize(6 * kBlockSize);
  hm.replace(kBlockSize, 5 * kBlockSize, src.substr(4 * kBlockSize, 5 * kBlockSize));
  EXPECT_EQ(*ws_->Read(h, 0, hm.size() + 10), hm);
  EXPECT_EQ(Records(kTagBlock), 2u);  // h's block 1 went with the shared one
  EXPECT_EQ(Records(kTagRef), 46u);
  // Each changes alone.
  std::string gm = src;
  ASSERT_TRUE(ws_->Write(g, 5 * kBlockSize + 7, "only g").ok());
  gm.replace(5 * kBlockSize + 7, 6, "only g");
  EXPECT_EQ(*ws_->Read(f, 5 * kBlockSize, kBlockSize), src.substr(5 * kBlockSize, kBlockSize));
  ASSERT_TRUE(ws_->Write(f, 6 * kBlockSize, std::string(kBlockSize, 'f')).ok());  // f's record replaced
  EXPECT_EQ(*ws_->Read(g, 6 * kBlockSize, kBlockSize), src.substr(6 * kBlockSize, kBlockSize));
  ASSERT_TRUE(ws_->SetAttr(f, {.size = 0}).ok());  // f's records go; g's and h's stay
  EXPECT_EQ(*ws_->Read(g, 0, gm.size() + 10), gm);
  EXPECT_EQ(*ws_->Read(h, 0, hm.size() + 10), hm);
  ReopenStore();
  g = ws_->Lookup(kRootIno, "g")->ino;
  h = ws_->Lookup(kRootIno, "h")->ino;
  EXPECT_EQ(*ws_->Read(g, 0, gm.size() + 10), gm);
  EXPECT_EQ(*ws_->Read(h, 0, hm.size() + 10), hm);
  auto c = ws_->Commit("copies");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(*store_->ReadFile(*store_->Lookup(*c, "g")), gm);
  EXPECT_EQ(*store_->ReadFile(*store_->Lookup(*c, "h")), hm);
  EXPECT_EQ(*store_->ReadFile(*store_->Lookup(*c, "f")), "");
  EXPECT_EQ(Records(kTagRef), 0u);
  EXPECT_EQ(LogBytes(), 0u);  // every segment freed
}

// With a collector (the daemon's), a commit leaves freeing the segments it emptied to the
// collector's thread instead of doing it before it returns; the segments go all the same, and
// what was committed and what is written after reads back.
TEST_F(WorkspaceDataLog, ACollectorFreesWhatACommitEmptiedAfterItReturns) {
  Ino f = ws_->Mknod(kRootIno, "f", S_IFREG | 0644, 0, {})->ino;
  Write(f, 0, layerfs::testing::RandomBytes(20 * kBlockSize, 3));
  ASSERT_GE(LogBytes(), 20u * kBlockSize);
  std::atomic<int> woken{0};
  // First the hand-off alone: a stand-in that only counts wakes, so nothing can free the
  // segments behind the commit's back: they must still be there when it returns.
  store_->data_log().SetCollectorWake([&] { woken++; });
  auto c1 = ws_->Commit("one");
  ASSERT_TRUE(c1.ok()) << c1.status().message();
  EXPECT_GE(woken.load(), 1);
  EXPECT_EQ(Records(kTagRef), 0u);
  EXPECT_GE(LogBytes(), 20u * kBlockSize);  // left for the collector
  EXPECT_TRUE(store_->data_log().collect_wanted());
  store_->data_log().SetCollectorWake(nullptr);
  {
    // A real collector: started with a collection wanted, it runs it at once.
    DataLogCollector collector(*store_);
    // The segments go during the run; the run is counted once it has returned.
    for (int i = 0; i < 500 && (LogBytes() != 0 || collector.runs() == 0); i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(LogBytes(), 0u);
    EXPECT_GE(collector.runs(), 1u);
    // Written and committed again with it running.
    std::string more = layerfs::testing::RandomBytes(8 * kBlockSize, 4);
    Write(f, 0, more);
    ASSERT_GE(LogBytes(), 8u * kBlockSize);
    auto c2 = ws_->Commit("two");
    ASSERT_TRUE(c2.ok()) << c2.status().message();
    for (int i = 0; i < 500 && LogBytes() != 0; i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(LogBytes(), 0u);
    auto e = store_->Lookup(*c2, "f");
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(*store_->ReadFile(*e), model_);
    // Left wanted when the collector stops: its destructor runs the last collection.
    Write(f, 0, layerfs::testing::RandomBytes(4 * kBlockSize, 5));
    store_->data_log().SetCollectorWake([] {});  // swallow this commit's wake
    ASSERT_TRUE(ws_->Commit("three").ok());
    EXPECT_GE(LogBytes(), 4u * kBlockSize);
  }
  EXPECT_EQ(LogBytes(), 0u);
  ExpectReads(f);
  auto e1 = store_->Lookup(*c1, "f");
  ASSERT_TRUE(e1.ok());
  EXPECT_EQ(store_->ReadFile(*e1)->size(), 20u * kBlockSize);
}

// Requests that come faster than DataLogCollector::kMinGap share a run: a program rewriting
// files in the log asks for a collection at every truncation, and each run syncs the WAL and
// scans every record. The segments still go.
TEST_F(WorkspaceDataLog, CollectionsAreSpacedAndStillFreeTheSegments) {
  Ino f = ws_->Mknod(kRootIno, "f", S_IFREG | 0644, 0, {})->ino;
  DataLogCollector collector(*store_);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 60; i++) {
    ASSERT_TRUE(ws_->SetAttr(f, {.size = 0}).ok());  // drops the blocks: a collection is asked for
    model_.clear();
    Write(f, 0, layerfs::testing::RandomBytes(2 * kBlockSize, 50 + i));
  }
  const auto asked = std::chrono::steady_clock::now() - start;
  const uint64_t runs_while_asked = collector.runs();
  // A run every kMinGap at most, one at the start.
  EXPECT_LE(runs_while_asked, static_cast<uint64_t>(asked / DataLogCollector::kMinGap) + 2) << runs_while_asked;
  ExpectReads(f);
  CommitAndExpect("f", "rewritten");
  for (int i = 0; i < 500 && LogBytes() != 0; i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(LogBytes(), 0u);
}

// The spacing saves work, not room: while the filesystem is short of room a wanted collection
// runs at once, however recent the last. With a gap of an hour: short of room, a dropped file's
// segment goes; with room, the next one stays (a run was just made); short again, it goes at the
// next request.
TEST_F(WorkspaceDataLog, CollectionsAreNotSpacedWhenTheDiskIsShortOfRoom) {
  kv::SpaceGuard& space = store_->space();
  // Shared with the hook: the Store asks for free bytes again when the fixture closes it, after
  // this body's locals are gone.
  auto free_bytes = std::make_shared<std::atomic<uint64_t>>(100ull << 20);  // above the floor
  space.SetFreeBytesForTest([free_bytes] { return free_bytes->load(); });
  EXPECT_TRUE(DataLogCollector::ShortOfRoom(space));
  DataLogCollector collector(*store_, std::chrono::hours(1));
  auto write_and_drop = [&](const std::string& name, int seed) {
    Ino f = ws_->Mknod(kRootIno, name, S_IFREG | 0644, 0, {})->ino;
    model_.clear();
    Write(f, 0, layerfs::testing::RandomBytes(2 * kBlockSize, seed));
    EXPECT_GT(LogBytes(), 0u);
    ASSERT_TRUE(ws_->SetAttr(f, {.size = 0}).ok());  // drops the blocks: a collection is asked for
  };
  auto freed_within = [&](std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (LogBytes() != 0 && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return LogBytes() == 0;
  };
  write_and_drop("a", 1);
  EXPECT_TRUE(freed_within(std::chrono::seconds(10)));
  *free_bytes = 1ull << 40;
  EXPECT_FALSE(DataLogCollector::ShortOfRoom(space));
  write_and_drop("b", 2);
  EXPECT_FALSE(freed_within(std::chrono::milliseconds(300)));  // spaced: the last run was just now
  *free_bytes = 100ull << 20;
  write_and_drop("c", 3);
  EXPECT_TRUE(freed_within(std::chrono::seconds(10)));
  // A run is counted once it has ended, a moment after its segments went.
  for (int i = 0; i < 500 && collector.runs() < 2; i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE(collector.runs(), 2u);
}

// SEEK_DATA / SEEK_HOLE see blocks in the log as data.
TEST_F(WorkspaceDataLog, SeekDataAndHoleSeeLogBlocks) {
  Ino f = ws_->Mknod(kRootIno, "sparse", S_IFREG | 0644, 0, {})->ino;
  Write(f, 3 * kBlockSize, layerfs::testing::RandomBytes(2 * kBlockSize, 5));
  ASSERT_TRUE(ws_->SetAttr(f, {.size = 10 * kBlockSize}).ok());
  EXPECT_EQ(*ws_->Lseek(f, 0, SEEK_DATA), 3 * kBlockSize);
  EXPECT_EQ(*ws_->Lseek(f, 3 * kBlockSize + 5, SEEK_HOLE), 5 * kBlockSize);
  EXPECT_EQ(*ws_->Lseek(f, 5 * kBlockSize, SEEK_HOLE), 5 * kBlockSize);
  EXPECT_EQ(ws_->Lseek(f, 6 * kBlockSize, SEEK_DATA).status().code(), ENXIO);
}

// A partial write into a block of committed bytes is a Q record, the patch over those bytes,
// not a copy of the block read out of history: many small writes over a committed (chunked)
// file leave Q records and no B records until one block's patches pass 16 KiB and fold into a
// B record. Reads (whole and unaligned), a truncate through a patched block and growing past it
// again, a whole block written over one, a reopen, a commit and an unlink all keep the bytes
// exact, and the commit and the unlink leave no Q record behind.
TEST_F(WorkspaceDataLog, PartialWritesOverCommittedBytesArePatchesNotCopies) {
  Ino f = ws_->Mknod(kRootIno, "big", S_IFREG | 0644, 0, {})->ino;
  Write(f, 0, layerfs::testing::RandomBytes((3 << 20) + 5000, 11));  // chunked when committed
  auto c1 = ws_->Commit("base");
  ASSERT_TRUE(c1.ok()) << c1.status().message();
  ReopenStore();  // committed content only, nothing of it in the Workspace
  ASSERT_EQ(Records(kTagBlock) + Records(kTagRef) + Records(kTagOverlay), 0u);
  std::mt19937 rng(5);
  std::set<uint64_t> touched;
  for (int i = 0; i < 300; i++) {
    const uint64_t off = rng() % (model_.size() - 8);
    Write(f, off, "w" + std::to_string(i));
    touched.insert(off / kBlockSize);
    touched.insert((off + 4) / kBlockSize);
  }
  Write(f, 2 * kBlockSize - 2, "across");  // one write, two blocks
  touched.insert(1);
  touched.insert(2);
  EXPECT_EQ(Records(kTagBlock), 0u);  // nothing copied out of history
  EXPECT_EQ(Records(kTagOverlay), touched.size());
  ExpectReads(f);
  for (int i = 0; i < 40; i++) Write(f, 7 * kBlockSize + 1000 * i + 3, layerfs::testing::RandomBytes(700, 100 + i));
  EXPECT_EQ(Records(kTagBlock), 1u);  // folded: more than 16 KiB of patches
  ExpectReads(f);
  Write(f, 9 * kBlockSize, layerfs::testing::RandomBytes(kBlockSize, 12));  // a whole block over a patched one
  Write(f, 20 * kBlockSize + 100, "x");
  const uint64_t cut = 20 * kBlockSize + 50;  // inside the patched block 20, before its patch
  ASSERT_TRUE(ws_->SetAttr(f, {.size = cut}).ok());
  model_.resize(cut);
  Write(f, 21 * kBlockSize, "past the cut");  // the cut block's tail reads as zeros
  ExpectReads(f);
  ReopenStore();
  ExpectReads(f);
  CommitAndExpect("big", "edits");
  EXPECT_EQ(Records(kTagOverlay), 0u);
  ExpectReads(f);
  // Patches again, then the file goes: its Q records go with it.
  Write(f, 12345, "again");
  EXPECT_EQ(Records(kTagOverlay), 1u);
  ASSERT_TRUE(ws_->Unlink(kRootIno, "big").ok());
  ws_->Forget(f);
  EXPECT_EQ(Records(kTagOverlay), 0u);
  auto rep = store_->Verify({});
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_TRUE(rep->ok()) << rep->problems[0];
}

// A Q block straddling valid_len (a committed file cut and grown again) holds patched bytes past
// the committed ones: SEEK_DATA and SEEK_HOLE must count them as data, or a sparse-aware copy
// would skip them.
TEST_F(WorkspaceDataLog, SeekSeesPatchesPastTheCommittedBytes) {
  Ino f = ws_->Mknod(kRootIno, "f", S_IFREG | 0644, 0, {})->ino;
  Write(f, 0, layerfs::testing::RandomBytes(100000, 21));
  ASSERT_TRUE(ws_->Commit("base").ok());
  ReopenStore();
  ASSERT_TRUE(ws_->SetAttr(f, {.size = 70000}).ok());   // valid_len 70000, inside block 1
  ASSERT_TRUE(ws_->SetAttr(f, {.size = 300000}).ok());  // grown: zeros past 70000
  model_.resize(70000);
  model_.resize(300000, '\0');
  Write(f, 80000, "abcd");  // block 1, past valid_len: a patch over committed bytes
  EXPECT_EQ(Records(kTagOverlay), 1u);
  ExpectReads(f);
  EXPECT_EQ(*ws_->Lseek(f, 0, SEEK_HOLE), 2 * kBlockSize);
  EXPECT_EQ(*ws_->Lseek(f, 75000, SEEK_DATA), 75000u);
  EXPECT_EQ(ws_->Lseek(f, 2 * kBlockSize, SEEK_DATA).status().code(), ENXIO);
}

// An unlinked file's blocks in the log are freed once the inode is forgotten; another file's
// stay readable.
TEST_F(WorkspaceDataLog, DeletedFilesFreeTheirSegments) {
  Ino a = ws_->Mknod(kRootIno, "a", S_IFREG | 0644, 0, {})->ino;
  ASSERT_TRUE(ws_->Write(a, 0, layerfs::testing::RandomBytes(70 << 20, 3)).ok());  // more than a segment
  uint64_t before = LogBytes();
  EXPECT_GE(before, 70u << 20);
  Ino b = ws_->Mknod(kRootIno, "b", S_IFREG | 0644, 0, {})->ino;
  Write(b, 0, layerfs::testing::RandomBytes(3 * kBlockSize, 4));
  ASSERT_TRUE(ws_->Unlink(kRootIno, "a").ok());
  ws_->Forget(a);
  EXPECT_LE(LogBytes(), 64u << 20);  // the first segment only held a
  ExpectReads(b);
  ASSERT_TRUE(ws_->SetAttr(b, {.size = 0}).ok());
  model_.clear();
  Write(b, 0, "x");  // a later operation collects
  EXPECT_EQ(LogBytes(), 0u);
  ExpectReads(b);
}

}  // namespace
}  // namespace layerfs::workspace
