// Push, fetch, clone and pull over in-memory remotes: what travels, what a cut or a race leaves,
// and what a refused push says.
#include <thread>

#include "cli/cli.h"
#include "history/keys.h"
#include "remote/pack.h"
#include "sync_fixture.h"
#include "workspace/registry.h"
#include "workspace/workspace.h"

namespace layerfs::testing {
namespace {

using remote::FaultTransport;

TEST_F(SyncTest, PushThenFetchBringsEveryFile) {
  NewRemote();
  Host a = NewHostWithRemote();
  auto files = Tree(40, 1);
  Commit(a, files);
  files["d1/f1"] = "changed";
  files["new/file"] = RandomBytes(100000, 7);
  ObjectId head = Commit(a, files);
  auto pushed = Push(a);
  ASSERT_TRUE(pushed.ok()) << pushed.status().ToString();
  ASSERT_EQ(pushed->refs.size(), 1u);
  EXPECT_EQ(pushed->refs[0].status, "created");
  EXPECT_GT(pushed->sent.objects, 40u);
  EXPECT_EQ(pushed->sent.packs, 1u);
  // The pushing Store now tracks the remote's branch.
  EXPECT_EQ(*a.store->Resolve("origin/main"), head);

  Host b = NewHostWithRemote();
  auto fetched = Fetch(b);
  ASSERT_TRUE(fetched.ok()) << fetched.status().ToString();
  ASSERT_EQ(fetched->refs.size(), 1u);
  EXPECT_EQ(fetched->refs[0].status, "new");
  // All but what b had already (the empty tree of its own first commit).
  EXPECT_EQ(fetched->received.objects, pushed->sent.objects - 1);
  auto at = b.store->Resolve("origin/main");
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  EXPECT_EQ(*at, head);
  for (const auto& [p, c] : files) EXPECT_EQ(Cat(b, head, p), c) << p;
  auto log = b.store->Log(head);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->size(), 3u);  // init, two commits
  auto v = b.store->Verify({});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok()) << v->problems[0];
  EXPECT_EQ(v->missing, 0u);

  // Nothing new: nothing sent, nothing fetched.
  auto again = Push(a);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->refs[0].status, "up-to-date");
  EXPECT_EQ(again->sent.objects, 0u);
  auto refetch = Fetch(b);
  ASSERT_TRUE(refetch.ok());
  EXPECT_EQ(refetch->refs[0].status, "unchanged");
  EXPECT_EQ(refetch->received.objects, 0u);
}

TEST_F(SyncTest, IncrementalPushAndFetchFollowTheChange) {
  auto* fault = NewRemote();
  Host a = NewHostWithRemote();
  Host b = NewHostWithRemote();
  auto files = Tree(300, 3);
  Commit(a, files);
  auto first = Push(a);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(Fetch(b).ok());
  files["d3/f10"] += " one more line\n";
  ObjectId head = Commit(a, files);
  uint64_t read_before = fault->bytes_read();
  auto second = Push(a);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->refs[0].status, "fast-forward");
  // The commit, the root tree, d3's tree and the file's content.
  EXPECT_EQ(second->sent.objects, 4u);
  EXPECT_LT(second->sent.bytes * 20, first->sent.bytes);
  auto fetched = Fetch(b);
  ASSERT_TRUE(fetched.ok());
  EXPECT_EQ(fetched->refs[0].status, "updated");
  EXPECT_EQ(fetched->received.objects, 4u);
  EXPECT_LT(fault->bytes_read() - read_before, first->sent.bytes / 10);
  EXPECT_EQ(Cat(b, head, "d3/f10"), files["d3/f10"]);
}

