// Fuzz target: background encoding of pending records (docs/format.md, "Object records",
// encoding 3, and the `enc/` queue lists): crafted pending records, hints (to themselves, in
// cycles, to other kinds, to damage) and queue lists are loaded (LoadQueue) and encoded
// (BackgroundEncoder::Drain, Finalize), then read back.
//
// Input: u8 flags, then framed pieces, each an op byte and its bytes:
//   op % 4 == 0  u8 kind, u8 hint piece (0xff: none), content: an honest pending record of the
//                content under its real id (the keyed hash of kRemoteSeed), hinting at the id
//                of that piece
//   op % 4 == 1  u8 piece, record bytes: stored as is under that piece's id (damage)
//   op % 4 == 2  (u8 kind, u8 piece)*: a queue list naming those pieces' ids
//   op % 4 == 3  raw queue list bytes
// With flags & 1 a deferred Put (a Workspace commit's) of new content hinting at piece 0 joins
// the queue; flags & 2 uses the policy 2/1/1.
//
// Invariant: every honest record nothing overwrote still reads back its content, before and
// after encoding; once a drain succeeds, it is no longer pending; encoding ends.
#include <map>

#include "fuzz_remote.h"
#include "kv/kv.h"
#include "objects/background_encoder.h"
#include "objects/object_store.h"

using namespace layerfs;
using objects::Encoding;
using objects::Kind;

namespace {

std::string QueueKey(uint64_t n) {
  std::string k("enc/");
  base::PutBigEndian64(&k, n);
  return k;
}

Kind KindOf(uint8_t b) { return static_cast<Kind>(1 + b % 5); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  auto pieces = fuzz::Pieces(fuzz::AsView(data + 1, size - 1), 32);
  const uint64_t seed = fuzz::kRemoteSeed;
  // Every piece's id: the hash of its content for honest ones, of its bytes otherwise.
  std::vector<ObjectId> ids(pieces.size());
  for (size_t i = 0; i < pieces.size(); i++) {
    std::string_view p = pieces[i];
    const bool honest = p.size() >= 3 && static_cast<uint8_t>(p[0]) % 4 == 0;
    ids[i] = base::HashContent(honest ? p.substr(3) : p, seed);
  }
  auto id_of = [&](uint8_t piece) { return piece < ids.size() ? ids[piece] : ObjectId{}; };

  auto kv = kv::NewMemKv();
  kv::Batch b;
  struct Honest {
    Kind kind;
    ObjectId id;
    std::string content;
  };
  std::map<std::pair<kv::Cf, ObjectId>, std::optional<Honest>> last;  // the last write of each key
  uint64_t list = 1;
  for (size_t i = 0; i < pieces.size(); i++) {
    std::string_view p = pieces[i];
    if (p.empty()) continue;
    const uint8_t op = static_cast<uint8_t>(p[0]) % 4;
    p.remove_prefix(1);
    if (op == 0 && p.size() >= 2) {
      const Kind kind = KindOf(static_cast<uint8_t>(p[0]));
      const ObjectId hint = static_cast<uint8_t>(p[1]) == 0xff ? ObjectId{} : id_of(static_cast<uint8_t>(p[1]));
      std::string_view content = p.substr(2);
      std::string rec;
      base::PutU8(&rec, static_cast<uint8_t>(kind));
      base::PutU8(&rec, static_cast<uint8_t>(Encoding::kPending));
      base::PutVarint(&rec, 0);
      base::PutVarint(&rec, content.size());
      rec.append(hint.AsKey());
      rec.append(content);
      b.Put(objects::CfOf(kind), ids[i].AsKey(), rec);
      b.Put(kv::Cf::kIndex, QueueKey(list++), std::string(1, static_cast<char>(kind)) + std::string(ids[i].AsKey()));
      last[{objects::CfOf(kind), ids[i]}] = Honest{kind, ids[i], std::string(content)};
    } else if (op == 1 && !p.empty()) {
      const ObjectId id = id_of(static_cast<uint8_t>(p[0]));
      const Kind kind = p.size() > 1 ? KindOf(static_cast<uint8_t>(p[1])) : Kind::kBlob;
      b.Put(objects::CfOf(kind), id.AsKey(), p.substr(1));
      last[{objects::CfOf(kind), id}] = std::nullopt;
    } else if (op == 2) {
      std::string v;
      for (size_t j = 0; j + 1 < p.size(); j += 2) {
        base::PutU8(&v, static_cast<uint8_t>(KindOf(static_cast<uint8_t>(p[j]))));
        v.append(id_of(static_cast<uint8_t>(p[j + 1])).AsKey());
      }
      b.Put(kv::Cf::kIndex, QueueKey(list++), v);
    } else if (op == 3) {
      b.Put(kv::Cf::kIndex, QueueKey(list++), p);
    }
  }
  FUZZ_CHECK(kv->Write(b, false).ok());

  objects::Tuning tuning;
  tuning.cache_bytes = 0;
  objects::ObjectStore os(kv.get(), seed, (flags & 2) ? Policy{2, 1, 1} : Policy{}, tuning);
  auto check_honest = [&](bool must_be_final) {
    for (const auto& [key, h] : last) {
      if (!h) continue;
      auto got = os.Get(h->kind, h->id);
      FUZZ_CHECK(got.ok() && *got == h->content);
      if (must_be_final) {
        auto info = os.Info(h->kind, h->id);
        FUZZ_CHECK(info.ok() && info->encoding != Encoding::kPending);
      }
    }
  };
  check_honest(false);
  FUZZ_CHECK(os.LoadQueue().ok());
  std::optional<Honest> deferred;
  if ((flags & 1) && !pieces.empty()) {
    objects::Txn txn(false, /*deferred=*/true);
    std::string content = "deferred content " + std::to_string(size) + std::string(pieces[0]);
    auto put = os.Put(Kind::kBlob, content, ids[0], &txn);
    if (put.ok()) {
      kv::Batch tb;
      os.TakeBatch(&tb, &txn);
      FUZZ_CHECK(kv->Write(tb, false).ok());
      os.Enqueue(&txn);
      deferred = Honest{Kind::kBlob, put->id, content};
    }
  }
  objects::BackgroundEncoder enc(os);
  // Drain stops at the first failure (it is queued again): a few rounds, then what remains.
  Status drained;
  for (int round = 0; round < 4; round++) {
    drained = enc.Drain();
    if (drained.ok() && os.QueuedCount() == 0) break;
  }
  // Every honest record, encoded directly too (a hint's pending chain is encoded first).
  bool all_final = drained.ok() && os.QueuedCount() == 0;
  for (const auto& [key, h] : last)
    if (h && !os.Finalize(h->kind, h->id).ok()) all_final = false;
  check_honest(all_final);
  if (deferred) {
    auto got = os.Get(deferred->kind, deferred->id);
    FUZZ_CHECK(got.ok() && *got == deferred->content);
  }
  return 0;
}
