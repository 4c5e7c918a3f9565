#include "layerfs/store.h"

#include <gtest/gtest.h>
#include <sys/fsuid.h>
#include <sys/stat.h>

#include <rocksdb/db.h>

#include <filesystem>
#include <set>

#include "base/hash.h"
#include "store_fixture.h"
#include "kv/fault_kv.h"
#include "objects/object_store.h"
#include "objects/tree.h"

namespace layerfs {
namespace {

using testing::RandomBytes;
using testing::StoreTest;
using testing::TempDir;
using testing::TextBytes;
using testing::WriteFile;
namespace fs = std::filesystem;

TEST(Policy, ParseAndFormat) {
  auto p = Policy::Parse("16/8/8");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->whole, 16u);
  EXPECT_EQ(p->chunk, 8u);
  EXPECT_EQ(p->meta, 8u);
  EXPECT_EQ(p->ToString(), "16/8/8");
  auto q = Policy::Parse("4/2/0");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->ToString(), "4/2/0");
  for (const char* bad : {"", "16", "16/8", "16/8/8/8", "a/b/c", "-1/2/3", "1//2", "1/2/", "1001/1/1", " 1/2/3",
                          "1/2/3 ", "99999999999/1/1"}) {
    auto r = Policy::Parse(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), EINVAL) << bad;
  }
}

TEST_F(StoreTest, FreshStoreHasMainAtEmptyCommit) {
  auto branches = store_->Branches();
  ASSERT_TRUE(branches.ok());
  ASSERT_EQ(branches->size(), 1u);
  EXPECT_EQ((*branches)[0].first, "main");
  auto c = store_->GetCommit(Head());
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->parents.empty());
  EXPECT_EQ(c->message, "init");
  auto t = store_->ReadTree(c->root);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->empty());
  EXPECT_EQ(store_->policy().ToString(), "16/8/8");
  auto root = store_->Lookup(Head(), "");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->type, EntryType::kDir);
  EXPECT_EQ(root->id, c->root);
}

TEST_F(StoreTest, ReopenOnSameKvKeepsConfigAndRefs) {
  WriteFile(tmp_ / "f", "hello");
  ObjectId c = Import(tmp_.path());
  uint64_t seed = store_->objects().seed();
  store_.reset();
  auto st = Store::OpenOnKv(kv_.get(), Policy{1, 1, 1});  // the stored policy wins
  ASSERT_TRUE(st.ok());
  store_ = std::move(*st);
  EXPECT_EQ(store_->objects().seed(), seed);
  EXPECT_EQ(store_->policy().ToString(), "16/8/8");
  EXPECT_EQ(Head(), c);
  EXPECT_EQ(Cat(c, "f"), "hello");
}

// The format version: a Store of every older version (1 to 5) opens and is upgraded in place; a
// newer or unknown one is refused with EPROTO, unchanged.
TEST_F(StoreTest, FormatVersionUpgradesOlderAndRefusesNewer) {
  WriteFile(tmp_ / "f", "hello");
  ObjectId c = Import(tmp_.path());
  store_.reset();
  auto set_version = [&](uint32_t v) {
    auto cfg = kv_->Get(kv::Cf::kMeta, "config");
    ASSERT_TRUE(cfg.ok() && cfg->has_value());
    std::string b = **cfg;
    for (int i = 0; i < 4; i++) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    kv::Batch batch;
    batch.Put(kv::Cf::kMeta, "config", b);
    ASSERT_TRUE(kv_->Write(batch, true).ok());
  };
  auto version = [&] {
    auto cfg = kv_->Get(kv::Cf::kMeta, "config");
    return static_cast<uint32_t>(static_cast<uint8_t>((**cfg)[0])) |
           static_cast<uint32_t>(static_cast<uint8_t>((**cfg)[1])) << 8;
  };
  // Versions 3 to 5 hold data-log records without checksums: upgraded by rewriting the config.
  for (uint32_t old : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
    set_version(old);
    auto st = Store::OpenOnKv(kv_.get(), Policy{});
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    EXPECT_EQ(version(), 9u) << old;
    store_ = std::move(*st);
    EXPECT_EQ(Cat(c, "f"), "hello");
    EXPECT_EQ(store_->PendingEncodings(), 0u) << old;  // an imported Store has nothing queued
    auto refs = store_->RemoteRefs();
    ASSERT_TRUE(refs.ok());
    EXPECT_TRUE(refs->empty()) << old;
    store_.reset();
  }
  for (uint32_t bad : {0u, 10u, 99u}) {
    set_version(bad);
    auto refused = Store::OpenOnKv(kv_.get(), Policy{});
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), EPROTO) << bad;
    EXPECT_EQ(version(), bad);
  }
  set_version(9);
}