TEST_F(SyncTest, CloneMakesAStoreOfTheSameHistory) {
  NewRemote();
  Host a = NewHostWithRemote();
  ObjectId head = Commit(a, Tree(20, 5));
  ObjectId side = Commit(a, {{"only/on", "side"}}, "side");
  ASSERT_TRUE(Push(a, {"main", "side"}).ok());
  std::string path = tmp_ / "clone";
  remote::CloneOptions co;
  auto cloned = remote::Clone(Url(), path, co);
  ASSERT_TRUE(cloned.ok()) << cloned.status().ToString();
  EXPECT_EQ(cloned->branches.size(), 2u);
  auto st = Store::Open(path);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ((*st)->seed(), a.store->seed());
  EXPECT_EQ(*(*st)->BranchHead("main"), head);
  EXPECT_EQ(*(*st)->BranchHead("side"), side);
  EXPECT_EQ(*(*st)->Resolve("origin/side"), side);
  auto v = (*st)->Verify({});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok());
  auto remotes = remote::ListRemotes(**st);
  ASSERT_TRUE(remotes.ok());
  ASSERT_EQ(remotes->size(), 1u);
  EXPECT_EQ((*remotes)[0].name, "origin");
  EXPECT_FALSE((*remotes)[0].lazy);
  // A clone into a non-empty directory is refused and leaves it alone.
  auto again = remote::Clone(Url(), path, co);
  EXPECT_EQ(again.status().code(), EEXIST);
  // A failed clone (no such remote) leaves nothing behind.
  std::string bad = tmp_ / "bad";
  EXPECT_FALSE(remote::Clone("file:///mem/none", bad, co).ok());
  EXPECT_FALSE(std::filesystem::exists(bad));
}

TEST_F(SyncTest, PushCutInHalfResumesWithoutResending) {
  auto* fault = NewRemote();
  remote::SetPackTargetForTesting(64 << 10);
  Host a = NewHostWithRemote();
  std::map<std::string, std::string> files;
  // Unrelated contents (RandomBytes of nearby seeds are shifted copies of one stream, which the
  // import rightly stores as deltas of each other): the push is many packs of full records.
  for (int i = 0; i < 60; i++) files["f" + std::to_string(i)] = RandomBytes(20000, 1000003ull * (i + 1));
  ObjectId head = Commit(a, files);
  // Each pack is two writes (pack, index): let five packs through, then the network goes.
  fault->FailAfter(10, ETIMEDOUT, FaultTransport::kBlobWrites);
  auto cut = Push(a);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), ETIMEDOUT);
  uint64_t written_cut = fault->bytes_written();
  fault->Disarm();
  // The remote is as it was: no branch.
  Host probe = NewHostWithRemote();
  auto f0 = Fetch(probe);
  ASSERT_TRUE(f0.ok()) << f0.status().ToString();
  EXPECT_TRUE(f0->refs.empty());
  auto resumed = Push(a);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->refs[0].status, "created");
  uint64_t written_resume = fault->bytes_written() - written_cut;
  // A whole push, for comparison, to a second remote.
  auto* full = NewRemote("full");
  ASSERT_TRUE(remote::AddRemote(*a.store, {"full", Url("full"), false, ""}).ok());
  remote::PushOptions o;
  o.branches = {"main"};
  ASSERT_TRUE(remote::Push(*a.store, "full", o).ok());
  uint64_t whole = full->bytes_written();
  EXPECT_GT(written_cut, whole / 4);
  EXPECT_LT(written_resume, whole - written_cut / 2);
  EXPECT_LT(written_cut + written_resume, whole + whole / 10);
  remote::SetPackTargetForTesting(0);
  Host b = NewHostWithRemote();
  ASSERT_TRUE(Fetch(b).ok());
  for (const auto& [p, c] : files) EXPECT_EQ(Cat(b, head, p), c) << p;
}

TEST_F(SyncTest, NonFastForwardIsRefusedUnlessForced) {
  NewRemote();
  Host a = NewHostWithRemote();
  Host b = NewHostWithRemote();
  Commit(a, {{"x", "1"}});
  ASSERT_TRUE(Push(a).ok());
  ObjectId mine = Commit(b, {{"y", "2"}});  // b never saw a's commit
  auto refused = Push(b);
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(refused->refs[0].status, "rejected");
  EXPECT_NE(refused->refs[0].reason.find("fetch first"), std::string::npos) << refused->refs[0].reason;
  EXPECT_FALSE(refused->all_ok());
  ASSERT_TRUE(Fetch(b).ok());
  auto still = Push(b);
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->refs[0].status, "rejected");
  EXPECT_NE(still->refs[0].reason.find("non-fast-forward"), std::string::npos) << still->refs[0].reason;
  auto forced = Push(b, {"main"}, /*force=*/true);
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(forced->refs[0].status, "forced");
  auto f = Fetch(a);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->refs[0].status, "forced");
  EXPECT_EQ(*a.store->Resolve("origin/main"), mine);
}

