// Kv implementations agree: patches (blind range writes) on MemKv and RocksKv, across flushes,
// reopen and snapshots.
#include "kv/kv.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "../test_util.h"

namespace layerfs::kv {
namespace {

class KvTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { Open(true); }
  void Open(bool create) {
    kv_.reset();
    if (GetParam()) {
      auto k = OpenRocksKv(dir_.path() + "/db", {.create_if_missing = create});
      ASSERT_TRUE(k.ok()) << k.status().message();
      kv_ = std::move(*k);
    } else if (create) {
      kv_ = NewMemKv();
    }
  }
  std::string GetOr(std::string_view key, const Snapshot* s = nullptr) {
    auto v = kv_->Get(Cf::kWorkspace, key, s);
    EXPECT_TRUE(v.ok());
    return v.ok() && *v ? **v : "<absent>";
  }
  testing::TempDir dir_;
  std::unique_ptr<Kv> kv_;
};

TEST_P(KvTest, PatchesApplyInOrderOverAbsentAndPresentValues) {
  Batch b;
  b.Patch(Cf::kWorkspace, "k", 3, "abc");  // absent: zero-extended
  ASSERT_TRUE(kv_->Write(b, false).ok());
  EXPECT_EQ(GetOr("k"), std::string("\0\0\0abc", 6));
  b.Clear();
  b.Put(Cf::kWorkspace, "p", "0123456789");
  b.Patch(Cf::kWorkspace, "p", 2, "XY");
  b.Patch(Cf::kWorkspace, "p", 3, "Z");  // later wins where they overlap
  b.Patch(Cf::kWorkspace, "p", 12, "!");
  ASSERT_TRUE(kv_->Write(b, false).ok());
  EXPECT_EQ(GetOr("p"), std::string("01XZ456789\0\0!", 13));
  // A Put replaces patched state; a Delete then a patch starts from empty.
  b.Clear();
  b.Delete(Cf::kWorkspace, "p");
  b.Patch(Cf::kWorkspace, "p", 0, "n");
  ASSERT_TRUE(kv_->Write(b, false).ok());
  EXPECT_EQ(GetOr("p"), "n");
}

TEST_P(KvTest, ManyPatchesOfOneKeySurviveFlushAndReopen) {
  std::string model(65536, 'm');
  Batch b;
  b.Put(Cf::kWorkspace, "blk", model);
  ASSERT_TRUE(kv_->Write(b, false).ok());
  uint32_t x = 12345;
  for (int i = 0; i < 500; i++) {
    x = x * 1103515245 + 12345;
    uint32_t off = (x >> 8) % 65530;
    std::string bytes = std::to_string(i);
    b.Clear();
    b.Patch(Cf::kWorkspace, "blk", off, bytes);
    ASSERT_TRUE(kv_->Write(b, false).ok());
    model.replace(off, bytes.size(), bytes);
    if (i == 250) {
      ASSERT_TRUE(kv_->Flush().ok());  // operands both in a table file and the memtable
    }
  }
  EXPECT_EQ(GetOr("blk"), model);
  std::string scanned;
  ASSERT_TRUE(kv_->Scan(Cf::kWorkspace, "blk", "blk\x01", [&](auto, auto v) {
    scanned = std::string(v);
    return true;
  }).ok());
  EXPECT_EQ(scanned, model);
  if (GetParam()) {
    Open(false);
    EXPECT_EQ(GetOr("blk"), model);
    ASSERT_TRUE(kv_->Compact(Cf::kWorkspace).ok());
    EXPECT_EQ(GetOr("blk"), model);
  }
}

TEST_P(KvTest, SnapshotDoesNotSeeLaterPatches) {
  Batch b;
  b.Put(Cf::kWorkspace, "s", "aaaa");
  ASSERT_TRUE(kv_->Write(b, false).ok());
  auto snap = kv_->GetSnapshot();
  b.Clear();
  b.Patch(Cf::kWorkspace, "s", 1, "b");
  ASSERT_TRUE(kv_->Write(b, false).ok());
  EXPECT_EQ(GetOr("s", snap.get()), "aaaa");
  EXPECT_EQ(GetOr("s"), "abaa");
}

// Random batches (puts, deletes, range deletions, patches) against a std::map model, with up to
// four snapshots held across them and released in any order: every snapshot reads, by Get and by
// Scan, exactly the model as it was when it was taken, and the live state the model now. A
// scan's callback writes into the range it scans: the scan sees the range as it began.
TEST_P(KvTest, SnapshotsAndScansSeeTheirMomentUnderRandomWrites) {
  using Model = std::map<std::string, std::string>;
  Model model;
  std::vector<std::pair<std::shared_ptr<const Snapshot>, Model>> snaps;
  std::mt19937 rng(7);
  auto key = [&] { return "k" + std::to_string(rng() % 64); };
  auto check = [&](const Snapshot* s, const Model& m, int step) {
    Model seen;
    ASSERT_TRUE(kv_->Scan(Cf::kWorkspace, "", "", [&](auto k, auto v) {
      seen.emplace(std::string(k), std::string(v));
      return true;
    }, s).ok());
    ASSERT_EQ(seen, m) << "step " << step;
    for (int i = 0; i < 64; i++) {
      const std::string k = "k" + std::to_string(i);
      auto it = m.find(k);
      ASSERT_EQ(GetOr(k, s), it == m.end() ? "<absent>" : it->second) << "step " << step << " " << k;
    }
  };
  for (int step = 0; step < 1500; step++) {
    Batch b;
    Model next = model;
    for (int n = 1 + rng() % 3; n > 0; n--) {
      std::string k = key();
      switch (rng() % 4) {
        case 0: {
          std::string v(rng() % 20, static_cast<char>('a' + rng() % 26));
          b.Put(Cf::kWorkspace, k, v);
          next[k] = v;
          break;
        }
        case 1:
          b.Delete(Cf::kWorkspace, k);
          next.erase(k);
          break;
        case 2: {
          std::string e = key();
          if (e == k) break;
          if (e < k) std::swap(e, k);
          b.DeleteRange(Cf::kWorkspace, k, e);
          next.erase(next.lower_bound(k), next.lower_bound(e));
          break;
        }
        default: {
          const uint32_t off = rng() % 8;
          const std::string bytes(1 + rng() % 4, static_cast<char>('A' + rng() % 26));
          b.Patch(Cf::kWorkspace, k, off, bytes);
          std::string& v = next[k];
          if (v.size() < off + bytes.size()) v.resize(off + bytes.size(), '\0');
          v.replace(off, bytes.size(), bytes);
          break;
        }
      }
    }
    ASSERT_TRUE(kv_->Write(b, false).ok());
    model = std::move(next);
    if (rng() % 5 == 0 && snaps.size() < 4) snaps.emplace_back(kv_->GetSnapshot(), model);
    if (rng() % 7 == 0 && !snaps.empty()) snaps.erase(snaps.begin() + rng() % snaps.size());
    if (step % 50 == 0 || step == 1499) {
      for (const auto& [s, m] : snaps) check(s.get(), m, step);
      check(nullptr, model, step);
    }
  }
  // A scan whose callback rewrites and deletes what it has not reached yet.
  const Model before = model;
  Model seen;
  ASSERT_TRUE(kv_->Scan(Cf::kWorkspace, "", "", [&](auto k, auto v) {
    seen.emplace(std::string(k), std::string(v));
    Batch b;
    b.DeleteRange(Cf::kWorkspace, std::string(k) + "0", "l");
    b.Put(Cf::kWorkspace, "k99", "new");
    EXPECT_TRUE(kv_->Write(b, false).ok());
    return true;
  }).ok());
  EXPECT_EQ(seen, before);
  EXPECT_EQ(GetOr("k99"), "new");
}

TEST_P(KvTest, PatchOutsideWorkspaceFamilyIsRefusedWholeBatch) {
  Batch b;
  b.Put(Cf::kMeta, "m", "v");
  b.Patch(Cf::kMeta, "m", 0, "x");
  Status s = kv_->Write(b, false);
  EXPECT_EQ(s.code(), EINVAL);
  auto v = kv_->Get(Cf::kMeta, "m");
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->has_value());  // nothing of the batch applied
}

