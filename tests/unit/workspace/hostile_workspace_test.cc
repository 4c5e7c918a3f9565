// A Workspace over crafted Commits and damaged records (docs/reliability.md, "Hostile input"):
// lying subtree counts, link groups that join different kinds of entry, content shorter than
// its entry, a damaged Workspace-id counter. Each is a finding kept as a regression test.
#include <gtest/gtest.h>

#include "base/coding.h"
#include "kv/kv.h"
#include "objects/object_store.h"
#include "objects/tree.h"
#include "workspace/inode.h"
#include "workspace/workspace.h"

namespace layerfs::workspace {
namespace {

using objects::Kind;

class HostileWorkspaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kv_ = kv::NewMemKv();
    auto st = Store::OpenOnKv(kv_.get(), Policy{});
    ASSERT_TRUE(st.ok());
    store_ = std::move(*st);
  }
  ObjectId Put(Kind k, const std::string& content) {
    auto r = store_->objects().Put(k, content, std::nullopt);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r->id;
  }
  TreeEntry File(const std::string& name, const std::string& content, uint64_t size = ~0ull) {
    TreeEntry e;
    e.name = name;
    e.mode = 0644;
    e.id = Put(Kind::kBlob, content);
    e.size = size == ~0ull ? content.size() : size;
    return e;
  }
  TreeEntry Dir(const std::string& name, const std::vector<TreeEntry>& entries, uint64_t count) {
    TreeEntry e;
    e.name = name;
    e.type = EntryType::kDir;
    e.mode = 0755;
    e.id = Put(Kind::kTree, objects::EncodeTree(entries));
    e.subtree_entries = count;
    return e;
  }
  // Moves main to a Commit of `root` claiming `files` entries, and opens its Workspace.
  std::unique_ptr<Workspace> Open(const std::vector<TreeEntry>& root, uint64_t files) {
    auto head = store_->BranchHead("main");
    auto c = store_->CommitTree("main", Put(Kind::kTree, objects::EncodeTree(root)), **head, "crafted", 0, files);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    auto ws = Workspace::Open(*store_, {.read_only = false, .branch = "main", .commit = {}});
    EXPECT_TRUE(ws.ok()) << ws.status().ToString();
    return ws.ok() ? std::move(*ws) : nullptr;
  }
  std::unique_ptr<kv::Kv> kv_;
  std::unique_ptr<Store> store_;
};

TEST_F(HostileWorkspaceTest, HonestCountsNumberAsBefore) {
  auto ws = Open({Dir("d", {File("a", "1"), File("b", "2")}, 2), File("z", "3")}, 4);
  ASSERT_TRUE(ws);
  auto d = ws->Lookup(kRootIno, "d");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->ino, 2u);
  EXPECT_EQ(ws->Lookup(d->ino, "a")->ino, 3u);
  EXPECT_EQ(ws->Lookup(d->ino, "b")->ino, 4u);
  EXPECT_EQ(ws->Lookup(kRootIno, "z")->ino, 5u);
  EXPECT_EQ(*ws->Read(ws->Lookup(kRootIno, "z")->ino, 0, 10), "3");
}

// Review finding: with a directory's count too small, its sibling took the number of one of its
// entries (here "z" and "d/b" would both be inode 4), so a write through one name changed the
// other. Now the directory whose entries do not add up is EIO.
TEST_F(HostileWorkspaceTest, LyingSubtreeCountsAreEio) {
  auto ws = Open({Dir("d", {File("a", "1"), File("b", "2")}, 1), File("z", "3")}, 3);
  ASSERT_TRUE(ws);
  auto d = ws->Lookup(kRootIno, "d");  // the root's entries add up (1 + 1 + 1)
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(ws->ReadDir(d->ino).status().code(), EIO);
  EXPECT_EQ(ws->Lookup(d->ino, "b").status().code(), EIO);
  EXPECT_EQ(*ws->Read(ws->Lookup(kRootIno, "z")->ino, 0, 10), "3");
  // A count that wraps the numbering around to the root.
  auto ws2 = Open({Dir("d", {File("a", "1")}, ~0ull - 1), File("z", "3")}, 1);
  ASSERT_TRUE(ws2);
  EXPECT_EQ(ws2->Lookup(kRootIno, "z").status().code(), EIO);
  EXPECT_EQ(ws2->ReadDir(kRootIno).status().code(), EIO);
  // Right at the root: the Commit's count says 2, its tree holds 3.
  auto ws3 = Open({File("a", "1"), File("b", "2"), File("c", "3")}, 2);
  ASSERT_TRUE(ws3);
  EXPECT_EQ(ws3->ReadDir(kRootIno).status().code(), EIO);
}

// Format 7: a directory entry's summary is believed without reading the subtree (nlink, hard
// links below). A lying one can only make those wrong, never a name or a byte; verify names it.
TEST_F(HostileWorkspaceTest, LyingSummariesAreReportedByVerify) {
  TreeEntry a = File("a", "linked"), b = File("b", "linked");
  a.link_group = b.link_group = 7;
  TreeEntry e = Dir("e", {a, b}, 2);
  e.summary = true;  // honest: no subdirectories, hard links below
  e.links_below = true;
  TreeEntry d = Dir("d", {e}, 3);
  d.summary = true;  // lies: e is a subdirectory, and hard links lie below
  d.subdirs = 0;
  d.links_below = false;
  auto ws = Open({d}, 4);
  ASSERT_TRUE(ws);
  auto ld = ws->Lookup(kRootIno, "d");
  ASSERT_TRUE(ld.ok());
  EXPECT_EQ(ld->nlink, 2u) << "believed";
  auto la = ws->LookupPath("d/e/a");
  ASSERT_TRUE(la.ok()) << la.status().ToString();
  EXPECT_EQ(*ws->Read(la->ino, 0, 10), "linked");
  EXPECT_EQ(la->nlink, 2u) << "both names are in e";
  auto v = store_->Verify({});
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->problems.size(), 1u);
  EXPECT_NE(v->problems[0].find("/d: 1 subdirectories and hard links below, its entry says 0 and no hard links"),
            std::string::npos)
      << v->problems[0];
}

