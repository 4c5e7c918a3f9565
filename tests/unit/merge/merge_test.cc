// Merge without FUSE: merge bases (criss-cross), the tree merge's clean cases and each conflict
// kind on hand-built trees, shared subtrees never opened, and merges applied to a Workspace.
#include "merge/merge.h"

#include <gtest/gtest.h>

#include <map>

#include "history/file_content.h"
#include "kv/kv.h"
#include "merge/merge_into.h"
#include "merge/renames.h"
#include "objects/tree.h"
#include "workspace/workspace.h"

namespace layerfs::merge {
namespace {

class MergeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kv_ = kv::NewMemKv();
    auto st = Store::OpenOnKv(kv_.get(), Policy{});
    ASSERT_TRUE(st.ok()) << st.status().message();
    store_ = std::move(*st);
  }

  TreeEntry File(const std::string& name, const std::string& content, uint32_t mode = 0644) {
    TreeEntry e;
    e.name = name;
    e.type = EntryType::kFile;
    e.mode = mode;
    e.size = content.size();
    auto c = history::WriteContent(store_->objects(), content, nullptr);
    EXPECT_TRUE(c.ok());
    e.id = c->id;
    e.chunked = c->chunked;
    return e;
  }
  TreeEntry Link(const std::string& name, const std::string& target) {
    TreeEntry e;
    e.name = name;
    e.type = EntryType::kSymlink;
    e.mode = 0777;
    e.target = target;
    e.size = target.size();
    return e;
  }
  TreeEntry Dir(const std::string& name, std::vector<TreeEntry> entries, uint32_t mode = 0755) {
    TreeEntry e;
    e.name = name;
    e.type = EntryType::kDir;
    e.mode = mode;
    e.id = Tree(entries);
    for (const auto& c : entries) {
      e.subtree_entries += 1 + (c.type == EntryType::kDir ? c.subtree_entries : 0);
      if (c.type != EntryType::kSymlink) e.size += c.size;
    }
    return e;
  }
  ObjectId Tree(std::vector<TreeEntry> entries) {
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    auto put = store_->objects().Put(objects::Kind::kTree, objects::EncodeTree(entries), std::nullopt);
    EXPECT_TRUE(put.ok());
    EXPECT_TRUE(store_->objects().Flush().ok());
    return put->id;
  }
  // path -> content ("" for directories, "->target" for symlinks) of a merged tree.
  std::map<std::string, std::string> Flatten(const ObjectId& tree, objects::Txn* txn, const std::string& prefix = "") {
    std::map<std::string, std::string> out;
    auto entries = store_->ReadTree(tree, txn);
    EXPECT_TRUE(entries.ok()) << entries.status().message();
    for (const auto& e : *entries) {
      std::string p = prefix + e.name;
      if (e.type == EntryType::kDir) {
        out[p] = "";
        for (auto& [k, v] : Flatten(e.id, txn, p + "/")) out[k] = v;
      } else if (e.type == EntryType::kSymlink) {
        out[p] = "->" + e.target;
      } else {
        auto c = history::ReadContent(store_->objects(), e.id, e.chunked, txn);
        EXPECT_TRUE(c.ok());
        out[p] = *c;
      }
    }
    return out;
  }
  TreeMergeResult Merge(const ObjectId& b, const ObjectId& o, const ObjectId& t, objects::Txn* txn,
                        Favor favor = Favor::kNone) {
    TreeMergeOptions opts;
    opts.favor = favor;
    auto r = MergeTrees(*store_, b, o, t, opts, txn);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : TreeMergeResult{};
  }
  // A Commit of `tree` on `branch` after its head (or with `parents`).
  ObjectId Commit(const std::string& branch, const ObjectId& tree, std::vector<ObjectId> more = {}) {
    auto head = store_->BranchHead(branch);
    EXPECT_TRUE(head.ok());
    uint64_t files = 0, bytes = 0;
    auto listing = store_->ReadTree(tree);
    EXPECT_TRUE(listing.ok());
    std::vector<TreeEntry> entries = listing.ok() ? *listing : std::vector<TreeEntry>();
    for (const auto& e : entries) {
      files += 1 + (e.type == EntryType::kDir ? e.subtree_entries : 0);
      if (e.type != EntryType::kSymlink) bytes += e.size;
    }
    auto id = store_->CommitTree(branch, tree, *head, "c", bytes, files, nullptr, nullptr, more);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return *id;
  }

