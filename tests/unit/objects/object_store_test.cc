#include "objects/object_store.h"

#include <gtest/gtest.h>

#include <set>

#include "../test_util.h"
#include "base/hash.h"
#include "objects/tree.h"

namespace layerfs::objects {
namespace {

using layerfs::testing::RandomBytes;
using layerfs::testing::TextBytes;

constexpr uint64_t kSeed = 0x1234567890abcdefull;

class ObjectStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<kv::Kv> kv_ = kv::NewMemKv();
  std::unique_ptr<ObjectStore> Make(Policy p = {}) { return std::make_unique<ObjectStore>(kv_.get(), kSeed, p); }
};

TEST_F(ObjectStoreTest, PutGetRoundTripAllEncodings) {
  auto os = Make();
  std::vector<std::string> contents = {"", "x", TextBytes(1000, 1), TextBytes(100000, 2), RandomBytes(100000, 3)};
  std::vector<ObjectId> ids;
  for (const auto& c : contents) {
    auto r = os->Put(Kind::kBlob, c, std::nullopt);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->added);
    EXPECT_GT(r->stored_bytes, 0u);
    EXPECT_EQ(r->id, base::HashContent(c, kSeed));
    ids.push_back(r->id);
  }
  // Readable while pending, and after a flush from a fresh store (no cache).
  for (size_t i = 0; i < contents.size(); i++) { EXPECT_EQ(*os->Get(Kind::kBlob, ids[i]), contents[i]); }
  ASSERT_TRUE(os->Flush().ok());
  auto fresh = Make();
  for (size_t i = 0; i < contents.size(); i++) {
    auto g = fresh->Get(Kind::kBlob, ids[i]);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(*g, contents[i]);
  }
  // Compressible large content is stored compressed; incompressible is stored raw.
  EXPECT_EQ(fresh->Info(Kind::kBlob, ids[3])->encoding, Encoding::kZstd);
  EXPECT_EQ(fresh->Info(Kind::kBlob, ids[4])->encoding, Encoding::kRaw);
  EXPECT_EQ(fresh->Info(Kind::kBlob, ids[2])->encoding, Encoding::kRaw);  // below raw_below
  EXPECT_EQ(fresh->Info(Kind::kBlob, ids[3])->decoded_size, contents[3].size());
}

// Large full copies are judged on a sample before the slow level is tried: random bytes are
// stored raw, while content that compresses anywhere the sample looks (text, or text with a
// random head and tail) is still compressed, and everything reads back.
TEST_F(ObjectStoreTest, IncompressibleLargeContentIsStoredRawWithoutTheSlowLevel) {
  auto os = Make();
  const std::string random = RandomBytes(2 << 20, 21), text = TextBytes(2 << 20, 22);
  const std::string mixed = RandomBytes(256 << 10, 23) + TextBytes(1536 << 10, 24) + RandomBytes(256 << 10, 25);
  for (const auto& [content, want] : std::vector<std::pair<std::string, Encoding>>{
           {random, Encoding::kRaw}, {text, Encoding::kZstd}, {mixed, Encoding::kZstd}}) {
    auto r = os->Put(Kind::kBlob, content, std::nullopt);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(os->Info(Kind::kBlob, r->id)->encoding, want);
    if (want == Encoding::kZstd) { EXPECT_LT(r->stored_bytes, content.size() * 9 / 10); }
    EXPECT_TRUE(*os->Get(Kind::kBlob, r->id) == content);
  }
}

TEST_F(ObjectStoreTest, MissingIsEnoent) {
  auto os = Make();
  ObjectId id = base::HashContent("nothing", kSeed);
  auto g = os->Get(Kind::kBlob, id);
  EXPECT_EQ(g.status().code(), ENOENT);
  EXPECT_FALSE(*os->Exists(Kind::kBlob, id));
  EXPECT_EQ(os->Info(Kind::kBlob, id).status().code(), ENOENT);
}

