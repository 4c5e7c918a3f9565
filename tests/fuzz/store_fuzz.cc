// Fuzz target: history read from crafted objects (docs/format.md, "Object records" and the
// encodings): a Store over a MemKv whose objects are the input's records in slots
// (fuzz_objects.h), with branch main at slot 0 and side at slot 1. Runs what reads history:
// resolve, log (first parents and all), lookup and cat of the root's entries, diff, merge,
// verify, stats and gc.
#include "fuzz_objects.h"
#include "history/keys.h"
#include "layerfs/store.h"
#include "merge/merge.h"
#include "objects/object_store.h"

using namespace layerfs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto pieces = fuzz::Pieces(fuzz::AsView(data, size), 24);
  auto kv = kv::NewMemKv();
  auto st = Store::OpenOnKv(kv.get(), Policy{});
  FUZZ_CHECK(st.ok());
  auto& store = **st;
  store.objects().SetIdCheckForFuzzing(fuzz::SlotChecker(store.objects().seed()));
  fuzz::SeedSlots(kv.get(), pieces);
  kv::Batch b;
  b.Put(kv::Cf::kMeta, history::RefKey("main"), fuzz::SlotId(0).AsKey());
  b.Put(kv::Cf::kMeta, history::RefKey("side"), fuzz::SlotId(1).AsKey());
  (void)kv->Write(b, false);
  const ObjectId main = fuzz::SlotId(0), side = fuzz::SlotId(1);
  (void)store.Resolve("main~1");
  (void)store.Resolve("main^2~1");
  (void)store.Log(main, 32);
  (void)store.LogAll(main, 32);
  if (auto c = store.GetCommit(main); c.ok()) {
    if (auto root = store.ReadTree(c->root); root.ok()) {
      for (size_t i = 0; i < root->size() && i < 8; i++) {
        auto e = store.Lookup(main, (*root)[i].name);
        if (e.ok() && e->type == EntryType::kFile) {
          auto content = store.ReadFile(*e);
          if (content.ok()) FUZZ_CHECK(content->size() == e->size);
        }
      }
    }
  }
  (void)store.Diff(main, side);
  (void)merge::MergeBases(store, {main}, {side});
  {
    objects::Txn txn;
    (void)merge::MergeCommits(store, main, side, {}, &txn);
  }
  auto v = store.Verify({});
  (void)v;
  (void)store.Stats();
  (void)store.Gc();
  return 0;
}