  std::unique_ptr<kv::Kv> kv_;
  std::unique_ptr<Store> store_;
};

TEST_F(MergeTest, CleanCases) {
  const std::string text = "1\n2\n3\n4\n5\n6\n7\n8\n";
  ObjectId b = Tree({File("t", text), File("same", "x"), File("mode", "m"), File("gone", "g"), Link("l", "a"),
                     Dir("d", {File("in", "i")})});
  ObjectId o = Tree({File("t", "ONE\n2\n3\n4\n5\n6\n7\n8\n"), File("same", "y"), File("mode", "m", 0755),
                     File("ours-new", "n"), Link("l", "b"), Dir("d", {File("in", "i")})});
  TreeEntry tin = File("in", "i");
  tin.xattrs = {{"user.k", "v"}};
  ObjectId t = Tree({File("t", "1\n2\n3\n4\n5\n6\n7\nEIGHT\n"), File("same", "y"), File("mode", "M"), Link("l", "a"),
                     Dir("d", {tin})});
  objects::Txn txn;
  auto r = Merge(b, o, t, &txn);
  EXPECT_TRUE(r.conflicts.empty());
  auto f = Flatten(r.root, &txn);
  std::map<std::string, std::string> want = {{"t", "ONE\n2\n3\n4\n5\n6\n7\nEIGHT\n"}, {"same", "y"}, {"mode", "M"},
                                             {"ours-new", "n"}, {"l", "->b"}, {"d", ""}, {"d/in", "i"}};
  EXPECT_EQ(f, want);
  auto entries = store_->ReadTree(r.root, &txn);
  ASSERT_TRUE(entries.ok());
  for (const auto& e : *entries)
    if (e.name == "mode") {
      EXPECT_EQ(e.mode, 0755u);  // ours' mode with theirs' content
    }
  auto sub = store_->ReadTree(std::find_if(entries->begin(), entries->end(), [](auto& e) { return e.name == "d"; })->id, &txn);
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ((*sub)[0].xattrs.size(), 1u);  // theirs' xattr
  EXPECT_EQ(r.entries, 7u);
}

TEST_F(MergeTest, EachConflictKind) {
  const std::string bin = std::string("\0bin", 4);
  ObjectId b = Tree({File("text", "a\nb\nc\n"), File("bin", bin), File("md", "m"), File("mode", "x"),
                     Link("sym", "t0"), File("ty", "file")});
  ObjectId o = Tree({File("text", "A\nb\nc\n"), File("bin", bin + "o"), File("aa", "ours\n"), File("mode", "x", 0700),
                     Link("sym", "t1"), Dir("ty", {File("f", "f")})});
  ObjectId t = Tree({File("text", "Z\nb\nc\n"), File("bin", bin + "t"), File("md", "m2"), File("aa", "theirs\n"),
                     File("mode", "x", 0600), Link("sym", "t2"), File("ty", "file2")});
  objects::Txn txn;
  auto r = Merge(b, o, t, &txn);
  std::map<std::string, std::string> kinds;
  for (const auto& c : r.conflicts) kinds[c.path] = ConflictKindName(c.kind);
  std::map<std::string, std::string> want = {{"aa", "add/add"},       {"bin", "binary"},  {"md", "modify/delete"},
                                             {"mode", "attributes"}, {"sym", "symlink"}, {"text", "content"},
                                             {"ty", "type"}};
  EXPECT_EQ(kinds, want);
  auto f = Flatten(r.root, &txn);
  EXPECT_EQ(f["text"], "<<<<<<< ours\nA\n=======\nZ\n>>>>>>> theirs\nb\nc\n");
  EXPECT_EQ(f["bin"], bin + "o");
  EXPECT_EQ(f["bin~ours"], bin + "o");
  EXPECT_EQ(f["bin~theirs"], bin + "t");
  EXPECT_EQ(f["md"], "m2");          // the changed side stays
  EXPECT_EQ(f["ty"], "");            // the directory stays at the path...
  EXPECT_EQ(f["ty~theirs"], "file2");  // ...and the file goes beside it
  EXPECT_EQ(f["sym"], "->t1");
  EXPECT_EQ(f["sym~theirs"], "->t2");
  for (const auto& c : r.conflicts)
    if (c.path == "bin") {
      EXPECT_EQ(c.sides, (std::vector<std::string>{"bin~ours", "bin~theirs"}));
    }

  // -X theirs settles every kind with theirs' side.
  objects::Txn txn2;
  auto x = Merge(b, o, t, &txn2, Favor::kTheirs);
  EXPECT_TRUE(x.conflicts.empty());
  auto g = Flatten(x.root, &txn2);
  EXPECT_EQ(g["text"], "Z\nb\nc\n");
  EXPECT_EQ(g["bin"], bin + "t");
  EXPECT_EQ(g["md"], "m2");
  EXPECT_EQ(g["ty"], "file2");
  EXPECT_EQ(g["sym"], "->t2");
  EXPECT_EQ(g.count("bin~theirs"), 0u);
}