TEST_F(ObjectStoreTest, Dedup) {
  auto os = Make();
  std::string c = TextBytes(50000, 4);
  auto a = os->Put(Kind::kBlob, c, std::nullopt);
  auto b = os->Put(Kind::kBlob, c, std::nullopt);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->added);
  EXPECT_FALSE(b->added);
  EXPECT_EQ(b->stored_bytes, 0u);
  EXPECT_EQ(a->id, b->id);
  ASSERT_TRUE(os->Flush().ok());
  auto fresh = Make();
  auto c2 = fresh->Put(Kind::kBlob, c, std::nullopt);
  ASSERT_TRUE(c2.ok());
  EXPECT_FALSE(c2->added);
  EXPECT_EQ(c2->id, a->id);
  // A blob and a chunk of the same content share the record.
  auto ch = fresh->Put(Kind::kChunk, c, std::nullopt);
  ASSERT_TRUE(ch.ok());
  EXPECT_FALSE(ch->added);
  EXPECT_EQ(*fresh->Get(Kind::kChunk, ch->id), c);
}

// Chunks are kept in their own family (kv::Cf::kChunks), blobs in theirs; a chunk may still be a
// delta against a blob (a file that grew past the chunking threshold), read across the families.
TEST_F(ObjectStoreTest, AChunkDeltasAgainstABlobInTheOtherFamily) {
  auto os = Make();
  std::string old = TextBytes(600000, 21);
  auto b = os->Put(Kind::kBlob, old, std::nullopt);
  ASSERT_TRUE(b.ok());
  std::string grown = old + "appended";
  auto c = os->Put(Kind::kChunk, grown, b->id);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(os->Flush().ok());
  EXPECT_TRUE(kv_->Get(kv::Cf::kBlobs, b->id.AsKey())->has_value());
  EXPECT_FALSE(kv_->Get(kv::Cf::kBlobs, c->id.AsKey())->has_value());
  auto rec = kv_->Get(kv::Cf::kChunks, c->id.AsKey());
  ASSERT_TRUE(rec.ok() && rec->has_value());
  auto info = ParseRecord(**rec);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->encoding, Encoding::kDelta);  // against the blob: far smaller than a full copy
  EXPECT_EQ(info->base, b->id);
  EXPECT_LT(rec->value().size(), 1000u);
  auto fresh = Make();
  EXPECT_EQ(*fresh->Get(Kind::kChunk, c->id), grown);
  EXPECT_EQ(*fresh->Get(Kind::kBlob, b->id), old);
  // Found as the other kind too (dedup by content id across the families).
  auto again = fresh->Put(Kind::kBlob, grown, std::nullopt);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->added);
  EXPECT_EQ(*fresh->Get(Kind::kBlob, c->id), grown);
}

TEST_F(ObjectStoreTest, SameBytesAsTreeAndBlobWhilePending) {
  auto os = Make();
  std::string c = TextBytes(300, 5);
  auto b = os->Put(Kind::kBlob, c, std::nullopt);
  auto t = os->Put(Kind::kTree, c, std::nullopt);
  ASSERT_TRUE(b.ok() && t.ok());
  EXPECT_TRUE(t->added);  // a different column family: its own record
  os->ClearCache();
  auto gb = os->Get(Kind::kBlob, b->id);
  auto gt = os->Get(Kind::kTree, t->id);
  ASSERT_TRUE(gb.ok()) << gb.status().ToString();
  ASSERT_TRUE(gt.ok()) << gt.status().ToString();
  EXPECT_EQ(*gb, c);
  EXPECT_EQ(*gt, c);
  ASSERT_TRUE(os->Flush().ok());
  auto fresh = Make();
  EXPECT_EQ(*fresh->Get(Kind::kBlob, b->id), c);
  EXPECT_EQ(*fresh->Get(Kind::kTree, t->id), c);
}

TEST_F(ObjectStoreTest, WrongKindIsEio) {
  auto os = Make();
  auto b = os->Put(Kind::kBlob, "content of a blob", std::nullopt);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(os->Flush().ok());
  auto fresh = Make();
  EXPECT_EQ(fresh->Get(Kind::kChunkList, b->id).status().code(), EIO);
  EXPECT_EQ(fresh->Get(Kind::kTree, b->id).status().code(), ENOENT);  // other family
}