TEST_F(StoreTest, CreateOpenOnDisk) {
  std::string path = tmp_ / "store";
  {
    auto st = Store::Create(path, Policy{4, 2, 2});
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    fs::create_directories(tmp_ / "src/sub");
    WriteFile(tmp_ / "src/sub/a", TextBytes(10000, 1));
    auto r = (*st)->Import(tmp_ / "src", ImportOptions{});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    // A second open of a Store in use fails with EBUSY.
    auto again = Store::Open(path);
    EXPECT_FALSE(again.ok());
    EXPECT_EQ(again.status().code(), EBUSY);
  }
  auto st = Store::Open(path);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ((*st)->policy().ToString(), "4/2/2");
  auto head = (*st)->Resolve("main");
  ASSERT_TRUE(head.ok());
  auto e = (*st)->Lookup(*head, "sub/a");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*(*st)->ReadFile(*e), TextBytes(10000, 1));
  auto stats = (*st)->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_GT(stats->allocated_bytes, 0u);
  EXPECT_EQ(stats->commits, 2u);
  st->reset();
  // Creating over an existing Store, or a non-empty directory, fails with EEXIST.
  auto dup = Store::Create(path, Policy{});
  EXPECT_EQ(dup.status().code(), EEXIST);
  auto nonempty = Store::Create(tmp_ / "src", Policy{});
  EXPECT_EQ(nonempty.status().code(), EEXIST);
  // Opening something that is not a Store.
  EXPECT_EQ(Store::Open(tmp_ / "src").status().code(), ENOENT);
  EXPECT_EQ(Store::Open(tmp_ / "absent").status().code(), ENOENT);
  // An empty directory is fine to create in.
  fs::create_directories(tmp_ / "empty");
  EXPECT_TRUE(Store::Create(tmp_ / "empty", Policy{}).ok());
}

TEST_F(StoreTest, ResolveForms) {
  std::vector<ObjectId> commits = {Head()};
  for (int i = 0; i < 3; i++) {
    WriteFile(tmp_ / "f", "version " + std::to_string(i));
    commits.push_back(Import(tmp_.path()));
  }
  ObjectId head = commits.back();
  EXPECT_EQ(*store_->Resolve("main"), head);
  EXPECT_EQ(*store_->Resolve(head.Hex()), head);
  std::string upper = head.Hex();
  for (auto& ch : upper) ch = static_cast<char>(toupper(ch));
  EXPECT_EQ(*store_->Resolve(upper), head);
  // Unique prefixes (the shortest unambiguous one among four commits is short).
  for (size_t n : {size_t{12}, size_t{9}, size_t{31}}) { EXPECT_EQ(*store_->Resolve(head.Hex().substr(0, n)), head) << n; }
  EXPECT_EQ(*store_->Resolve("main~"), commits[2]);
  EXPECT_EQ(*store_->Resolve("main~0"), head);
  EXPECT_EQ(*store_->Resolve("main~1"), commits[2]);
  EXPECT_EQ(*store_->Resolve("main~3"), commits[0]);
  EXPECT_EQ(*store_->Resolve(head.Hex().substr(0, 10) + "~2"), commits[1]);
  auto far = store_->Resolve("main~4");
  EXPECT_EQ(far.status().code(), ENOENT);
  EXPECT_EQ(store_->Resolve("main~99").status().code(), ENOENT);
  EXPECT_EQ(store_->Resolve("nosuchbranch").status().code(), ENOENT);
  EXPECT_EQ(store_->Resolve("0000000000000000").status().code(), ENOENT);
  EXPECT_EQ(store_->Resolve("").status().code(), EINVAL);
  EXPECT_EQ(store_->Resolve("main~x").status().code(), EINVAL);
  EXPECT_EQ(store_->Resolve("main~-1").status().code(), EINVAL);
  EXPECT_FALSE(store_->Resolve("abc").ok());  // too short to be a prefix, not a branch
  EXPECT_FALSE(store_->Resolve(head.Hex() + "0").ok());
  // A branch shadows a hex prefix of the same spelling.
  std::string pfx = commits[1].Hex().substr(0, 8);
  ASSERT_TRUE(store_->Fork(pfx, "main").ok());
  EXPECT_EQ(*store_->Resolve(pfx), head);
}

struct PrefixOverride {
  // Forces every id to start with the same two bytes (the rest stays a real hash).
  PrefixOverride() {
    base::SetHashOverrideForTesting([](std::string_view data, uint64_t seed) {
      ObjectId id = base::HashContent(data, seed ^ 0x5555, 1);
      id.bytes[0] = 0xab;
      id.bytes[1] = 0xcd;
      return id;
    });
  }
  ~PrefixOverride() { base::SetHashOverrideForTesting(nullptr); }
};

TEST_F(StoreTest, ResolveAmbiguousPrefix) {
  PrefixOverride o;
  Open(Policy{});
  WriteFile(tmp_ / "f", "one");
  ObjectId a = Import(tmp_.path());
  WriteFile(tmp_ / "f", "two");
  ObjectId b = Import(tmp_.path());
  ASSERT_EQ(a.Hex().substr(0, 4), "abcd");
  ASSERT_EQ(b.Hex().substr(0, 4), "abcd");
  auto r = store_->Resolve("abcd");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EINVAL);
  EXPECT_EQ(store_->Resolve("ABCD").status().code(), EINVAL);
  EXPECT_EQ(store_->Resolve("abcd~1").status().code(), EINVAL);
  EXPECT_EQ(*store_->Resolve(a.Hex()), a);
  EXPECT_EQ(*store_->Resolve(b.Hex()), b);
  // A longer prefix that separates them.
  EXPECT_EQ(*store_->Resolve(b.Hex().substr(0, 20)), b);
  EXPECT_EQ(Cat(b, "f"), "two");
  store_.reset();
}

