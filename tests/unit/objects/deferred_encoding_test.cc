// Deferred encoding: pending records are readable at once, finalize to exactly the record a
// synchronous Put stores, are never delta bases while pending, survive a reopen through the
// persisted queue, and stay pending (and readable) when finalization fails.
#include <gtest/gtest.h>

#include <set>

#include "../test_util.h"
#include "base/coding.h"
#include "base/hash.h"
#include "kv/fault_kv.h"
#include "objects/background_encoder.h"
#include "objects/object_store.h"

namespace layerfs::objects {
namespace {

using layerfs::testing::RandomBytes;
using layerfs::testing::TextBytes;

constexpr uint64_t kDeferredSeed = 0x5eed5eed5eed5eedull;

// Versions of a file: each edits a few places of the previous one, so they delta well.
std::vector<std::string> Versions(size_t n, size_t size, uint64_t seed) {
  std::vector<std::string> v{TextBytes(size, seed)};
  for (size_t i = 1; i < n; i++) {
    std::string next = v.back();
    for (int k = 0; k < 3; k++) {
      size_t at = (seed * 7919 + i * 104729 + k * 1299709) % next.size();
      next.replace(at, 8, RandomBytes(8, seed + i * 10 + k));
    }
    if (i % 5 == 0) next += TextBytes(700, seed + i);
    v.push_back(next);
  }
  return v;
}

// Writes a deferred Txn the way a Workspace commit does (one batch, then Enqueue).
Status WriteDeferred(ObjectStore& os, kv::Kv& kv, Txn* txn) {
  kv::Batch b;
  os.TakeBatch(&b, txn);
  LFS_TRY(kv.Write(b, true));
  os.Enqueue(txn);
  return Status::Ok();
}

std::set<std::string> QueueKeys(kv::Kv& kv) {
  std::set<std::string> keys;
  EXPECT_TRUE(kv.Scan(kv::Cf::kIndex, "enc/", "enc0", [&](auto k, auto) {
    keys.emplace(k);
    return true;
  }).ok());
  return keys;
}

TEST(DeferredEncoding, PendingReadsNowAndFinalizesToTheSynchronousRecord) {
  auto kv_sync = kv::NewMemKv(), kv_def = kv::NewMemKv();
  // The background encoder deltas larger inputs at its own level (Tuning::background_level):
  // a synchronous Put at that level stores the very same records.
  Tuning at_background;
  at_background.level = at_background.background_level;
  ObjectStore sync(kv_sync.get(), kDeferredSeed, Policy{}, at_background);
  ObjectStore def(kv_def.get(), kDeferredSeed, Policy{});
  // 40 versions cross the cap of 16 twice (keyframes), with small and large inputs.
  for (size_t size : {3000u, 200000u}) {
    auto versions = Versions(40, size, size);
    std::optional<ObjectId> prev_sync, prev_def;
    std::vector<ObjectId> ids;
    for (const auto& v : versions) {
      auto a = sync.Put(Kind::kBlob, v, prev_sync);
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      ASSERT_TRUE(sync.Flush().ok());
      Txn txn(false, /*deferred=*/true);
      auto b = def.Put(Kind::kBlob, v, prev_def, &txn);
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      EXPECT_EQ(a->id, b->id);
      ASSERT_TRUE(WriteDeferred(def, *kv_def, &txn).ok());
      // Readable at once, from a store that never saw it (no cache), as pending.
      ObjectStore fresh(kv_def.get(), kDeferredSeed, Policy{});
      EXPECT_EQ(*fresh.Get(Kind::kBlob, b->id), v);
      EXPECT_EQ(fresh.Info(Kind::kBlob, b->id)->encoding, Encoding::kPending);
      prev_sync = a->id;
      prev_def = b->id;
      ids.push_back(b->id);
    }
    EXPECT_EQ(def.QueuedCount(), versions.size());
    EXPECT_FALSE(QueueKeys(*kv_def).empty());
    // Finalized oldest first (the encoder's order) or newest first (hints pending): the same.
    BackgroundEncoder enc(def);
    ASSERT_TRUE(enc.Drain().ok());
    EXPECT_EQ(def.QueuedCount(), 0u);
    EXPECT_TRUE(QueueKeys(*kv_def).empty());
    ObjectStore fresh(kv_def.get(), kDeferredSeed, Policy{});
    for (size_t i = 0; i < ids.size(); i++) {
      auto r1 = kv_sync->Get(kv::Cf::kBlobs, ids[i].AsKey());
      auto r2 = kv_def->Get(kv::Cf::kBlobs, ids[i].AsKey());
      ASSERT_TRUE(r1.ok() && *r1 && r2.ok() && *r2);
      EXPECT_EQ(**r1, **r2) << "version " << i << " of size " << size;
      EXPECT_EQ(*fresh.Get(Kind::kBlob, ids[i]), versions[i]);
      EXPECT_LE(fresh.Info(Kind::kBlob, ids[i])->depth, 16u);
    }
  }
}

// Off the commit path the encoder can afford a higher level on larger inputs: the finalized
// deltas of a 200 KB file's versions are smaller than a synchronous Put's at the default level,
// and small inputs (level 15 either way) are the same.
TEST(DeferredEncoding, TheBackgroundEncoderDeltasLargerInputsAtItsOwnLevel) {
  for (size_t size : {3000u, 200000u}) {
    auto kv_sync = kv::NewMemKv(), kv_def = kv::NewMemKv();
    ObjectStore sync(kv_sync.get(), kDeferredSeed, Policy{});
    ObjectStore def(kv_def.get(), kDeferredSeed, Policy{});
    auto versions = Versions(12, size, size + 1);
    std::optional<ObjectId> prev;
    std::vector<ObjectId> ids;
    for (const auto& v : versions) {
      ASSERT_TRUE(sync.Put(Kind::kBlob, v, prev).ok());
      ASSERT_TRUE(sync.Flush().ok());
      Txn txn(false, /*deferred=*/true);
      auto r = def.Put(Kind::kBlob, v, prev, &txn);
      ASSERT_TRUE(r.ok());
      ASSERT_TRUE(WriteDeferred(def, *kv_def, &txn).ok());
      prev = r->id;
      ids.push_back(r->id);
    }
    BackgroundEncoder enc(def);
    ASSERT_TRUE(enc.Drain().ok());
    size_t sync_bytes = 0, def_bytes = 0;
    for (size_t i = 1; i < ids.size(); i++) {
      auto a = sync.Info(Kind::kBlob, ids[i]);
      auto b = def.Info(Kind::kBlob, ids[i]);
      ASSERT_TRUE(a.ok() && b.ok());
      ASSERT_EQ(b->encoding, Encoding::kDelta) << i;
      sync_bytes += a->stored_bytes;
      def_bytes += b->stored_bytes;
      EXPECT_EQ(*def.Get(Kind::kBlob, ids[i]), versions[i]);
    }
    if (size < Tuning{}.small_below / 2) {
      EXPECT_EQ(def_bytes, sync_bytes);
    } else {
      EXPECT_LT(def_bytes, sync_bytes) << "size " << size;
    }
  }
}

TEST(DeferredEncoding, NewestFirstFinalizesItsPendingHintsFirst) {
  auto kv = kv::NewMemKv();
  ObjectStore os(kv.get(), kDeferredSeed, Policy{});
  auto versions = Versions(20, 5000, 3);
  std::optional<ObjectId> prev;
  std::vector<ObjectId> ids;
  for (const auto& v : versions) {
    Txn txn(false, true);
    auto r = os.Put(Kind::kBlob, v, prev, &txn);
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(WriteDeferred(os, *kv, &txn).ok());
    prev = r->id;
    ids.push_back(r->id);
  }
  // The newest first: every hint below it is pending and must be encoded before it.
  ASSERT_TRUE(os.Finalize(Kind::kBlob, ids.back()).ok());
  ObjectStore fresh(kv.get(), kDeferredSeed, Policy{});
  for (size_t i = 0; i < ids.size(); i++) {
    auto info = fresh.Info(Kind::kBlob, ids[i]);
    ASSERT_TRUE(info.ok());
    EXPECT_NE(info->encoding, Encoding::kPending) << i;
    if (info->encoding == Encoding::kDelta) {
      auto base = fresh.Info(Kind::kBlob, info->base);
      ASSERT_TRUE(base.ok());
      EXPECT_EQ(base->depth + 1, info->depth);
    }
    EXPECT_EQ(*fresh.Get(Kind::kBlob, ids[i]), versions[i]);
  }
  // The queue still names them; finishing it changes nothing and empties it.
  BackgroundEncoder enc(os);
  ASSERT_TRUE(enc.Drain().ok());
  EXPECT_TRUE(QueueKeys(*kv).empty());
}

TEST(DeferredEncoding, ASynchronousPutNeverDeltasAgainstAPendingBase) {
  auto kv = kv::NewMemKv();
  ObjectStore os(kv.get(), kDeferredSeed, Policy{});
  auto versions = Versions(3, 8000, 9);
  Txn txn(false, true);
  auto a = os.Put(Kind::kBlob, versions[0], std::nullopt, &txn);
  ASSERT_TRUE(WriteDeferred(os, *kv, &txn).ok());
  Txn txn2(false, true);
  auto b = os.Put(Kind::kBlob, versions[1], a->id, &txn2);
  ASSERT_TRUE(WriteDeferred(os, *kv, &txn2).ok());
  // An import-style Put against b: b (and a under it) are finalized first.
  auto c = os.Put(Kind::kBlob, versions[2], b->id);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(os.Flush().ok());
  EXPECT_NE(os.Info(Kind::kBlob, a->id)->encoding, Encoding::kPending);
  EXPECT_EQ(os.Info(Kind::kBlob, b->id)->encoding, Encoding::kDelta);
  auto ci = os.Info(Kind::kBlob, c->id);
  ASSERT_EQ(ci->encoding, Encoding::kDelta);
  EXPECT_EQ(ci->base, b->id);
  EXPECT_EQ(ci->depth, 2u);
  ObjectStore fresh(kv.get(), kDeferredSeed, Policy{});
  EXPECT_EQ(*fresh.Get(Kind::kBlob, c->id), versions[2]);
}

TEST(DeferredEncoding, TheQueueSurvivesAReopenAndDuplicatesDedup) {
  auto kv = kv::NewMemKv();
  std::vector<ObjectId> ids;
  std::vector<std::string> contents;
  {
    ObjectStore os(kv.get(), kDeferredSeed, Policy{});
    for (int i = 0; i < 5; i++) {
      Txn txn(false, true);
      for (int j = 0; j < 4; j++) {
        contents.push_back(TextBytes(1000 + i * 100 + j, i * 10 + j));
        auto r = os.Put(j % 2 ? Kind::kTree : Kind::kBlob, contents.back(), std::nullopt, &txn);
        ASSERT_TRUE(r.ok());
        ids.push_back(r->id);
      }
      // The same content again in the same Txn: staged once.
      auto again = os.Put(Kind::kBlob, contents[contents.size() - 2], std::nullopt, &txn);
      EXPECT_FALSE(again->added);
      ASSERT_TRUE(WriteDeferred(os, *kv, &txn).ok());
    }
    EXPECT_EQ(os.QueuedCount(), 20u);
    EXPECT_EQ(QueueKeys(*kv).size(), 5u);  // one list per batch
    // A process that ends here leaves them pending.
  }
  ObjectStore os(kv.get(), kDeferredSeed, Policy{});
  ASSERT_TRUE(os.LoadQueue().ok());
  EXPECT_EQ(os.QueuedCount(), 20u);
  for (size_t i = 0; i < ids.size(); i++)
    EXPECT_EQ(*os.Get(i % 2 ? Kind::kTree : Kind::kBlob, ids[i]), contents[i]);
  BackgroundEncoder enc(os);
  enc.Start();
  ASSERT_TRUE(enc.Drain().ok());
  enc.Stop(false);
  EXPECT_EQ(enc.finalized(), 20u);
  EXPECT_TRUE(QueueKeys(*kv).empty());
  for (size_t i = 0; i < ids.size(); i++) {
    Kind k = i % 2 ? Kind::kTree : Kind::kBlob;
    EXPECT_NE(os.Info(k, ids[i])->encoding, Encoding::kPending);
    EXPECT_EQ(*os.Get(k, ids[i]), contents[i]);
  }
}

TEST(DeferredEncoding, AFailedFinalizationLeavesTheRecordPendingAndIsRetried) {
  auto mem = kv::NewMemKv();
  kv::FaultKv kv(mem.get());
  ObjectStore os(&kv, kDeferredSeed, Policy{});
  std::string content = TextBytes(100000, 42);
  Txn txn(false, true);
  auto r = os.Put(Kind::kBlob, content, std::nullopt, &txn);
  ASSERT_TRUE(WriteDeferred(os, kv, &txn).ok());
  kv.FailWritesAfter(0);
  BackgroundEncoder enc(os);
  Status s = enc.Drain();
  EXPECT_EQ(s.code(), ENOSPC);
  EXPECT_EQ(os.QueuedCount(), 1u);  // back in the queue
  EXPECT_EQ(os.Info(Kind::kBlob, r->id)->encoding, Encoding::kPending);
  EXPECT_EQ(*os.Get(Kind::kBlob, r->id), content);
  kv.FailWritesAfter(-1);
  ASSERT_TRUE(enc.Drain().ok());
  EXPECT_EQ(os.Info(Kind::kBlob, r->id)->encoding, Encoding::kZstd);
  ObjectStore fresh(mem.get(), kDeferredSeed, Policy{});
  EXPECT_EQ(*fresh.Get(Kind::kBlob, r->id), content);
}

TEST(DeferredEncoding, ALargeDeferredTxnIsWrittenEarly) {
  auto kv = kv::NewMemKv();
  Tuning t;
  t.flush_bytes = 1 << 20;
  ObjectStore os(kv.get(), kDeferredSeed, Policy{}, t);
  Txn txn(false, true);
  std::vector<ObjectId> ids;
  for (int i = 0; i < 10; i++) {
    auto r = os.Put(Kind::kChunk, RandomBytes(300000, i), std::nullopt, &txn);
    ASSERT_TRUE(r.ok());
    ids.push_back(r->id);
  }
  // Most of it is in the Kv (and queued) before the owner writes anything.
  EXPECT_GE(os.QueuedCount(), 6u);
  EXPECT_TRUE(kv->Get(kv::Cf::kChunks, ids[0].AsKey())->has_value());
  ASSERT_TRUE(WriteDeferred(os, *kv, &txn).ok());
  EXPECT_EQ(os.QueuedCount(), 10u);
  BackgroundEncoder enc(os);
  ASSERT_TRUE(enc.Drain().ok());
  for (int i = 0; i < 10; i++) EXPECT_EQ(*os.Get(Kind::kChunk, ids[i]), RandomBytes(300000, i));
  EXPECT_TRUE(QueueKeys(*kv).empty());
}

TEST(DeferredEncoding, APendingRecordWhoseContentWasDamagedIsNotFinalized) {
  auto kv = kv::NewMemKv();
  ObjectStore os(kv.get(), kDeferredSeed, Policy{});
  std::string content = TextBytes(5000, 1);
  Txn txn(false, true);
  auto r = os.Put(Kind::kBlob, content, std::nullopt, &txn);
  ASSERT_TRUE(WriteDeferred(os, *kv, &txn).ok());
  auto rec = **kv->Get(kv::Cf::kBlobs, r->id.AsKey());
  rec.back() ^= 1;
  kv::Batch b;
  b.Put(kv::Cf::kBlobs, r->id.AsKey(), rec);
  ASSERT_TRUE(kv->Write(b, false).ok());
  EXPECT_EQ(os.Finalize(Kind::kBlob, r->id).code(), EIO);
  ObjectStore fresh(kv.get(), kDeferredSeed, Policy{});
  EXPECT_EQ(fresh.Get(Kind::kBlob, r->id).status().code(), EIO);
}

// A pending record of `content` under its id, hinting at `hint` (docs/format.md, encoding 3).
std::string PendingRecord(Kind kind, std::string_view content, const ObjectId& hint) {
  std::string r;
  base::PutU8(&r, static_cast<uint8_t>(kind));
  base::PutU8(&r, static_cast<uint8_t>(Encoding::kPending));
  base::PutVarint(&r, 0);
  base::PutVarint(&r, content.size());
  r.append(hint.AsKey());
  r.append(content);
  return r;
}

// Found by tests/fuzz/pending_fuzz.cc: hints that form a cycle (a record hinting at itself, two
// at each other) made Finalize walk the cycle 100000 times, hashing the content at every step,
// then fail, so the encoder retried it forever holding the finalize lock. The record whose
// hint is already on the stack is now encoded without it.
TEST(DeferredEncoding, HintCyclesAreEncodedNotWalked) {
  auto kv = kv::NewMemKv();
  ObjectStore os(kv.get(), kDeferredSeed, Policy{});
  const std::string a = TextBytes(6000, 1), b = a + "b", c = TextBytes(4000, 3);
  const ObjectId ida = base::HashContent(a, kDeferredSeed), idb = base::HashContent(b, kDeferredSeed),
                 idc = base::HashContent(c, kDeferredSeed);
  kv::Batch batch;
  batch.Put(kv::Cf::kBlobs, ida.AsKey(), PendingRecord(Kind::kBlob, a, idb));
  batch.Put(kv::Cf::kBlobs, idb.AsKey(), PendingRecord(Kind::kBlob, b, ida));
  batch.Put(kv::Cf::kBlobs, idc.AsKey(), PendingRecord(Kind::kBlob, c, idc));
  ASSERT_TRUE(kv->Write(batch, false).ok());
  ASSERT_TRUE(os.Finalize(Kind::kBlob, ida).ok());
  ASSERT_TRUE(os.Finalize(Kind::kBlob, idc).ok());
  for (const auto& [id, content] : {std::pair{ida, a}, std::pair{idb, b}, std::pair{idc, c}}) {
    auto info = os.Info(Kind::kBlob, id);
    ASSERT_TRUE(info.ok());
    EXPECT_NE(info->encoding, Encoding::kPending);
    ObjectStore fresh(kv.get(), kDeferredSeed, Policy{});
    auto got = fresh.Get(Kind::kBlob, id);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, content);
  }
  // The cycle was cut once: one of a and b deltas against the other.
  auto ia = os.Info(Kind::kBlob, ida), ib = os.Info(Kind::kBlob, idb);
  EXPECT_EQ((ia->encoding == Encoding::kDelta) + (ib->encoding == Encoding::kDelta), 1);
}

// Found reviewing the path pending_fuzz drives: at the depth cap, the walk down a hint's chain
// for keyframes followed base ids while records were deltas, so two crafted deltas naming each
// other looped forever. The walk now requires each base to be one level shallower.
TEST(DeferredEncoding, AHintWhoseChainLoopsStillEncodes) {
  auto kv = kv::NewMemKv();
  ObjectStore os(kv.get(), kDeferredSeed, Policy{2, 1, 1});
  ObjectId x, y;
  x.bytes[0] = 1;
  y.bytes[0] = 2;
  auto delta = [](const ObjectId& base) {
    std::string r;
    base::PutU8(&r, static_cast<uint8_t>(Kind::kBlob));
    base::PutU8(&r, static_cast<uint8_t>(Encoding::kDelta));
    base::PutVarint(&r, 2);
    base::PutVarint(&r, 100);
    r.append(base.AsKey());
    r.append("not a zstd frame");
    return r;
  };
  kv::Batch batch;
  batch.Put(kv::Cf::kBlobs, x.AsKey(), delta(y));
  batch.Put(kv::Cf::kBlobs, y.AsKey(), delta(x));
  ASSERT_TRUE(kv->Write(batch, false).ok());
  const std::string content = TextBytes(3000, 7);
  auto put = os.Put(Kind::kBlob, content, x);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  auto got = os.Get(Kind::kBlob, put->id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, content);
  EXPECT_NE(os.Info(Kind::kBlob, put->id)->encoding, Encoding::kDelta);
}

}  // namespace
}  // namespace layerfs::objects