TEST_F(ObjectStoreTest, DeltaIsSmallAndRoundTrips) {
  auto os = Make();
  std::string v1 = RandomBytes(200000, 6), v2 = v1;
  v2.replace(1000, 5, "HELLO");
  auto a = os->Put(Kind::kBlob, v1, std::nullopt);
  auto b = os->Put(Kind::kBlob, v2, a->id);
  ASSERT_TRUE(b.ok());
  EXPECT_LT(b->stored_bytes, 1000u);
  auto info = os->Info(Kind::kBlob, b->id);
  EXPECT_EQ(info->encoding, Encoding::kDelta);
  EXPECT_EQ(info->depth, 1u);
  EXPECT_EQ(info->base, a->id);
  ASSERT_TRUE(os->Flush().ok());
  EXPECT_EQ(*Make()->Get(Kind::kBlob, b->id), v2);
}

TEST_F(ObjectStoreTest, MissingBaseHintStoresWhole) {
  auto os = Make();
  ObjectId bogus = base::HashContent("not stored", kSeed);
  std::string c = RandomBytes(30000, 7);
  auto r = os->Put(Kind::kBlob, c, bogus);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(os->Info(Kind::kBlob, r->id)->encoding, Encoding::kDelta);
  EXPECT_EQ(*os->Get(Kind::kBlob, r->id), c);
}

// Each version edits a few bytes of the previous one (unique per version).
std::string Edit(std::string s, int i) {
  std::string tag = "<version " + std::to_string(i) + ">";
  size_t pos = (static_cast<size_t>(i) * 7919) % (s.size() - tag.size());
  s.replace(pos, tag.size(), tag);
  return s;
}

// Puts `versions` versions of one object, each with the previous as base, and checks that no
// record is deeper than `cap`, the cap is reached, and every version reads back exactly.
void CheckChain(kv::Kv* kv, Kind kind, const Policy& policy, uint32_t cap,
                const std::function<std::string(int)>& version, int versions) {
  ObjectStore os(kv, kSeed, policy);
  std::vector<ObjectId> ids;
  std::vector<std::string> contents;
  std::optional<ObjectId> prev;
  uint32_t max_depth = 0;
  int deltas = 0;
  for (int i = 0; i < versions; i++) {
    std::string c = version(i);
    auto r = os.Put(kind, c, prev);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->added) << i;
    auto info = os.Info(kind, r->id);
    ASSERT_TRUE(info.ok());
    ASSERT_LE(info->depth, cap) << "version " << i;
    max_depth = std::max(max_depth, info->depth);
    deltas += info->encoding == Encoding::kDelta;
    ids.push_back(r->id);
    contents.push_back(std::move(c));
    prev = r->id;
  }
  EXPECT_EQ(max_depth, cap);
  EXPECT_GT(deltas, versions / 2);
  ASSERT_TRUE(os.Flush().ok());
  ObjectStore fresh(kv, kSeed, policy);
  std::set<ObjectId> distinct(ids.begin(), ids.end());
  EXPECT_EQ(distinct.size(), ids.size());
  for (int i = 0; i < versions; i++) {
    auto g = fresh.Get(kind, ids[i]);
    ASSERT_TRUE(g.ok()) << i << ": " << g.status().ToString();
    ASSERT_EQ(*g, contents[i]) << "version " << i;
    auto info = fresh.Info(kind, ids[i]);
    ASSERT_LE(info->depth, cap);
  }
  // Reads in reverse order, with a cold cache, too.
  fresh.ClearCache();
  for (int i = versions; i-- > 0;) { ASSERT_EQ(*fresh.Get(kind, ids[i]), contents[i]) << i; }
}

std::string FileVersion(int i) {
  static const std::string base = TextBytes(24000, 8);
  std::string s = base;
  for (int k = 0; k <= i; k += 97) s = Edit(s, k);  // accumulated drift
  return Edit(s, i);
}