TEST_F(SyncTest, AStoreOfAnotherHistoryIsRefused) {
  NewRemote();
  Host a = NewHostWithRemote();
  Commit(a, {{"x", "1"}});
  ASSERT_TRUE(Push(a).ok());
  Host other = NewHostWithRemote("r", false, /*seed=*/7);
  auto p = Push(other);
  EXPECT_EQ(p.status().code(), kDiverged);
  EXPECT_NE(p.status().message().find("another history"), std::string::npos) << p.status().message();
  EXPECT_EQ(Fetch(other).status().code(), kDiverged);
}

TEST_F(SyncTest, ConcurrentPushesOfOneBranchHaveOneWinner) {
  auto* fault = NewRemote();
  Host a = NewHostWithRemote();
  Host b = NewHostWithRemote();
  Commit(a, {{"base", "0"}});
  ASSERT_TRUE(Push(a).ok());
  ASSERT_TRUE(Fetch(b).ok());
  ASSERT_TRUE(b.store->SetBranch("main", *b.store->Resolve("origin/main")).ok());
  ObjectId from_a = Commit(a, {{"base", "0"}, {"a", "from a"}});
  ObjectId from_b = Commit(b, {{"base", "0"}, {"b", "from b"}});
  // b's whole push runs between a's reading the ref and a's compare-and-swap.
  bool once = false;
  Result<remote::PushResult> b_push = Status::Error(EINVAL, "not run");
  fault->SetHook(FaultTransport::kCasRef, [&](FaultTransport::Op, std::string_view) {
    if (once) return;
    once = true;
    b_push = Push(b);
  });
  auto a_push = Push(a);
  fault->SetHook(0, nullptr);
  ASSERT_TRUE(a_push.ok()) << a_push.status().ToString();
  ASSERT_TRUE(b_push.ok()) << b_push.status().ToString();
  EXPECT_EQ(b_push->refs[0].status, "fast-forward");
  EXPECT_EQ(a_push->refs[0].status, "rejected");
  EXPECT_NE(a_push->refs[0].reason.find("moved during the push"), std::string::npos) << a_push->refs[0].reason;
  EXPECT_TRUE(a_push->refs[0].lost_race);
  // Nothing lost: b's commit is the remote's; a still has its own and can see b's.
  Host c = NewHostWithRemote();
  ASSERT_TRUE(Fetch(c).ok());
  EXPECT_EQ(*c.store->Resolve("origin/main"), from_b);
  EXPECT_EQ(Cat(c, from_b, "b"), "from b");
  ASSERT_TRUE(Fetch(a).ok());
  EXPECT_EQ(*a.store->Resolve("origin/main"), from_b);
  EXPECT_EQ(*a.store->BranchHead("main"), from_a);
}

TEST_F(SyncTest, LostRaceToAnAncestorStillPushes) {
  auto* fault = NewRemote();
  Host a = NewHostWithRemote();
  Commit(a, {{"x", "1"}});
  ASSERT_TRUE(Push(a).ok());
  ObjectId mid = Commit(a, {{"x", "2"}});
  ObjectId top = Commit(a, {{"x", "3"}});
  // Someone pushes `mid` (an ancestor of ours) between our read and our swap.
  bool once = false;
  fault->SetHook(FaultTransport::kCasRef, [&](FaultTransport::Op, std::string_view key) {
    if (once) return;
    once = true;
    auto ref = fault->base()->GetRef(key);
    ASSERT_TRUE(ref.ok() && ref->has_value());
    ASSERT_TRUE(fault->base()->CasRef(key, mid.Hex() + "\n", (*ref)->token).ok());
  });
  auto p = Push(a);
  fault->SetHook(0, nullptr);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->refs[0].status, "fast-forward");
  Host b = NewHostWithRemote();
  ASSERT_TRUE(Fetch(b).ok());
  EXPECT_EQ(*b.store->Resolve("origin/main"), top);
}