TEST_F(HostileWorkspaceTest, CommitClaimingMoreEntriesThanInodeNumbersIsRefused) {
  auto head = store_->BranchHead("main");
  auto c = store_->CommitTree("main", Put(Kind::kTree, objects::EncodeTree({})), **head, "crafted", 0, ~0ull - 1);
  ASSERT_TRUE(c.ok());
  auto ws = Workspace::Open(*store_, {.read_only = false, .branch = "main", .commit = {}});
  EXPECT_EQ(ws.status().code(), EIO);
}

// Review finding: two names of one link group in the same directory became two inodes (the
// group's record was looked up before the directory's batch, which holds it, was written).
TEST_F(HostileWorkspaceTest, HardLinksInOneDirectoryAreOneInode) {
  TreeEntry a = File("a", "linked"), b = File("b", "linked"), c = File("c", "other");
  a.link_group = b.link_group = 4;
  auto ws = Open({a, b, c}, 3);
  ASSERT_TRUE(ws);
  auto la = ws->Lookup(kRootIno, "a"), lb = ws->Lookup(kRootIno, "b");
  ASSERT_TRUE(la.ok() && lb.ok());
  EXPECT_EQ(la->ino, lb->ino);
  EXPECT_EQ(la->nlink, 2u);
  ASSERT_TRUE(ws->Write(la->ino, 0, "LINKED").ok());
  EXPECT_EQ(*ws->Read(ws->Lookup(kRootIno, "b")->ino, 0, 10), "LINKED");
  EXPECT_NE(ws->Lookup(kRootIno, "c")->ino, la->ino);
}

// Review finding: a link group joining a file and a symlink made one inode of both.
TEST_F(HostileWorkspaceTest, LinkGroupsJoiningDifferentKindsAreEio) {
  TreeEntry f = File("f", "data"), s;
  s.name = "s";
  s.type = EntryType::kSymlink;
  s.mode = 0777;
  s.target = "/etc/passwd";
  f.link_group = s.link_group = 9;
  auto ws = Open({f, s}, 2);
  ASSERT_TRUE(ws);
  EXPECT_EQ(ws->ReadDir(kRootIno).status().code(), EIO);
}

// Review finding: a file whose committed content is shorter than its entry read zeros past the
// content's end (a 2^62-byte "file" of a few bytes read forever). Now the read past it is EIO.
TEST_F(HostileWorkspaceTest, ContentShorterThanItsEntryIsEio) {
  auto ws = Open({File("f", "short", 1ull << 62)}, 1);
  ASSERT_TRUE(ws);
  auto f = ws->Lookup(kRootIno, "f");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->size, 1ull << 62);
  EXPECT_EQ(ws->Read(f->ino, 0, 65536).status().code(), EIO);
  EXPECT_EQ(ws->Read(f->ino, 1ull << 40, 10).status().code(), EIO);
}

// Review finding: collecting the data log scanned once per Workspace id ever handed out, up to
// ws-next; a damaged ws-next of 2^63 made every commit spin for ever.
TEST_F(HostileWorkspaceTest, DamagedWorkspaceCounterDoesNotStallCollection) {
  auto ws = Open({File("f", "x")}, 1);
  ASSERT_TRUE(ws);
  std::string next;
  base::PutBigEndian64(&next, 1ull << 63);
  kv::Batch b;
  b.Put(kv::Cf::kMeta, "ws-next", next);
  ASSERT_TRUE(kv_->Write(b, false).ok());
  auto f = ws->Lookup(kRootIno, "f");
  ASSERT_TRUE(ws->Write(f->ino, 0, std::string(3 * kBlockSize, 'w')).ok());  // whole blocks: data log
  // 2^63 scans would never end (ctest's timeout would fail the test).
  ASSERT_TRUE(CollectDataLog(*store_, true).ok());
  ASSERT_TRUE(ws->Commit("after").ok());
  EXPECT_EQ(ws->Read(f->ino, kBlockSize, 3)->substr(0, 3), "www");
}

// A tree deeper than kMaxTreeDepth (a chain of crafted trees) is refused by walks that recurse.
TEST_F(HostileWorkspaceTest, TreesDeeperThanTheLimitAreRefusedByWalks) {
  std::vector<TreeEntry> level = {File("leaf", "x")};
  uint64_t count = 1;
  for (size_t i = 0; i < objects::kMaxTreeDepth + 5; i++) {
    level = {Dir("d", level, count)};
    count++;
  }
  auto head = store_->BranchHead("main");
  auto c = store_->CommitTree("main", Put(Kind::kTree, objects::EncodeTree(level)), **head, "deep", 1, count);
  ASSERT_TRUE(c.ok());
  auto v = store_->Verify({*c});
  ASSERT_TRUE(v.ok());
  ASSERT_FALSE(v->ok());
  EXPECT_NE(v->problems[0].find("nested deeper"), std::string::npos) << v->problems[0];
  auto diff = store_->DiffTrees(store_->GetCommit(**head)->root, store_->GetCommit(*c)->root);
  EXPECT_EQ(diff.status().code(), EIO);
}

}  // namespace
}  // namespace layerfs::workspace