std::string TreeVersion(int i) {
  std::vector<TreeEntry> entries;
  for (int k = 0; k < 300; k++) {
    TreeEntry e;
    e.name = "file_" + std::to_string(100000 + k);
    e.size = static_cast<uint64_t>(k) * 31;
    e.mtime_sec = 1700000000 + k;
    e.id = base::HashContent(e.name, kSeed);
    if (k == i % 300) {
      e.mtime_sec += i;
      e.size += static_cast<uint64_t>(i);
    }
    entries.push_back(e);
  }
  TreeEntry v;
  v.name = "zz_version";
  v.size = static_cast<uint64_t>(i);
  entries.push_back(v);
  return EncodeTree(entries);
}

TEST_F(ObjectStoreTest, FileChainCapDefaultPolicy) {
  Policy p;
  CheckChain(kv_.get(), Kind::kBlob, p, p.whole, FileVersion, 1000);
}

TEST_F(ObjectStoreTest, TreeChainCapDefaultPolicy) {
  Policy p;
  CheckChain(kv_.get(), Kind::kTree, p, p.meta, TreeVersion, 1000);
}

TEST_F(ObjectStoreTest, ChunkChainCapDefaultPolicy) {
  Policy p;
  CheckChain(kv_.get(), Kind::kChunk, p, p.chunk, FileVersion, 1000);
}

TEST_F(ObjectStoreTest, SmallPolicyCapsHonoured) {
  Policy p{4, 2, 2};
  CheckChain(kv_.get(), Kind::kBlob, p, 4, FileVersion, 300);
  auto kv2 = kv::NewMemKv();
  CheckChain(kv2.get(), Kind::kTree, p, 2, TreeVersion, 300);
  auto kv3 = kv::NewMemKv();
  CheckChain(kv3.get(), Kind::kChunk, p, 2, FileVersion, 300);
}

TEST_F(ObjectStoreTest, CapOneAndZero) {
  Policy p{1, 1, 1};
  CheckChain(kv_.get(), Kind::kBlob, p, 1, FileVersion, 50);
  // Cap 0: never a delta.
  auto kv2 = kv::NewMemKv();
  ObjectStore os(kv2.get(), kSeed, Policy{0, 0, 0});
  std::optional<ObjectId> prev;
  for (int i = 0; i < 20; i++) {
    auto r = os.Put(Kind::kBlob, FileVersion(i), prev);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(os.Info(Kind::kBlob, r->id)->depth, 0u);
    EXPECT_NE(os.Info(Kind::kBlob, r->id)->encoding, Encoding::kDelta);
    prev = r->id;
  }
}

// Flips bits at every byte of a stored record (through the kv interface): a read returns EIO,
// or (when the flip does not change what decodes, e.g. a zstd window-size bit) exactly the
// original content, never other bytes. A flip in the middle of the payload is always EIO.
void ExpectEveryDamageIsEio(kv::Kv* kv, Kind kind, const ObjectId& id) {
  auto orig = kv->Get(CfOf(kind), id.AsKey());
  ASSERT_TRUE(orig.ok() && orig->has_value());
  const std::string rec = **orig;
  std::string content = *ObjectStore(kv, kSeed, Policy{}).Get(kind, id);
  size_t eio = 0, tries = 0;
  // Every 7th byte of a large record (every 29th under a sanitizer, where each read costs more).
  const size_t stride = rec.size() <= 400 ? 1 : layerfs::testing::kSanitized ? 29 : 7;
  for (size_t i = 0; i < rec.size(); i += stride) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      std::string bad = rec;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      kv::Batch b;
      b.Put(CfOf(kind), id.AsKey(), bad);
      ASSERT_TRUE(kv->Write(b, false).ok());
      ObjectStore fresh(kv, kSeed, Policy{});
      auto g = fresh.Get(kind, id);
      tries++;
      if (g.ok()) {
        ASSERT_EQ(*g, content) << "byte " << i << " mask " << int(mask);
      } else {
        eio++;
        ASSERT_EQ(g.status().code(), EIO) << "byte " << i << " mask " << int(mask) << ": " << g.status().ToString();
      }
    }
  }
  EXPECT_GT(eio, tries * 9 / 10);
  {
    std::string bad = rec;
    bad[rec.size() - rec.size() / 3] ^= 0x10;
    kv::Batch b;
    b.Put(CfOf(kind), id.AsKey(), bad);
    ASSERT_TRUE(kv->Write(b, false).ok());
    ObjectStore fresh(kv, kSeed, Policy{});
    EXPECT_EQ(fresh.Get(kind, id).status().code(), EIO);
  }
  // Truncations.
  for (size_t n = 0; n < rec.size(); n += std::max<size_t>(1, rec.size() / 40)) {
    kv::Batch b;
    b.Put(CfOf(kind), id.AsKey(), rec.substr(0, n));
    ASSERT_TRUE(kv->Write(b, false).ok());
    ObjectStore fresh(kv, kSeed, Policy{});
    EXPECT_EQ(fresh.Get(kind, id).status().code(), EIO) << "truncated to " << n;
  }
  kv::Batch b;
  b.Put(CfOf(kind), id.AsKey(), rec);
  ASSERT_TRUE(kv->Write(b, false).ok());
  ObjectStore fresh(kv, kSeed, Policy{});
  EXPECT_TRUE(fresh.Get(kind, id).ok());
}