TEST_F(StoreTest, ForkIsConstantTime) {
  WriteFile(tmp_ / "f", TextBytes(50000, 2));
  ObjectId c = Import(tmp_.path());
  uint64_t objects = ObjectCount();
  auto before = kv_->Stats(kv::Cf::kBlobs);
  ASSERT_TRUE(store_->Fork("feature", "main").ok());
  EXPECT_EQ(Head("feature"), c);
  EXPECT_EQ(ObjectCount(), objects);
  EXPECT_EQ(kv_->Stats(kv::Cf::kBlobs)->entries, before->entries);
  // Fork from a commit id, a prefix and REF~N.
  ASSERT_TRUE(store_->Fork("old", "main~1").ok());
  EXPECT_EQ(Head("old"), store_->GetCommit(c)->parents[0]);
  ASSERT_TRUE(store_->Fork("by-id", c.Hex()).ok());
  EXPECT_EQ(Head("by-id"), c);
  ASSERT_TRUE(store_->Fork("team/x_1.y", c.Hex().substr(0, 8)).ok());
  EXPECT_EQ(Head("team/x_1.y"), c);
  auto branches = store_->Branches();
  std::set<std::string> names;
  for (auto& [n, id] : *branches) names.insert(n);
  EXPECT_EQ(names, (std::set<std::string>{"by-id", "feature", "main", "old", "team/x_1.y"}));
}

TEST_F(StoreTest, ForkErrors) {
  ASSERT_TRUE(store_->Fork("feature", "main").ok());
  auto dup = store_->Fork("feature", "main");
  EXPECT_EQ(dup.code(), EEXIST);
  EXPECT_EQ(store_->Fork("main", "feature").code(), EEXIST);
  for (const char* bad : {"", "-x", "/a", "a/", "a..b", "a//b", "a b", "a~1", "a:b", "a\nb", "..", "ü"}) {
    EXPECT_EQ(store_->Fork(bad, "main").code(), EINVAL) << bad;
  }
  EXPECT_EQ(store_->Fork(std::string(201, 'a'), "main").code(), EINVAL);
  EXPECT_EQ(store_->Fork("x", "nosuch").code(), ENOENT);
  auto branches = store_->Branches();
  EXPECT_EQ(branches->size(), 2u);
  EXPECT_EQ(store_->SetBranch("bad name", Head()).code(), EINVAL);
  EXPECT_EQ(store_->SetBranch("ok", base::HashContent("no commit", 1)).code(), ENOENT);
  ASSERT_TRUE(store_->SetBranch("moved", Head()).ok());
  EXPECT_EQ(Head("moved"), Head());
}

TEST_F(StoreTest, LogOrderAndParents) {
  ObjectId init = Head();
  std::vector<ObjectId> ids;
  for (int i = 0; i < 4; i++) {
    WriteFile(tmp_ / "f", std::string(i + 1, 'x'));
    ids.push_back(Import(tmp_.path(), "main", nullptr, "commit " + std::to_string(i)));
  }
  auto log = store_->Log(Head());
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->size(), 5u);
  for (int i = 0; i < 4; i++) {
    const auto& c = (*log)[3 - i];
    EXPECT_EQ(c.id, ids[i]);
    EXPECT_EQ(c.message, "commit " + std::to_string(i));
    ASSERT_EQ(c.parents.size(), 1u);
    EXPECT_EQ(c.parents[0], i == 0 ? init : ids[i - 1]);
    EXPECT_EQ(c.files, 1u);
    EXPECT_EQ(c.logical_bytes, static_cast<uint64_t>(i + 1));
  }
  EXPECT_EQ((*log)[4].id, init);
  EXPECT_TRUE((*log)[4].parents.empty());
  for (size_t i = 0; i + 1 < log->size(); i++) {
    auto a = (*log)[i], b = (*log)[i + 1];
    EXPECT_GE(a.time_sec * 1000000000ll + a.time_nsec, b.time_sec * 1000000000ll + b.time_nsec);
  }
  auto limited = store_->Log(Head(), 2);
  ASSERT_EQ(limited->size(), 2u);
  EXPECT_EQ((*limited)[0].id, ids[3]);
  EXPECT_EQ((*limited)[1].id, ids[2]);
  // Default message.
  WriteFile(tmp_ / "f", "default");
  ObjectId d = Import(tmp_.path());
  EXPECT_EQ(store_->GetCommit(d)->message, "import " + tmp_.path());
}

TEST_F(StoreTest, BranchesAreIndependent) {
  WriteFile(tmp_ / "f", "base");
  ObjectId base = Import(tmp_.path());
  ASSERT_TRUE(store_->Fork("feature", "main").ok());
  WriteFile(tmp_ / "f", "feature work");
  ObjectId fc = Import(tmp_.path(), "feature");
  EXPECT_EQ(Head("main"), base);
  EXPECT_EQ(Head("feature"), fc);
  EXPECT_EQ(store_->GetCommit(fc)->parents[0], base);
  EXPECT_EQ(Cat(Head("main"), "f"), "base");
  EXPECT_EQ(Cat(Head("feature"), "f"), "feature work");
  ImportOptions o;
  o.branch = "nosuch";
  EXPECT_EQ(store_->Import(tmp_.path(), o).status().code(), ENOENT);
}