TEST_F(MergeTest, SideFileNamesNeverCollide) {
  const std::string bin = std::string("\0", 1);
  ObjectId b = Tree({File("x", bin + "0"), File("x~theirs", "taken")});
  ObjectId o = Tree({File("x", bin + "1"), File("x~theirs", "taken")});
  ObjectId t = Tree({File("x", bin + "2"), File("x~theirs", "taken")});
  objects::Txn txn;
  auto r = Merge(b, o, t, &txn);
  ASSERT_EQ(r.conflicts.size(), 1u);
  EXPECT_EQ(r.conflicts[0].sides, (std::vector<std::string>{"x~ours", "x~theirs~1"}));
  auto f = Flatten(r.root, &txn);
  EXPECT_EQ(f["x~theirs"], "taken");
  EXPECT_EQ(f["x~theirs~1"], bin + "2");
}

TEST_F(MergeTest, SharedSubtreesAreNeverOpened) {
  // Subtrees identical on both sides, or unchanged on one, are taken by id: their records can be
  // missing altogether and the merge still succeeds.
  TreeEntry big = Dir("big", {File("a", "a"), Dir("deep", {File("b", "b")})});
  TreeEntry big2 = Dir("big2", {File("c", "c")});
  TreeEntry big2_theirs = Dir("big2", {File("c", "changed")});
  ObjectId b = Tree({big, big2, File("f", "1\n2\n3\n")});
  ObjectId o = Tree({big, big2, File("f", "one\n2\n3\n")});
  ObjectId t = Tree({big, big2_theirs, File("f", "1\n2\nthree\n")});
  kv::Batch del;
  for (const auto& id : {big.id, big2.id, big2_theirs.id}) del.Delete(kv::Cf::kTrees, id.AsKey());
  ASSERT_TRUE(kv_->Write(del, true).ok());
  store_->objects().ClearCache();
  objects::Txn txn;
  auto r = Merge(b, o, t, &txn);
  EXPECT_TRUE(r.conflicts.empty());
  auto entries = store_->ReadTree(r.root, &txn);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].id, big.id);
  EXPECT_EQ((*entries)[1].id, big2_theirs.id);
  EXPECT_EQ(r.entries, 3u + big.subtree_entries + big2_theirs.subtree_entries);
}

TEST_F(MergeTest, DeletedDirectoryAgainstChangesInside) {
  ObjectId b = Tree({Dir("d", {File("keep", "k"), File("edit", "e")})});
  ObjectId o = Tree({});
  ObjectId t = Tree({Dir("d", {File("keep", "k"), File("edit", "E")})});
  objects::Txn txn;
  auto r = Merge(b, o, t, &txn);
  ASSERT_EQ(r.conflicts.size(), 1u);
  EXPECT_EQ(r.conflicts[0].path, "d/edit");
  EXPECT_EQ(r.conflicts[0].kind, ConflictKind::kModifyDelete);
  auto f = Flatten(r.root, &txn);
  EXPECT_EQ(f, (std::map<std::string, std::string>{{"d", ""}, {"d/edit", "E"}}));
}