TEST_F(SyncTest, FetchOfADamagedRemoteFailsAndMovesNoRef) {
  auto* fault = NewRemote();
  Host a = NewHostWithRemote();
  Commit(a, Tree(10, 9));
  ASSERT_TRUE(Push(a).ok());
  Host b = NewHostWithRemote();
  for (auto d : {FaultTransport::Damage::kFlip, FaultTransport::Damage::kTruncate}) {
    fault->SetDamage(d, "pack/");
    auto f = Fetch(b);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), EIO) << f.status().ToString();
    EXPECT_FALSE(b.store->Resolve("origin/main").ok());
  }
  fault->SetDamage(FaultTransport::Damage::kFlip, "index/");
  Host c = NewHostWithRemote();
  EXPECT_EQ(Fetch(c).status().code(), EIO);
  fault->SetDamage(FaultTransport::Damage::kNone);
  ASSERT_TRUE(Fetch(b).ok());
  auto v = b.store->Verify({});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok());
}

TEST_F(SyncTest, GcKeepsWhatOnlyRemoteTrackingRefsReach) {
  NewRemote();
  Host a = NewHostWithRemote();
  ObjectId head = Commit(a, Tree(15, 11));
  ASSERT_TRUE(Push(a).ok());
  Host b = NewHostWithRemote();
  ASSERT_TRUE(Fetch(b).ok());
  auto gc = b.store->Gc();
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_EQ(gc->objects_deleted, 0u);
  EXPECT_EQ(Cat(b, head, "d2/f2"), Tree(15, 11)["d2/f2"]);
  // After a gc, a fetch re-examines every pack once (its marks are of an older epoch).
  auto f = Fetch(b);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->received.objects, 0u);
  EXPECT_EQ(f->received.packs, 1u);
  auto f2 = Fetch(b);
  ASSERT_TRUE(f2.ok());
  EXPECT_EQ(f2->received.packs, 0u);
}

TEST_F(SyncTest, PullFastForwardsMergesAndLeavesConflictsAlone) {
  NewRemote();
  Host a = NewHostWithRemote();
  Host b = NewHostWithRemote();
  ASSERT_TRUE(b.store->DeleteBranch("main").ok());  // b starts with no history of its own
  ObjectId first = Commit(a, {{"x", "1"}});
  ASSERT_TRUE(Push(a).ok());
  remote::WorkspaceAccess none;
  EXPECT_EQ(remote::Pull(*b.store, none, "origin", "feature", {}).status().code(), ENOENT);
  auto created = remote::Pull(*b.store, none, "origin", "main", {});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(created->status, "created");
  EXPECT_EQ(*b.store->BranchHead("main"), first);
  ObjectId second = Commit(a, {{"x", "2"}});
  ASSERT_TRUE(Push(a).ok());
  auto ff = remote::Pull(*b.store, none, "origin", "main", {});
  ASSERT_TRUE(ff.ok()) << ff.status().ToString();
  EXPECT_EQ(ff->status, "fast-forward");
  EXPECT_EQ(*ff->old_id, first);
  EXPECT_EQ(*b.store->BranchHead("main"), second);
  EXPECT_EQ(Cat(b, second, "x"), "2");
  auto same = remote::Pull(*b.store, none, "origin", "main", {});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->status, "up-to-date");
  ObjectId mine = Commit(b, {{"x", "2"}, {"y", "b"}});
  auto ahead = remote::Pull(*b.store, none, "origin", "main", {});
  ASSERT_TRUE(ahead.ok());
  EXPECT_EQ(ahead->status, "ahead");
  EXPECT_EQ(*b.store->BranchHead("main"), mine);
  // Diverged: a merge, as `layerfs merge origin/main` would make.
  ObjectId theirs = Commit(a, {{"x", "3"}});
  ASSERT_TRUE(Push(a).ok());
  auto merged = remote::Pull(*b.store, none, "origin", "main", {});
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->status, "merged");
  ObjectId m = **b.store->BranchHead("main");
  EXPECT_EQ(merged->new_id, m);
  EXPECT_EQ(b.store->GetCommit(m)->parents, (std::vector<ObjectId>{mine, theirs}));
  EXPECT_EQ(Cat(b, m, "x"), "3");
  EXPECT_EQ(Cat(b, m, "y"), "b");
  // Both sides change x: conflicts, and without a mount to resolve them nothing changes.
  Commit(b, {{"x", "b's"}, {"y", "b"}});
  ObjectId before = **b.store->BranchHead("main");
  Commit(a, {{"x", "a's"}});
  ASSERT_TRUE(Push(a).ok());
  auto conflicted = remote::Pull(*b.store, none, "origin", "main", {});
  ASSERT_TRUE(conflicted.ok()) << conflicted.status().ToString();
  EXPECT_EQ(conflicted->status, "conflicts");
  ASSERT_EQ(conflicted->conflicts.size(), 1u);
  EXPECT_EQ(conflicted->conflicts[0].path, "x");
  EXPECT_FALSE(conflicted->stopped);
  EXPECT_EQ(*b.store->BranchHead("main"), before);
}