TEST_F(StoreTest, CommitTreeChecksExpectedHead) {
  ObjectId head = Head();
  auto root = store_->GetCommit(head)->root;
  auto stale = store_->CommitTree("main", root, base::HashContent("other", 1), "x", 0, 0);
  EXPECT_EQ(stale.status().code(), EAGAIN);
  EXPECT_EQ(Head(), head);
  auto ok = store_->CommitTree("main", root, head, "y", 0, 0);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(Head(), *ok);
  // A new branch: expected head nullopt.
  auto nb = store_->CommitTree("fresh", root, std::nullopt, "z", 0, 0);
  ASSERT_TRUE(nb.ok());
  EXPECT_TRUE(store_->GetCommit(*nb)->parents.empty());
  EXPECT_EQ(store_->CommitTree("fresh", root, std::nullopt, "z", 0, 0).status().code(), EAGAIN);
}

std::set<std::pair<std::string, char>> Changes(const std::vector<DiffEntry>& d) {
  std::set<std::pair<std::string, char>> s;
  for (const auto& e : d) s.insert({e.path, e.change});
  return s;
}

// The change a Commit made: against its first parent; a root Commit's is its whole tree, added.
TEST_F(StoreTest, DiffParentOfARootCommitIsItsWholeTree) {
  std::string src = tmp_ / "src";
  fs::create_directories(src + "/dir/deep");
  WriteFile(src + "/top", "t");
  WriteFile(src + "/dir/deep/file", "f");
  ObjectId a = Import(src);
  auto ca = store_->GetCommit(a);
  ASSERT_TRUE(ca.ok());
  auto against_parent = store_->DiffParent(*ca);
  ASSERT_TRUE(against_parent.ok()) << against_parent.status().ToString();
  EXPECT_EQ(Changes(*against_parent), Changes(*store_->Diff(ca->parents[0], a)));
  // A root Commit with that tree: every path added, directories before what they hold.
  auto orphan = store_->CommitTree("orphan", ca->root, std::nullopt, "root with content", 0, 2);
  ASSERT_TRUE(orphan.ok()) << orphan.status().ToString();
  auto co = store_->GetCommit(*orphan);
  ASSERT_TRUE(co.ok());
  ASSERT_TRUE(co->parents.empty());
  auto whole = store_->DiffParent(*co);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  std::set<std::pair<std::string, char>> want = {
      {"dir", 'A'}, {"dir/deep", 'A'}, {"dir/deep/file", 'A'}, {"top", 'A'}};
  EXPECT_EQ(Changes(*whole), want);
  ASSERT_EQ(whole->size(), want.size());
  EXPECT_EQ((*whole)[0].path, "dir");
  for (const auto& e : *whole) {
    EXPECT_TRUE(e.after && !e.before) << e.path;
    if (e.path == "dir/deep/file") {
      EXPECT_EQ(e.after->size, 1u);
    }
  }
  // The empty init Commit changed nothing.
  auto init = store_->GetCommit(ca->parents[0]);
  ASSERT_TRUE(init.ok());
  EXPECT_TRUE(store_->DiffParent(*init)->empty());
}

// log --all: every Commit reachable from any start, each once, children before parents.
TEST_F(StoreTest, LogAllFromSeveralStartsListsEachCommitOnce) {
  std::string src = tmp_ / "src";
  fs::create_directories(src);
  WriteFile(src + "/f", "1");
  ObjectId c1 = Import(src);
  ASSERT_TRUE(store_->Fork("side", c1.Hex()).ok());
  WriteFile(src + "/f", "2");
  ObjectId c2 = Import(src);
  ImportOptions o;
  o.branch = "side";
  WriteFile(src + "/f", "3");
  auto c3 = store_->Import(src, o);
  ASSERT_TRUE(c3.ok()) << c3.status().ToString();
  auto log = store_->LogAll(std::vector<ObjectId>{c2, *c3, c1, c2});
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ(log->size(), 4u);  // c2, c3, c1, init: c1 though named as a start comes after its children
  std::vector<ObjectId> ids;
  for (const auto& c : *log) ids.push_back(c.id);
  EXPECT_EQ(std::set<ObjectId>(ids.begin(), ids.begin() + 2), (std::set<ObjectId>{c2, *c3}));
  EXPECT_EQ(ids[2], c1);
  EXPECT_TRUE((*log)[3].parents.empty());
  auto two = store_->LogAll(std::vector<ObjectId>{c2, *c3}, 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->size(), 2u);
}