std::string Lines(int n, int changed = 0, const std::string& as = "") {
  std::string s;
  for (int i = 1; i <= n; i++) s += (i == changed ? as : std::to_string(i) + " some words on the line") + "\n";
  return s;
}

TEST_F(MergeTest, EditsFollowARenameIntoANewDirectory) {
  // Ours moves r (editing line 15) into a directory theirs never had; theirs edits line 5 and
  // changes the mode. The merge has both edits and theirs' mode at the new path, nothing at r.
  ObjectId b = Tree({File("r", Lines(20)), File("other", "o")});
  ObjectId o = Tree({Dir("d", {Dir("new", {File("moved", Lines(20, 15, "fifteen"))})}), File("other", "o")});
  ObjectId t = Tree({File("r", Lines(20, 5, "five"), 0755), File("other", "o2")});
  objects::Txn txn;
  auto r = Merge(b, o, t, &txn);
  EXPECT_TRUE(r.conflicts.empty());
  std::string want = Lines(20, 15, "fifteen");
  want.replace(want.find("5 some"), std::string("5 some words on the line").size(), "five");
  EXPECT_EQ(Flatten(r.root, &txn), (std::map<std::string, std::string>{
                                        {"d", ""}, {"d/new", ""}, {"d/new/moved", want}, {"other", "o2"}}));
  auto d = store_->ReadTree(r.root, &txn);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->front().subtree_entries, 2u);  // sums of opened directories stay right
}

TEST_F(MergeTest, RenamesOnTheirsTakeOursEditsAndConflictsLandAtTheNewPath) {
  ObjectId b = Tree({File("a.txt", Lines(10)), File("b.txt", Lines(10))});
  ObjectId o = Tree({File("a.txt", Lines(10, 3, "ours")), File("b.txt", Lines(10, 4, "ours"))});
  ObjectId t = Tree({File("a2.txt", Lines(10, 8, "theirs")), File("b2.txt", Lines(10, 4, "theirs"))});
  objects::Txn txn;
  auto r = Merge(b, o, t, &txn);
  auto f = Flatten(r.root, &txn);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f.count("a.txt") + f.count("b.txt"), 0u);
  EXPECT_NE(f["a2.txt"].find("ours\n"), std::string::npos);
  EXPECT_NE(f["a2.txt"].find("theirs\n"), std::string::npos);
  ASSERT_EQ(r.conflicts.size(), 1u);  // b: both changed line 4, reported at b2.txt
  EXPECT_EQ(r.conflicts[0].path, "b2.txt");
  EXPECT_EQ(r.conflicts[0].kind, ConflictKind::kContent);
  EXPECT_NE(f["b2.txt"].find("<<<<<<< "), std::string::npos);
}

TEST_F(MergeTest, RenameDeleteRenameRenameAndBothTheSame) {
  const std::string p = Lines(6), q = Lines(7), s = Lines(8);
  ObjectId b = Tree({File("p", p), File("q", q), File("s", s)});
  ObjectId o = Tree({File("p1", p), File("q1", q), File("s2", Lines(8, 1, "ours"))});
  ObjectId t = Tree({File("q2", q), File("s2", Lines(8, 8, "theirs"))});
  objects::Txn txn;
  auto r = Merge(b, o, t, &txn);
  std::map<std::string, std::string> kinds;
  for (const auto& c : r.conflicts) kinds[c.path] = ConflictKindName(c.kind);
  // As Git reports them: rename/delete at the new path; rename/rename at the old and both new
  // paths; s renamed to s2 on both sides merges against s.
  EXPECT_EQ(kinds, (std::map<std::string, std::string>{
                       {"p1", "rename/delete"}, {"q", "rename/rename"}, {"q1", "rename/rename"}, {"q2", "rename/rename"}}));
  auto f = Flatten(r.root, &txn);
  EXPECT_EQ(f.size(), 4u);
  EXPECT_EQ(f["p1"], p);
  EXPECT_EQ(f["q1"], q);
  EXPECT_EQ(f["q2"], q);
  EXPECT_NE(f["s2"].find("ours\n"), std::string::npos);
  EXPECT_NE(f["s2"].find("theirs\n"), std::string::npos);
  // -X theirs settles them with theirs' side: p1 goes, q2 stays alone.
  objects::Txn txn2;
  auto x = Merge(b, o, t, &txn2, Favor::kTheirs);
  EXPECT_TRUE(x.conflicts.empty());
  auto g = Flatten(x.root, &txn2);
  EXPECT_EQ(g.count("p1") + g.count("q1") + g.count("q"), 0u);
  EXPECT_EQ(g.count("q2"), 1u);
}