std::string WsRead(workspace::Workspace& ws, const std::string& name) {
  auto a = ws.Lookup(workspace::kRootIno, name);
  if (!a.ok()) return "<" + a.status().message() + ">";
  auto d = ws.Read(a->ino, 0, 1 << 20);
  return d.ok() ? *d : "<" + d.status().message() + ">";
}

void WsWrite(workspace::Workspace& ws, const std::string& name, const std::string& data) {
  auto a = ws.Lookup(workspace::kRootIno, name);
  if (!a.ok()) a = ws.Mknod(workspace::kRootIno, name, S_IFREG | 0644, 0, {});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  workspace::AttrChange ch;
  ch.size = 0;
  ASSERT_TRUE(ws.SetAttr(a->ino, ch).ok());
  ASSERT_TRUE(ws.Write(a->ino, 0, data).ok());
}

TEST_F(SyncTest, PullMovesAWorkspaceAndCarriesChangesTheUpdateDoesNotTouch) {
  NewRemote();
  Host a = NewHostWithRemote();
  Host b = NewHostWithRemote();
  ASSERT_TRUE(b.store->DeleteBranch("main").ok());
  Commit(a, {{"x", "1"}, {"y", "1"}, {"d/z", "1"}});
  ASSERT_TRUE(Push(a).ok());
  remote::WorkspaceAccess none;
  ASSERT_TRUE(remote::Pull(*b.store, none, "origin", "main", {}).ok());
  workspace::WorkspaceRegistry reg(*b.store);
  remote::WorkspaceAccess wsa{&reg, {}};
  {
    auto ws = reg.Get("main");
    ASSERT_TRUE(ws.ok());
    // No changes: the Workspace just follows.
    ObjectId second = Commit(a, {{"x", "1"}, {"y", "2"}, {"d/z", "1"}});
    ASSERT_TRUE(Push(a).ok());
    auto p = remote::Pull(*b.store, wsa, "origin", "main", {});
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->status, "fast-forward");
    EXPECT_FALSE(p->through_workspace);
    EXPECT_EQ((*ws)->base_commit(), second);
    EXPECT_EQ(WsRead(**ws, "y"), "2");
    // Uncommitted changes to x and a new file; the update changes y and d/z only.
    WsWrite(**ws, "x", "local x");
    WsWrite(**ws, "mine", "new here");
    ObjectId third = Commit(a, {{"x", "1"}, {"y", "3"}, {"d/z", "3"}});
    ASSERT_TRUE(Push(a).ok());
    auto carried = remote::Pull(*b.store, wsa, "origin", "main", {});
    ASSERT_TRUE(carried.ok()) << carried.status().ToString();
    EXPECT_EQ(carried->status, "fast-forward");
    EXPECT_TRUE(carried->through_workspace);
    EXPECT_EQ(*b.store->BranchHead("main"), third);
    EXPECT_EQ((*ws)->base_commit(), third);
    EXPECT_EQ(WsRead(**ws, "x"), "local x");
    EXPECT_EQ(WsRead(**ws, "y"), "3");
    EXPECT_EQ(WsRead(**ws, "mine"), "new here");
    auto changes = (*ws)->Changes();
    ASSERT_TRUE(changes.ok()) << changes.status().ToString();
    std::set<std::string> paths;
    for (const auto& c : *changes) paths.insert(c.path);
    EXPECT_EQ(paths, (std::set<std::string>{"x", "mine"}));
    // A change the update would overwrite: refused, nothing moves.
    WsWrite(**ws, "y", "local y");
    ObjectId fourth = Commit(a, {{"x", "1"}, {"y", "4"}, {"d/z", "3"}});
    ASSERT_TRUE(Push(a).ok());
    auto refused = remote::Pull(*b.store, wsa, "origin", "main", {});
    EXPECT_EQ(refused.status().code(), EBUSY);
    EXPECT_NE(refused.status().message().find("y would be overwritten"), std::string::npos) << refused.status().message();
    EXPECT_EQ(*b.store->BranchHead("main"), third);
    EXPECT_EQ(WsRead(**ws, "y"), "local y");
    EXPECT_EQ(*b.store->Resolve("origin/main"), fourth);
    // Committed, the carried changes are a commit on top of the update.
    auto committed = (*ws)->Commit("mine");
    ASSERT_TRUE(committed.ok()) << committed.status().ToString();
    EXPECT_EQ(Cat(b, *committed, "d/z"), "3");
    EXPECT_EQ(Cat(b, *committed, "x"), "local x");
    EXPECT_EQ(Cat(b, *committed, "mine"), "new here");
    auto info = b.store->GetCommit(*committed);
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->parents, std::vector<ObjectId>{third});
    EXPECT_EQ(info->files, 5u);  // x, y, mine, d, d/z
    auto v = b.store->Verify({*committed});
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->ok()) << v->problems[0];
  }
}