TEST_F(ObjectStoreTest, DamagedRawRecordIsEio) {
  auto os = Make();
  auto r = os->Put(Kind::kBlob, "small raw content, stored as is", std::nullopt);
  ASSERT_TRUE(os->Flush().ok());
  ExpectEveryDamageIsEio(kv_.get(), Kind::kBlob, r->id);
}

TEST_F(ObjectStoreTest, DamagedCompressedRecordIsEio) {
  auto os = Make();
  auto r = os->Put(Kind::kBlob, TextBytes(400000, 9), std::nullopt);
  ASSERT_EQ(os->Info(Kind::kBlob, r->id)->encoding, Encoding::kZstd);
  ASSERT_TRUE(os->Flush().ok());
  ExpectEveryDamageIsEio(kv_.get(), Kind::kBlob, r->id);
}

TEST_F(ObjectStoreTest, DamagedDeltaRecordIsEio) {
  auto os = Make();
  std::string v1 = RandomBytes(40000, 10), v2 = Edit(v1, 3);
  auto a = os->Put(Kind::kBlob, v1, std::nullopt);
  auto b = os->Put(Kind::kBlob, v2, a->id);
  ASSERT_EQ(os->Info(Kind::kBlob, b->id)->encoding, Encoding::kDelta);
  ASSERT_TRUE(os->Flush().ok());
  ExpectEveryDamageIsEio(kv_.get(), Kind::kBlob, b->id);
  // Damage to the base breaks the delta too.
  auto orig = **kv_->Get(kv::Cf::kBlobs, a->id.AsKey());
  std::string bad = orig;
  bad[bad.size() / 2] ^= 0x20;
  kv::Batch wb;
  wb.Put(kv::Cf::kBlobs, a->id.AsKey(), bad);
  ASSERT_TRUE(kv_->Write(wb, false).ok());
  auto fresh = Make();
  EXPECT_EQ(fresh->Get(Kind::kBlob, b->id).status().code(), EIO);
  // A delta whose base is gone is damage, not absence.
  kv::Batch del;
  del.Delete(kv::Cf::kBlobs, a->id.AsKey());
  ASSERT_TRUE(kv_->Write(del, false).ok());
  auto fresh2 = Make();
  EXPECT_EQ(fresh2->Get(Kind::kBlob, b->id).status().code(), EIO);
}

TEST_F(ObjectStoreTest, DamagedDuplicateIsNotDedupedAgainst) {
  auto os = Make();
  std::string c = TextBytes(5000, 11);
  auto r = os->Put(Kind::kBlob, c, std::nullopt);
  ASSERT_TRUE(os->Flush().ok());
  std::string rec = **kv_->Get(kv::Cf::kBlobs, r->id.AsKey());
  rec.back() ^= 1;
  kv::Batch b;
  b.Put(kv::Cf::kBlobs, r->id.AsKey(), rec);
  ASSERT_TRUE(kv_->Write(b, false).ok());
  auto fresh = Make();
  auto again = fresh->Put(Kind::kBlob, c, std::nullopt);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->added);
  EXPECT_NE(again->id, r->id);
  EXPECT_EQ(*fresh->Get(Kind::kBlob, again->id), c);
}