TEST_F(MergeTest, RenameNeedsHalfTheBytesAndPrefersTheSameBaseName) {
  // 20 lines of one length, 9 rewritten: still a rename (55%); 11 rewritten: a delete and an add.
  auto rewrite = [](int n) {
    std::string s;
    for (int i = 10; i < 30; i++) s += (i < 10 + n ? "NEW LINE " : "old line ") + std::to_string(i) + "\n";
    return s;
  };
  const std::string base = rewrite(0);
  EXPECT_GE(Similarity(base, rewrite(9)), 50);
  EXPECT_LT(Similarity(base, rewrite(11)), 50);
  EXPECT_EQ(Similarity("", ""), 0);
  ObjectId b = Tree({File("near", base), File("far", base + "x\n")});
  ObjectId o = Tree({File("near2", rewrite(9)), File("far2", rewrite(11) + "x\n")});
  auto renames = FindRenames(*store_, b, o, nullptr);  // every source

  ASSERT_TRUE(renames.ok()) << renames.status().message();
  ASSERT_EQ(renames->size(), 1u);
  EXPECT_EQ((*renames)[0].from, "near");
  EXPECT_EQ((*renames)[0].to, "near2");
  // Identical content: the destination with the source's base name is paired.
  std::string same = Lines(5);
  ObjectId b2 = Tree({File("x", same), Dir("d", {File("y", same)})});
  ObjectId o2 = Tree({Dir("e", {File("y", same), File("x", same)})});
  auto r2 = FindRenames(*store_, b2, o2, nullptr);
  ASSERT_TRUE(r2.ok());
  ASSERT_EQ(r2->size(), 2u);
  EXPECT_EQ((*r2)[0].from, "d/y");
  EXPECT_EQ((*r2)[0].to, "e/y");
  EXPECT_EQ((*r2)[1].from, "x");
  EXPECT_EQ((*r2)[1].to, "e/x");
}

TEST_F(MergeTest, MergeBasesOfForksAndCrissCross) {
  ObjectId a = Commit("main", Tree({File("f", "1\n2\n3\n4\n5\n")}));
  ASSERT_TRUE(store_->Fork("x", "main").ok());
  ASSERT_TRUE(store_->Fork("y", "main").ok());
  ObjectId b1 = Commit("x", Tree({File("f", "ONE\n2\n3\n4\n5\n")}));
  ObjectId c1 = Commit("y", Tree({File("f", "1\n2\n3\n4\nFIVE\n")}));
  auto bases = MergeBases(*store_, {b1}, {c1});
  ASSERT_TRUE(bases.ok());
  EXPECT_EQ(*bases, std::vector<ObjectId>{a});
  // Criss-cross: each side merges the other's first commit.
  const ObjectId both = Tree({File("f", "ONE\n2\n3\n4\nFIVE\n")});
  ObjectId m1 = Commit("x", both, {c1});
  ObjectId m2 = Commit("y", both, {b1});
  ObjectId x2 = Commit("x", Tree({File("f", "ONE\nTWO\n3\n4\nFIVE\n")}));
  ObjectId y2 = Commit("y", Tree({File("f", "ONE\n2\n3\nFOUR\nFIVE\n")}));
  (void)m1;
  (void)m2;
  bases = MergeBases(*store_, {x2}, {y2});
  ASSERT_TRUE(bases.ok());
  std::vector<ObjectId> got = *bases, want = {b1, c1};
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  objects::Txn txn;
  auto m = MergeCommits(*store_, x2, y2, {}, &txn);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->bases.size(), 2u);
  EXPECT_TRUE(m->tree.conflicts.empty());
  EXPECT_EQ(Flatten(m->tree.root, &txn)["f"], "ONE\nTWO\n3\nFOUR\nFIVE\n");
  auto anc = IsAncestor(*store_, a, y2);
  ASSERT_TRUE(anc.ok());
  EXPECT_TRUE(*anc);
  anc = IsAncestor(*store_, x2, y2);
  ASSERT_TRUE(anc.ok());
  EXPECT_FALSE(*anc);
}