// Commits in the background leave pending records (raw, with a hint this side may not share);
// a push right after such a commit (no encoder has run) encodes what it sends first: the remote
// holds only final records, and a full clone and a lazy Store read every file byte for byte.
TEST_F(SyncTest, PushOfPendingRecordsSendsThemEncoded) {
  NewRemote();
  Host a = NewHostWithRemote();
  a.store->objects().SetDeferring(true);  // deferred commits, no encoder: all stays pending
  workspace::WorkspaceRegistry reg(*a.store);
  std::map<std::string, std::string> files;
  std::vector<ObjectId> commits;
  {
    auto ws = reg.Get("main");
    ASSERT_TRUE(ws.ok()) << ws.status().ToString();
    for (int round = 0; round < 3; round++) {
      // Versions of the same paths: every later record's hint is the earlier, still pending one.
      for (int i = 0; i < 6; i++) {
        std::string name = "f" + std::to_string(i);
        files[name] = TextBytes(20000 + 1000 * i, 100 * round + i) + TextBytes(50000, 7);
        WsWrite(**ws, name, files[name]);
      }
      files["big"] = TextBytes(3 << 20, 9 + round);  // chunked: pending chunks and chunk list
      WsWrite(**ws, "big", files["big"]);
      auto c = (*ws)->Commit("round " + std::to_string(round));
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      commits.push_back(*c);
    }
  }
  ASSERT_GT(a.store->PendingEncodings(), 0u);
  auto pending_in = [](kv::Kv& kv) {
    size_t n = 0;
    for (kv::Cf cf : {kv::Cf::kBlobs, kv::Cf::kTrees}) {
      EXPECT_TRUE(kv.Scan(cf, "", "", [&](auto, auto v) {
                      auto info = objects::ParseRecord(v);
                      EXPECT_TRUE(info.ok());
                      if (info.ok() && info->encoding == objects::Encoding::kPending) n++;
                      return true;
                    }).ok());
    }
    return n;
  };
  ASSERT_GT(pending_in(*a.kv), 10u);
  auto pushed = Push(a);
  ASSERT_TRUE(pushed.ok()) << pushed.status().ToString();
  EXPECT_EQ(pending_in(*a.kv), 0u);  // what the push reached is encoded now, as the encoder would
  // A full copy: every record final, every file as written.
  Host b = NewHostWithRemote();
  ASSERT_TRUE(Fetch(b).ok());
  EXPECT_EQ(pending_in(*b.kv), 0u);
  EXPECT_EQ(b.store->PendingEncodings(), 0u);
  ObjectId head = *b.store->Resolve("origin/main");
  EXPECT_EQ(head, commits.back());
  for (const auto& [p, c] : files) EXPECT_EQ(Cat(b, head, p), c) << p;
  auto v = b.store->Verify({});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok()) << v->problems[0];
  EXPECT_EQ(v->pending, 0u);
  // A lazy Store reads them on demand, as encoded records.
  Host c = NewHostWithRemote("r", /*lazy=*/true);
  ASSERT_TRUE(remote::Fetch(*c.store, "origin", {}).ok());
  for (const auto& [p, content] : files) EXPECT_EQ(Cat(c, head, p), content) << p;
  EXPECT_EQ(pending_in(*c.kv), 0u);
  // The sender's Store still reads the same bytes, and its queue settles without work left.
  for (const auto& [p, content] : files) EXPECT_EQ(Cat(a, head, p), content) << p;
  ASSERT_TRUE(a.store->DrainEncoding().ok());
  EXPECT_EQ(a.store->PendingEncodings(), 0u);
}