TEST_F(StoreTest, DiffReportsEveryKindOfChange) {
  std::string src = tmp_ / "src";
  fs::create_directories(src + "/dir/deep");
  fs::create_directories(src + "/gone/x");
  fs::create_directories(src + "/same");
  WriteFile(src + "/modified", "before");
  WriteFile(src + "/removed", "bye");
  WriteFile(src + "/chmod", "mode");
  WriteFile(src + "/dir/deep/file", "deep");
  WriteFile(src + "/gone/x/y", "y");
  WriteFile(src + "/becomes_dir", "file");
  WriteFile(src + "/same/file", "unchanged");
  fs::create_directories(src + "/becomes_file");
  WriteFile(src + "/becomes_file/child", "c");
  ASSERT_EQ(symlink("target1", (src + "/link").c_str()), 0);
  ASSERT_EQ(symlink("t", (src + "/link_to_file").c_str()), 0);
  chmod((src + "/chmod").c_str(), 0644);
  ObjectId a = Import(src);

  WriteFile(src + "/modified", "after!");
  fs::remove(src + "/removed");
  chmod((src + "/chmod").c_str(), 0600);
  WriteFile(src + "/dir/deep/file", "deeper");
  WriteFile(src + "/dir/new", "new");
  fs::remove_all(src + "/gone");
  fs::remove(src + "/becomes_dir");
  fs::create_directories(src + "/becomes_dir");
  WriteFile(src + "/becomes_dir/inner", "i");
  fs::remove_all(src + "/becomes_file");
  WriteFile(src + "/becomes_file", "now a file");
  fs::remove(src + "/link");
  ASSERT_EQ(symlink("target2", (src + "/link").c_str()), 0);
  fs::remove(src + "/link_to_file");
  WriteFile(src + "/link_to_file", "t");
  WriteFile(src + "/added", "hi");
  chmod((src + "/dir").c_str(), 0700);
  ObjectId b = Import(src);

  auto d = store_->Diff(a, b);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  std::set<std::pair<std::string, char>> want = {
      {"added", 'A'},          {"becomes_dir", 'T'},        {"becomes_dir/inner", 'A'},
      {"becomes_file", 'T'},   {"becomes_file/child", 'D'}, {"chmod", 'P'},
      {"dir", 'P'},            {"dir/deep/file", 'M'},      {"dir/new", 'A'},
      {"gone", 'D'},           {"gone/x", 'D'},             {"gone/x/y", 'D'},
      {"link", 'M'},           {"link_to_file", 'T'},       {"modified", 'M'},
      {"removed", 'D'}};
  EXPECT_EQ(Changes(*d), want);
  EXPECT_EQ(d->size(), want.size());
  for (const auto& e : *d) {
    if (e.change == 'A') { EXPECT_TRUE(e.after && !e.before) << e.path; }
    if (e.change == 'D') { EXPECT_TRUE(e.before && !e.after) << e.path; }
    if (e.change == 'M' || e.change == 'T' || e.change == 'P') { EXPECT_TRUE(e.before && e.after) << e.path; }
    if (e.path == "chmod") {
      EXPECT_EQ(e.before->mode, 0644u);
      EXPECT_EQ(e.after->mode, 0600u);
    }
    if (e.path == "link") {
      EXPECT_EQ(e.before->target, "target1");
      EXPECT_EQ(e.after->target, "target2");
    }
  }
  // Reverse diff swaps A and D; a commit against itself is empty.
  auto r = store_->Diff(b, a);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), want.size());
  for (const auto& e : *r) {
    char expect = want.count({e.path, 'A'}) ? 'D' : want.count({e.path, 'D'}) ? 'A' : 0;
    if (expect) { EXPECT_EQ(e.change, expect) << e.path; }
  }
  EXPECT_TRUE(store_->Diff(b, b)->empty());
  // An mtime-only change is not a difference.
  testing::SetMtime(src + "/added", 1000000, 5);
  ObjectId c = Import(src);
  EXPECT_TRUE(store_->Diff(b, c)->empty());
  EXPECT_EQ(store_->Diff(a, base::HashContent("nope", 1)).status().code(), ENOENT);
}

TEST_F(StoreTest, LookupErrors) {
  fs::create_directories(tmp_ / "a/b");
  WriteFile(tmp_ / "a/b/f", "content");
  ObjectId c = Import(tmp_.path());
  EXPECT_EQ(Cat(c, "a/b/f"), "content");
  EXPECT_EQ(Cat(c, "/a//b/f"), "content");
  EXPECT_EQ(store_->Lookup(c, "a/b/missing").status().code(), ENOENT);
  EXPECT_EQ(store_->Lookup(c, "a/b/f/x").status().code(), ENOTDIR);
  EXPECT_EQ(store_->Lookup(c, "a/../a").status().code(), ENOENT);
  auto dir = store_->Lookup(c, "a");
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(dir->type, EntryType::kDir);
  EXPECT_EQ(store_->ReadFile(*dir).status().code(), EINVAL);
}