TEST_F(MergeTest, ResolveParentsAndAncestors) {
  Commit("main", Tree({File("f", "1")}));
  ASSERT_TRUE(store_->Fork("x", "main").ok());
  ObjectId x1 = Commit("x", Tree({File("f", "x")}));
  ObjectId m1 = Commit("main", Tree({File("f", "m")}));
  ObjectId merge = Commit("main", Tree({File("f", "xm")}), {x1});
  EXPECT_EQ(*store_->Resolve("main"), merge);
  EXPECT_EQ(*store_->Resolve("main^"), m1);
  EXPECT_EQ(*store_->Resolve("main^1"), m1);
  EXPECT_EQ(*store_->Resolve("main^2"), x1);
  EXPECT_EQ(*store_->Resolve("main^0"), merge);
  EXPECT_EQ(*store_->Resolve("main^2~1"), *store_->Resolve("main~2"));
  EXPECT_EQ(store_->Resolve("main^3").status().code(), ENOENT);
  EXPECT_EQ(store_->Resolve("main^x").status().code(), EINVAL);
}

class MergeIntoTest : public MergeTest {
 protected:
  std::unique_ptr<workspace::Workspace> OpenWs(const std::string& branch) {
    auto ws = workspace::Workspace::Open(*store_, {.read_only = false, .branch = branch, .commit = {}});
    EXPECT_TRUE(ws.ok()) << ws.status().message();
    return ws.ok() ? std::move(*ws) : nullptr;
  }
  std::string Read(workspace::Workspace& ws, const std::string& path) {
    auto a = ws.LookupPath(path);
    if (!a.ok()) return "<" + a.status().message() + ">";
    auto d = ws.Read(a->ino, 0, a->size);
    return d.ok() ? *d : "<unreadable>";
  }
  void Write(workspace::Workspace& ws, const std::string& path, const std::string& data) {
    auto a = ws.LookupPath(path);
    workspace::Ino ino;
    if (a.ok()) {
      ino = a->ino;
      ASSERT_TRUE(ws.SetAttr(ino, {.size = 0}).ok());
    } else {
      auto n = ws.Mknod(workspace::kRootIno, path, S_IFREG | 0644, 0, {});
      ASSERT_TRUE(n.ok()) << n.status().message();
      ino = n->ino;
    }
    ASSERT_TRUE(ws.Write(ino, 0, data).ok());
  }
};

TEST_F(MergeIntoTest, CleanMergeKeepsUnrelatedUncommittedChanges) {
  Commit("main", Tree({File("a", "1\n2\n3\n"), File("b", "b")}));
  ASSERT_TRUE(store_->Fork("feat", "main").ok());
  Commit("feat", Tree({File("a", "1\n2\nTHREE\n"), File("b", "b"), File("c", "new")}));
  auto ws = OpenWs("main");
  Write(*ws, "a", "ONE\n2\n3\n");
  ASSERT_TRUE(ws->Commit("ours").ok());
  Write(*ws, "local", "uncommitted");
  MergeIntoOptions o;
  o.source = *store_->Resolve("feat");
  o.source_label = "feat";
  o.branch = "main";
  o.ws = ws.get();
  o.keep_conflicts = true;
  auto r = MergeInto(*store_, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->commit);
  EXPECT_FALSE(r->fast_forward);
  EXPECT_EQ(Read(*ws, "a"), "ONE\n2\nTHREE\n");
  EXPECT_EQ(Read(*ws, "c"), "new");
  EXPECT_EQ(Read(*ws, "local"), "uncommitted");
  EXPECT_EQ(ws->base_commit(), *r->commit);
  // The merge Commit holds the merge, not the uncommitted file; that stays uncommitted.
  EXPECT_FALSE(store_->Lookup(*r->commit, "local").ok());
  auto changes = ws->Changes();
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_EQ((*changes)[0].path, "local");
  auto c = ws->Commit("next");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Flatten(store_->GetCommit(*c)->root, nullptr),
            (std::map<std::string, std::string>{{"a", "ONE\n2\nTHREE\n"}, {"b", "b"}, {"c", "new"}, {"local", "uncommitted"}}));
  auto v = store_->Verify({});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok()) << v->problems[0];
}