TEST_P(KvTest, AnAppendedBatchKeepsEveryOperationInOrder) {
  Batch first, staged;
  first.Put(Cf::kWorkspace, "a", "1");
  staged.Put(Cf::kWorkspace, "b", std::string(300000, 'x'));
  staged.Delete(Cf::kWorkspace, "a");
  staged.Put(Cf::kWorkspace, "a", "3");
  staged.Delete(Cf::kWorkspace, "c");
  const size_t bytes = first.ApproximateBytes() + staged.ApproximateBytes();
  first.Append(std::move(staged));
  EXPECT_TRUE(staged.empty());
  EXPECT_EQ(staged.ApproximateBytes(), 0u);
  ASSERT_EQ(first.entries().size(), 5u);
  EXPECT_EQ(first.entries()[2].op, Batch::Op::kDelete);
  EXPECT_EQ(first.ApproximateBytes(), bytes);
  Batch c;
  c.Put(Cf::kWorkspace, "c", "4");
  ASSERT_TRUE(kv_->Write(c, false).ok());
  ASSERT_TRUE(kv_->Write(first, true).ok());
  EXPECT_EQ(GetOr("a"), "3");
  EXPECT_EQ(GetOr("b"), std::string(300000, 'x'));
  EXPECT_EQ(GetOr("c"), "<absent>");
  // Into an empty batch the entries move whole.
  Batch empty, more;
  more.Put(Cf::kWorkspace, "d", "5");
  empty.Append(std::move(more));
  ASSERT_EQ(empty.entries().size(), 1u);
  EXPECT_EQ(empty.entries()[0].value, "5");
}