TEST_F(StoreTest, DeleteBranchAndGc) {
  std::string src = tmp_ / "src";
  fs::create_directories(src);
  std::string shared = TextBytes(40000, 3);
  WriteFile(src + "/shared", shared);
  WriteFile(src + "/evolving", TextBytes(30000, 4));
  std::vector<std::pair<ObjectId, std::map<std::string, std::string>>> main_commits;
  main_commits.push_back({Import(src), {{"shared", shared}, {"evolving", TextBytes(30000, 4)}}});
  ASSERT_TRUE(store_->Fork("feature", "main").ok());
  // Feature-only content: a big chunked file, a new version of "evolving" (a delta against
  // main's), and a version that main adopts later (by dedup).
  std::string fsrc = tmp_ / "fsrc";
  fs::create_directories(fsrc);
  WriteFile(fsrc + "/shared", shared);
  WriteFile(fsrc + "/big", RandomBytes(3 << 20, 5));
  std::string adopted = TextBytes(30000, 4) + "feature edit";
  WriteFile(fsrc + "/evolving", adopted);
  Import(fsrc, "feature");
  WriteFile(fsrc + "/evolving", adopted + " and more");
  WriteFile(fsrc + "/big", RandomBytes(3 << 20, 6));
  Import(fsrc, "feature");
  // Main moves on and happens to store a version that only feature had stored.
  WriteFile(src + "/evolving", adopted);
  main_commits.push_back({Import(src), {{"shared", shared}, {"evolving", adopted}}});
  WriteFile(src + "/evolving", adopted + " main edit");
  main_commits.push_back({Import(src), {{"shared", shared}, {"evolving", adopted + " main edit"}}});

  uint64_t before = ObjectCount();
  auto commits_before = store_->Stats()->commits;
  ASSERT_TRUE(store_->DeleteBranch("feature").ok());
  EXPECT_EQ(store_->DeleteBranch("feature").code(), ENOENT);
  EXPECT_FALSE(store_->BranchHead("feature")->has_value());
  auto gc = store_->Gc();
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_GT(gc->objects_deleted, 0u);
  uint64_t after = ObjectCount();
  EXPECT_EQ(after, before - gc->objects_deleted);
  EXPECT_LT(after, before);
  EXPECT_EQ(store_->Stats()->commits, commits_before - 2);
  EXPECT_GE(gc->objects_deleted, 2u + 2 /* chunk lists */ + 2 * 3 /* >= 3 chunks each */);
  auto v = store_->Verify({});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok()) << (v->problems.empty() ? "" : v->problems[0]);
  EXPECT_EQ(v->commits, 4u);  // init + 3
  for (size_t i = 0; i < main_commits.size(); i++) {
    auto& [id, files] = main_commits[i];
    TempDir out;
    std::string dir = out / "x";
    ASSERT_TRUE(store_->Export(id, dir).ok()) << i;
    for (auto& [name, data] : files) { EXPECT_EQ(testing::ReadFileBytes(dir + "/" + name), data) << i << name; }
    EXPECT_FALSE(fs::exists(dir + "/big"));
  }
  // A second gc finds nothing.
  auto gc2 = store_->Gc();
  ASSERT_TRUE(gc2.ok());
  EXPECT_EQ(gc2->objects_deleted, 0u);
  // The next import still works (stat cache entries may point at nothing now).
  WriteFile(src + "/evolving", "final");
  ObjectId fin = Import(src);
  EXPECT_EQ(Cat(fin, "evolving"), "final");
  EXPECT_EQ(Cat(fin, "shared"), shared);
}

// Drops the (empty) chunks family of a closed Store's database: what a Store made before format 8
// looks like.
void DropChunksFamily(const std::string& db_path) {
  std::vector<std::string> names;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), db_path, &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const auto& n : names) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> hs;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), db_path, cfs, &hs, &db).ok());
  for (auto* h : hs) {
    if (h->GetName() == "chunks") {
      std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), h));
      it->SeekToFirst();
      EXPECT_FALSE(it->Valid()) << "the chunks family is not empty";
      it.reset();
      EXPECT_TRUE(db->DropColumnFamily(h).ok());
    }
    db->DestroyColumnFamilyHandle(h);
  }
  delete db;
}

// Chunks of large files live in a family of their own without RocksDB's compression (format 8);
// a Store made before keeps them in blobs. Both hold, read, count, verify and gc them the same.
TEST_F(StoreTest, ChunksLiveApartInNewStoresAndInBlobsInOlderOnes) {
  for (bool older : {false, true}) {
    SCOPED_TRACE(older ? "older Store" : "new Store");
    TempDir dir;
    const std::string path = dir / "store";
    ASSERT_TRUE(Store::Create(path, Policy{}).ok());
    if (older) DropChunksFamily(path + "/db");
    auto st = Store::Open(path);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    Store& s = **st;
    EXPECT_EQ(s.kv().Aliased(kv::Cf::kChunks), older);
    std::string src = dir / "src";
    fs::create_directories(src);
    const std::string big1 = RandomBytes(5 << 20, 11), small = TextBytes(20000, 12);
    WriteFile(src + "/big", big1);
    WriteFile(src + "/small", small);
    ImportOptions o;
    auto c1 = s.Import(src, o);
    ASSERT_TRUE(c1.ok()) << c1.status().ToString();
    // A second version that shares most chunks, on a branch gc will drop.
    ASSERT_TRUE(s.Fork("gone", "main").ok());
    std::string big2 = big1;
    big2.replace(3 << 20, 4096, RandomBytes(4096, 13));
    WriteFile(src + "/big", big2);
    o.branch = "gone";
    auto c2 = s.Import(src, o);
    ASSERT_TRUE(c2.ok()) << c2.status().ToString();
    // Where the records are.
    uint64_t chunks_in_blobs = 0, chunks_apart = 0, blobs = 0;
    ASSERT_TRUE(s.kv().Scan(kv::Cf::kBlobs, "", "", [&](auto, auto v) {
      auto info = objects::ParseRecord(v);
      if (info.ok() && info->kind == objects::Kind::kChunk) chunks_in_blobs++;
      if (info.ok() && info->kind == objects::Kind::kBlob) blobs++;
      return true;
    }).ok());
    if (!older) {
      ASSERT_TRUE(s.kv().Scan(kv::Cf::kChunks, "", "", [&](auto, auto v) {
        auto info = objects::ParseRecord(v);
        EXPECT_TRUE(info.ok() && info->kind == objects::Kind::kChunk);
        chunks_apart++;
        return true;
      }).ok());
    }
    auto stats = s.Stats();
    ASSERT_TRUE(stats.ok());
    const uint64_t chunks = stats->objects["chunk"];
    EXPECT_GE(chunks, 6u);  // 5 MiB in chunks of at most 1 MiB, plus the changed ones
    EXPECT_EQ(older ? chunks_in_blobs : chunks_apart, chunks);
    EXPECT_EQ(older ? 0u : chunks_in_blobs, 0u);
    EXPECT_EQ(stats->objects["blob"], blobs);
    // gc drops the second version's own chunks only; both versions read back before, the first after.
    {
      auto e2 = s.Lookup(*c2, "big");
      ASSERT_TRUE(e2.ok());
      auto d2 = s.ReadFile(*e2);
      ASSERT_TRUE(d2.ok()) << d2.status().ToString();
      EXPECT_TRUE(*d2 == big2);
    }
    ASSERT_TRUE(s.DeleteBranch("gone").ok());
    auto gc = s.Gc();
    ASSERT_TRUE(gc.ok()) << gc.status().ToString();
    EXPECT_GE(gc->objects_deleted, 3u);  // a commit, a tree, a chunk list, the changed chunk(s)
    auto after = s.Stats();
    ASSERT_TRUE(after.ok());
    EXPECT_LT(after->objects["chunk"], chunks);
    EXPECT_GE(after->objects["chunk"], 5u);
    auto e = s.Lookup(*c1, "big");
    ASSERT_TRUE(e.ok());
    auto d = s.ReadFile(*e);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_TRUE(*d == big1);
    auto v = s.Verify({});
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->ok()) << (v->problems.empty() ? "" : v->problems[0]);
    st->reset();
    // The layout stays what it was across a reopen.
    auto again = Store::Open(path);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)->kv().Aliased(kv::Cf::kChunks), older);
    auto e2 = (*again)->Lookup(*c1, "big");
    ASSERT_TRUE(e2.ok());
    EXPECT_TRUE(*(*again)->ReadFile(*e2) == big1);
  }
}