TEST_F(MergeIntoTest, RefusesToOverwriteUncommittedChanges) {
  Commit("main", Tree({File("a", "a")}));
  ASSERT_TRUE(store_->Fork("feat", "main").ok());
  Commit("feat", Tree({File("a", "theirs")}));
  auto ws = OpenWs("main");
  Write(*ws, "a", "mine");
  const ObjectId head = *store_->Resolve("main");
  MergeIntoOptions o;
  o.source = *store_->Resolve("feat");
  o.source_label = "feat";
  o.branch = "main";
  o.ws = ws.get();
  auto r = MergeInto(*store_, o);
  EXPECT_EQ(r.status().code(), EBUSY);
  EXPECT_NE(r.status().message().find("a"), std::string::npos);
  EXPECT_EQ(*store_->Resolve("main"), head);
  EXPECT_EQ(Read(*ws, "a"), "mine");
}

TEST_F(MergeIntoTest, ConflictsThenAbortThenContinue) {
  const std::string bin = std::string("\0", 1);
  Commit("main", Tree({File("t", "1\n2\n3\n"), File("b", bin + "0"), Dir("d", {File("x", "x")})}));
  ASSERT_TRUE(store_->Fork("feat", "main").ok());
  Commit("feat", Tree({File("t", "1\n2\nTHEIRS\n"), File("b", bin + "t"), Dir("d", {File("x", "x"), File("y", "y")})}));
  Commit("main", Tree({File("t", "1\n2\nOURS\n"), File("b", bin + "o"), Dir("d", {File("x", "x")})}));
  auto ws = OpenWs("main");
  const ObjectId head = *store_->Resolve("main");
  MergeIntoOptions o;
  o.source = *store_->Resolve("feat");
  o.source_label = "feat";
  o.branch = "main";
  o.ws = ws.get();
  o.keep_conflicts = true;
  auto r = MergeInto(*store_, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->stopped);
  EXPECT_FALSE(r->commit);
  EXPECT_EQ(r->conflicts.size(), 2u);
  EXPECT_EQ(*store_->Resolve("main"), head);
  EXPECT_EQ(Read(*ws, "t"), "1\n2\n<<<<<<< main\nOURS\n=======\nTHEIRS\n>>>>>>> feat\n");
  EXPECT_EQ(Read(*ws, "b~theirs"), bin + "t");
  EXPECT_EQ(Read(*ws, "d/y"), "y");
  auto state = ReadMergeState(*ws);
  ASSERT_TRUE(state.ok() && state->has_value());
  // Reopened (a daemon restart), the record is still there.
  ws.reset();
  ws = OpenWs("main");
  state = ReadMergeState(*ws);
  ASSERT_TRUE(state.ok() && state->has_value());
  EXPECT_EQ((*state)->conflicts.size(), 2u);
  // Unresolved: --continue refuses and names them.
  auto c = ContinueMerge(*store_, *ws, "");
  EXPECT_EQ(c.status().code(), EBUSY);
  EXPECT_NE(c.status().message().find("b~ours"), std::string::npos);
  // Abort restores every path.
  ASSERT_TRUE(AbortMerge(*store_, *ws).ok());
  EXPECT_EQ(Read(*ws, "t"), "1\n2\nOURS\n");
  EXPECT_EQ(Read(*ws, "b"), bin + "o");
  EXPECT_EQ(ws->LookupPath("b~theirs").status().code(), ENOENT);
  EXPECT_EQ(ws->LookupPath("d/y").status().code(), ENOENT);
  auto changes = ws->Changes();
  ASSERT_TRUE(changes.ok());
  EXPECT_TRUE(changes->empty());
  // Again, resolved this time.
  o.ws = ws.get();
  r = MergeInto(*store_, o);
  ASSERT_TRUE(r.ok() && r->stopped);
  Write(*ws, "t", "1\n2\nBOTH\n");
  for (const char* side : {"b~ours", "b~theirs"}) ASSERT_TRUE(ws->Unlink(workspace::kRootIno, side).ok());
  auto done = ContinueMerge(*store_, *ws, "");
  ASSERT_TRUE(done.ok()) << done.status().message();
  auto mc = store_->GetCommit(*done->commit);
  ASSERT_TRUE(mc.ok());
  EXPECT_EQ(mc->parents, (std::vector<ObjectId>{head, o.source}));
  EXPECT_EQ(Flatten(mc->root, nullptr),
            (std::map<std::string, std::string>{{"t", "1\n2\nBOTH\n"}, {"b", bin + "o"}, {"d", ""}, {"d/x", "x"}, {"d/y", "y"}}));
  state = ReadMergeState(*ws);
  ASSERT_TRUE(state.ok());
  EXPECT_FALSE(state->has_value());
}