TEST(PatchCodec, RejectsMalformedOperands) {
  std::string v = "abc";
  EXPECT_FALSE(ApplyPatch("\x01\x02", &v));
  EXPECT_FALSE(ApplyPatch(std::string("\xff\xff\xff\xff", 4) + "x", &v));  // beyond any value
  EXPECT_EQ(v, "abc");
  EXPECT_TRUE(ApplyPatch(EncodePatch(1, "ZZ"), &v));
  EXPECT_EQ(v, "aZZ");
}

// A scratch Kv over a Kv it must not change: every write is seen through it and none reaches
// the base; scans merge the two in key order; snapshots hold both sides.
TEST(ScratchKv, WritesStayInMemoryOverTheBase) {
  auto base = NewMemKv();
  Batch b;
  for (const char* k : {"a", "c", "e", "g", "i"}) b.Put(Cf::kWorkspace, k, std::string("base-") + k);
  b.Put(Cf::kMeta, "m", "meta");
  ASSERT_TRUE(base->Write(b, true).ok());
  auto scratch = NewScratchKv(*base);
  auto dump = [](Kv& kv, const Snapshot* snap = nullptr, std::string_view from = "", std::string_view to = "") {
    std::string out;
    EXPECT_TRUE(kv.Scan(Cf::kWorkspace, from, to, [&](auto k, auto v) {
      out += std::string(k) + "=" + std::string(v) + ";";
      return true;
    }, snap).ok());
    return out;
  };
  const std::string before = dump(*base);
  b.Clear();
  b.Put(Cf::kWorkspace, "b", "new-b");        // between base keys
  b.Put(Cf::kWorkspace, "c", "new-c");        // over a base key
  b.Delete(Cf::kWorkspace, "e");              // hides a base key
  b.Put(Cf::kWorkspace, "z", "new-z");        // after every base key
  b.Patch(Cf::kWorkspace, "g", 0, "G");       // patches the base's value
  ASSERT_TRUE(scratch->Write(b, true).ok());
  auto snap = scratch->GetSnapshot();
  EXPECT_EQ(dump(*scratch), "a=base-a;b=new-b;c=new-c;g=Gase-g;i=base-i;z=new-z;");
  b.Clear();
  b.DeleteRange(Cf::kWorkspace, "b", "i");    // ours and the base's
  b.Put(Cf::kWorkspace, "d", "after-range");  // a later write in the same batch wins
  ASSERT_TRUE(scratch->Write(b, false).ok());
  EXPECT_EQ(dump(*scratch), "a=base-a;d=after-range;i=base-i;z=new-z;");
  EXPECT_EQ(dump(*scratch, snap.get()), "a=base-a;b=new-b;c=new-c;g=Gase-g;i=base-i;z=new-z;");
  EXPECT_EQ(dump(*scratch, nullptr, "c", "j"), "d=after-range;i=base-i;");
  // A scan that stops early stops on either side.
  int seen = 0;
  ASSERT_TRUE(scratch->Scan(Cf::kWorkspace, "", "", [&](auto, auto) { return ++seen < 2; }).ok());
  EXPECT_EQ(seen, 2);
  auto g = scratch->Get(Cf::kWorkspace, "g");
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->has_value());
  auto gs = scratch->Get(Cf::kWorkspace, "g", snap.get());
  ASSERT_TRUE(gs.ok() && gs->has_value());
  EXPECT_EQ(**gs, "Gase-g");
  EXPECT_EQ(**scratch->Get(Cf::kMeta, "m"), "meta");
  // A bad batch applies nothing.
  b.Clear();
  b.Put(Cf::kWorkspace, "q", "x");
  b.Patch(Cf::kMeta, "m", 0, "x");
  EXPECT_EQ(scratch->Write(b, false).code(), EINVAL);
  EXPECT_FALSE(scratch->Get(Cf::kWorkspace, "q")->has_value());
  // The base saw none of it.
  EXPECT_EQ(dump(*base), before);
  EXPECT_EQ(**base->Get(Cf::kWorkspace, "g"), "base-g");
}

INSTANTIATE_TEST_SUITE_P(Impls, KvTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Rocks" : "Mem"; });

}  // namespace
}  // namespace layerfs::kv