class HashOverride {
 public:
  explicit HashOverride(ObjectId constant) {
    base::SetHashOverrideForTesting([constant](std::string_view, uint64_t) { return constant; });
  }
  ~HashOverride() { base::SetHashOverrideForTesting(nullptr); }
};

TEST_F(ObjectStoreTest, InjectedHashCollision) {
  ObjectId constant = *ObjectId::FromHex("0123456789abcdef0123456789abcdef");
  std::string a = TextBytes(30000, 12), b = RandomBytes(500, 13), c = "third";
  ObjectId ia, ib, ic;
  {
    HashOverride o(constant);
    auto os = Make();
    auto ra = os->Put(Kind::kBlob, a, std::nullopt);
    auto rb = os->Put(Kind::kBlob, b, std::nullopt);
    auto rc = os->Put(Kind::kBlob, c, std::nullopt);
    ASSERT_TRUE(ra.ok() && rb.ok() && rc.ok());
    EXPECT_TRUE(ra->added && rb->added && rc->added);
    ia = ra->id;
    ib = rb->id;
    ic = rc->id;
    EXPECT_EQ(ia, constant);
    EXPECT_NE(ia, ib);
    EXPECT_NE(ib, ic);
    EXPECT_NE(ia, ic);
    EXPECT_EQ(*os->Get(Kind::kBlob, ia), a);
    EXPECT_EQ(*os->Get(Kind::kBlob, ib), b);
    EXPECT_EQ(*os->Get(Kind::kBlob, ic), c);
    // Dedup still finds each under its own generation.
    auto rb2 = os->Put(Kind::kBlob, b, std::nullopt);
    EXPECT_FALSE(rb2->added);
    EXPECT_EQ(rb2->id, ib);
    auto ra2 = os->Put(Kind::kBlob, a, std::nullopt);
    EXPECT_FALSE(ra2->added);
    EXPECT_EQ(ra2->id, ia);
    ASSERT_TRUE(os->Flush().ok());
    auto fresh = Make();
    EXPECT_EQ(*fresh->Get(Kind::kBlob, ia), a);
    EXPECT_EQ(*fresh->Get(Kind::kBlob, ib), b);
    EXPECT_EQ(*fresh->Get(Kind::kBlob, ic), c);
  }
  // After the override is reset, reads still verify (the ids are generation >= 0 hashes).
  auto fresh = Make();
  EXPECT_EQ(*fresh->Get(Kind::kBlob, ib), b);
  EXPECT_EQ(*fresh->Get(Kind::kBlob, ic), c);
  EXPECT_EQ(base::HashContent("x", kSeed), base::HashContent("x", kSeed, 0));
  EXPECT_NE(base::HashContent("x", kSeed), constant);
}

TEST_F(ObjectStoreTest, AbortDropsPending) {
  auto os = Make();
  auto r = os->Put(Kind::kBlob, "to be dropped", std::nullopt);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(*os->Exists(Kind::kBlob, r->id));
  os->Abort();
  EXPECT_FALSE(*os->Exists(Kind::kBlob, r->id));
  EXPECT_EQ(os->Get(Kind::kBlob, r->id).status().code(), ENOENT);
  EXPECT_TRUE(os->Flush().ok());
  EXPECT_FALSE(kv_->Get(kv::Cf::kBlobs, r->id.AsKey())->has_value());
}

TEST_F(ObjectStoreTest, TakeBatchMovesPending) {
  auto os = Make();
  auto r = os->Put(Kind::kTree, "tree bytes", std::nullopt);
  kv::Batch b;
  os->TakeBatch(&b);
  EXPECT_EQ(b.entries().size(), 1u);
  EXPECT_FALSE(kv_->Get(kv::Cf::kTrees, r->id.AsKey())->has_value());
  ASSERT_TRUE(kv_->Write(b, true).ok());
  EXPECT_EQ(*Make()->Get(Kind::kTree, r->id), "tree bytes");
}

}  // namespace
}  // namespace layerfs::objects