TEST_F(MergeIntoTest, StoreOnlyMergeChangesNothingOnConflict) {
  Commit("main", Tree({File("t", "1\n")}));
  ASSERT_TRUE(store_->Fork("feat", "main").ok());
  Commit("feat", Tree({File("t", "theirs\n")}));
  const ObjectId head = Commit("main", Tree({File("t", "ours\n")}));
  MergeIntoOptions o;
  o.source = *store_->Resolve("feat");
  o.source_label = "feat";
  o.branch = "main";
  auto r = MergeInto(*store_, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->conflicts.size(), 1u);
  EXPECT_FALSE(r->commit);
  EXPECT_EQ(*store_->Resolve("main"), head);
  o.ff = FastForward::kOnly;
  EXPECT_EQ(MergeInto(*store_, o).status().code(), kNotFastForward);
  o.ff = FastForward::kAllow;
  o.strategy = Strategy::kTheirs;
  r = MergeInto(*store_, o);
  ASSERT_TRUE(r.ok() && r->commit);
  EXPECT_EQ(Flatten(store_->GetCommit(*r->commit)->root, nullptr), (std::map<std::string, std::string>{{"t", "theirs\n"}}));
  r = MergeInto(*store_, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->up_to_date);
}

}  // namespace
}  // namespace layerfs::merge

namespace layerfs::merge {
namespace {

TEST_F(MergeIntoTest, CherryPickStopsOnConflictsAndContinuesWithOneParent) {
  Commit("main", Tree({File("t", "1\n2\n3\n")}));
  ASSERT_TRUE(store_->Fork("feat", "main").ok());
  const ObjectId pick = Commit("feat", Tree({File("t", "1\n2\nfeat\n"), File("n", "new")}));
  const ObjectId head = Commit("main", Tree({File("t", "1\n2\nmain\n")}));
  auto ws = OpenWs("main");
  PickOptions o;
  o.commit = pick;
  o.label = "feat";
  o.branch = "main";
  o.ws = ws.get();
  o.keep_conflicts = true;
  auto r = Pick(*store_, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->stopped);
  EXPECT_EQ(Read(*ws, "n"), "new");
  auto state = ReadMergeState(*ws);
  ASSERT_TRUE(state.ok() && state->has_value());
  EXPECT_EQ((*state)->op, MergeOp::kCherryPick);
  Write(*ws, "t", "1\n2\nboth\n");
  auto done = ContinueMerge(*store_, *ws, "");
  ASSERT_TRUE(done.ok()) << done.status().message();
  auto c = store_->GetCommit(*done->commit);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->parents, std::vector<ObjectId>{head});
  EXPECT_EQ(c->message, "c");
  // A revert of the pick on top: t back to main's, n gone.
  o.commit = *done->commit;
  o.revert = true;
  o.label = "HEAD";
  auto rv = Pick(*store_, o);
  ASSERT_TRUE(rv.ok()) << rv.status().message();
  ASSERT_TRUE(rv->commit);
  EXPECT_EQ(Read(*ws, "t"), "1\n2\nmain\n");
  EXPECT_EQ(ws->LookupPath("n").status().code(), ENOENT);
}

}  // namespace
}  // namespace layerfs::merge