TEST_F(StoreTest, GcKeepsForkedHistory) {
  WriteFile(tmp_ / "f", TextBytes(20000, 1));
  ObjectId a = Import(tmp_.path());
  ASSERT_TRUE(store_->Fork("keep", "main").ok());
  WriteFile(tmp_ / "f", TextBytes(20000, 2));
  Import(tmp_.path());
  ASSERT_TRUE(store_->SetBranch("main", a).ok());  // main rewound: its newer commit is garbage
  auto gc = store_->Gc();
  ASSERT_TRUE(gc.ok());
  EXPECT_GE(gc->objects_deleted, 2u);  // the commit and its blob (its tree may be shared)
  EXPECT_EQ(Cat(Head("keep"), "f"), TextBytes(20000, 1));
  EXPECT_TRUE(store_->Verify({})->ok());
}

void Damage(kv::Kv* kv, kv::Cf cf, const ObjectId& id) {
  auto rec = kv->Get(cf, id.AsKey());
  ASSERT_TRUE(rec.ok() && rec->has_value());
  std::string bad = **rec;
  bad.back() ^= 0x40;
  kv::Batch b;
  b.Put(cf, id.AsKey(), bad);
  ASSERT_TRUE(kv->Write(b, true).ok());
}

TEST_F(StoreTest, VerifyNamesDamagedBlob) {
  fs::create_directories(tmp_ / "sub/dir");
  WriteFile(tmp_ / "sub/dir/victim.txt", TextBytes(5000, 7));
  WriteFile(tmp_ / "healthy", TextBytes(5000, 8));
  ObjectId c = Import(tmp_.path());
  auto ok = store_->Verify({});
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->ok());
  EXPECT_EQ(ok->commits, 2u);
  EXPECT_GE(ok->bytes, 10000u);
  auto e = store_->Lookup(c, "sub/dir/victim.txt");
  ASSERT_TRUE(e.ok());
  Damage(kv_.get(), kv::Cf::kBlobs, e->id);
  // No cache clearing: Verify must read what is stored.
  auto rep = store_->Verify({});
  ASSERT_TRUE(rep.ok());
  ASSERT_EQ(rep->problems.size(), 1u);
  EXPECT_NE(rep->problems[0].find("/sub/dir/victim.txt"), std::string::npos) << rep->problems[0];
  EXPECT_NE(rep->problems[0].find(e->id.Hex()), std::string::npos) << rep->problems[0];
  // Only the named commit.
  auto one = store_->Verify({c});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->problems.size(), 1u);
  EXPECT_EQ(one->commits, 2u);
  // Reading it fails with EIO.
  store_->objects().ClearCache();
  EXPECT_EQ(store_->ReadFile(*e).status().code(), EIO);
  // Export of the damaged commit fails.
  EXPECT_EQ(store_->Export(c, tmp_ / "out").code(), EIO);
}

TEST_F(StoreTest, VerifyNamesDamagedTreeAndCommit) {
  fs::create_directories(tmp_ / "src/sub");
  WriteFile(tmp_ / "src/sub/f", "x");
  ObjectId c = Import(tmp_ / "src");
  auto sub = store_->Lookup(c, "sub");
  Damage(kv_.get(), kv::Cf::kTrees, sub->id);
  auto rep = store_->Verify({});
  ASSERT_TRUE(rep.ok());
  ASSERT_EQ(rep->problems.size(), 1u);
  EXPECT_NE(rep->problems[0].find("/sub"), std::string::npos) << rep->problems[0];
  EXPECT_NE(rep->problems[0].find("tree"), std::string::npos) << rep->problems[0];
  Damage(kv_.get(), kv::Cf::kCommits, c);
  rep = store_->Verify({});
  ASSERT_TRUE(rep.ok());
  ASSERT_FALSE(rep->ok());
  EXPECT_NE(rep->problems[0].find(c.Hex()), std::string::npos);
}