// A pack that carries a pending record is refused when read, and a pack cannot be built with one.
TEST_F(SyncTest, PendingRecordsNeverTravelInPacks) {
  std::string content = "pending content";
  std::string rec;
  rec.push_back(static_cast<char>(objects::Kind::kBlob));
  rec.push_back(static_cast<char>(objects::Encoding::kPending));
  rec.push_back(0);                                    // depth
  rec.push_back(static_cast<char>(content.size()));   // decoded size (varint, < 128)
  rec.append(ObjectId{}.AsKey());                      // no hint
  rec.append(content);
  ASSERT_TRUE(objects::ParseRecord(rec).ok());
  remote::IndexEntry e;
  e.kind = objects::Kind::kBlob;
  e.record_length = rec.size();
  e.frame_length = rec.size();
  auto read = remote::RecordFromFrame(e, rec);
  EXPECT_EQ(read.status().code(), EIO) << read.status().ToString();
  remote::PackBuilder builder;
  EXPECT_EQ(builder.Add(objects::Kind::kBlob, ObjectId{}, rec).code(), EINVAL);
  EXPECT_TRUE(builder.empty());
}

// The push verb (what the CLI, the protocol and MCP run): a branch refused because the remote
// moved during the push is ESTALE, one refused because it is not a fast-forward is
// NOT_FAST_FORWARD; either way the failure carries the push's result.
TEST_F(SyncTest, PushVerbCodesCarryTheResult) {
  auto* fault = NewRemote();
  Host a = NewHostWithRemote();
  Host b = NewHostWithRemote();
  Commit(a, {{"base", "0"}});
  ASSERT_TRUE(Push(a).ok());
  ASSERT_TRUE(Fetch(b).ok());
  ASSERT_TRUE(b.store->SetBranch("main", *b.store->Resolve("origin/main")).ok());
  Commit(a, {{"base", "0"}, {"a", "1"}});
  Commit(b, {{"base", "0"}, {"b", "1"}});
  using nlohmann::json;
  auto push_verb = [](Host& h, json* result) {
    cli::Context ctx;
    ctx.store = h.store.get();
    return cli::RunVerb(ctx, *cli::FindVerb("push"), cli::Args(json{{"remote", "origin"}, {"branches", {"main"}}}),
                        result);
  };
  bool once = false;
  json b_result;
  Status b_status = Status::Error(EINVAL, "not run");
  fault->SetHook(remote::FaultTransport::kCasRef, [&](remote::FaultTransport::Op, std::string_view) {
    if (once) return;
    once = true;
    b_status = push_verb(b, &b_result);
  });
  json a_result;
  Status s = push_verb(a, &a_result);
  fault->SetHook(0, nullptr);
  ASSERT_TRUE(b_status.ok()) << b_status.ToString();
  EXPECT_EQ(b_result["refs"][0]["status"], "fast-forward");
  EXPECT_EQ(s.code(), ESTALE) << s.ToString();
  EXPECT_NE(s.message().find("rejected main -> origin/main"), std::string::npos) << s.message();
  EXPECT_EQ(a_result["refs"][0]["status"], "rejected") << a_result.dump();
  // Pushed again, a knows the remote head now and is plainly behind it.
  json again;
  s = push_verb(a, &again);
  EXPECT_EQ(s.code(), kNotFastForward) << s.ToString();
  EXPECT_EQ(again["refs"][0]["status"], "rejected") << again.dump();
}

}  // namespace
}  // namespace layerfs::testing