TEST_F(StoreTest, StatsCountsObjectsAndDepths) {
  Open(Policy{4, 2, 2});
  for (int i = 0; i < 20; i++) {
    std::string s = TextBytes(30000, 1);
    s.replace(i * 100, 6, "edit" + std::to_string(i % 10) + "!");
    WriteFile(tmp_ / "f", s);
    Import(tmp_.path());
  }
  auto s = store_->Stats();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->commits, 21u);
  EXPECT_EQ(s->branches, 1u);
  EXPECT_EQ(s->policy, "4/2/2");
  EXPECT_EQ(s->objects["commit"], 21u);
  EXPECT_EQ(s->objects["blob"], 20u);
  EXPECT_EQ(s->max_chain_depth["whole"], 4u);
  EXPECT_LE(s->max_chain_depth["metadata"], 2u);
  EXPECT_EQ(s->max_chain_depth.count("chunk"), 1u);
  EXPECT_EQ(s->logical_bytes, 20u * 30000);
  uint64_t hist = 0;
  for (auto& [d, n] : s->depth_histogram["blob"]) {
    EXPECT_LE(d, 4u);
    hist += n;
  }
  EXPECT_EQ(hist, 20u);
  EXPECT_GT(s->payload_bytes, 0u);
  EXPECT_GT(s->metadata_bytes, 0u);
  EXPECT_LT(s->payload_bytes, 20u * 30000 / 4);  // deltas, not copies
}

TEST_F(StoreTest, FailedImportLeavesHeadUnchanged) {
  auto base = kv::NewMemKv();
  kv::FaultKv fault(base.get());
  store_.reset();
  auto st = Store::OpenOnKv(&fault, Policy{});
  ASSERT_TRUE(st.ok());
  store_ = std::move(*st);
  WriteFile(tmp_ / "f", "first");
  ObjectId first = Import(tmp_.path());
  auto log_before = store_->Log(Head());
  ASSERT_EQ(log_before->size(), 2u);

  fs::create_directories(tmp_ / "d");
  WriteFile(tmp_ / "f", TextBytes(100000, 9));
  WriteFile(tmp_ / "d/g", RandomBytes(3 << 20, 10));
  fault.FailWritesAfter(0);
  auto r = store_->Import(tmp_.path(), ImportOptions{});
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ENOSPC);
  EXPECT_EQ(Head(), first);
  EXPECT_EQ(store_->Log(Head())->size(), 2u);
  EXPECT_EQ(Cat(first, "f"), "first");
  // Nothing of the failed import reached the Kv.
  EXPECT_EQ(base->Stats(kv::Cf::kCommits)->entries, 2u);

  // A missing directory fails too, and leaves the head alone.
  fault.FailWritesAfter(-1);
  auto missing = store_->Import(tmp_ / "no/such/dir", ImportOptions{});
  EXPECT_EQ(missing.status().code(), ENOENT);
  EXPECT_EQ(Head(), first);
  // A file that is not a directory.
  EXPECT_EQ(store_->Import(tmp_ / "f", ImportOptions{}).status().code(), ENOTDIR);
  EXPECT_EQ(Head(), first);

  // Once writes work again the same import succeeds and reads back.
  ObjectId second = Import(tmp_.path());
  EXPECT_EQ(store_->GetCommit(second)->parents[0], first);
  store_->objects().ClearCache();
  EXPECT_EQ(Cat(second, "f"), TextBytes(100000, 9));
  EXPECT_EQ(Cat(second, "d/g"), RandomBytes(3 << 20, 10));
  EXPECT_TRUE(store_->Verify({})->ok());

  // Failing reads fail the import cleanly as well.
  WriteFile(tmp_ / "f", "third");
  fault.FailReads(true);
  EXPECT_EQ(store_->Import(tmp_.path(), ImportOptions{}).status().code(), EIO);
  fault.FailReads(false);
  EXPECT_EQ(Head(), second);
  // Fork and delete with failing writes change nothing.
  fault.FailWritesAfter(0, EIO);
  EXPECT_EQ(store_->Fork("x", "main").code(), EIO);
  EXPECT_EQ(store_->DeleteBranch("main").code(), EIO);
  fault.FailWritesAfter(-1);
  EXPECT_EQ(store_->Branches()->size(), 1u);
  EXPECT_EQ(Head(), second);
  store_.reset();
}

TEST_F(StoreTest, UnreadableFileFailsImport) {
  WriteFile(tmp_ / "ok", "fine");
  ObjectId first = Import(tmp_.path());
  WriteFile(tmp_ / "secret", "hidden");
  chmod((tmp_ / "secret").c_str(), 0);
  chmod(tmp_.path().c_str(), 0755);
  // Root reads mode-000 files: drop this thread's filesystem identity (and with it the
  // capabilities that bypass permission checks) while importing.
  int old_fsuid = setfsuid(65534);
  auto r = store_->Import(tmp_.path(), ImportOptions{});
  setfsuid(old_fsuid);
  EXPECT_EQ(r.status().code(), EACCES) << r.status().message();
  EXPECT_EQ(Head(), first);
}

}  // namespace
}  // namespace layerfs
