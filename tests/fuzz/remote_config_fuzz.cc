// Fuzz target: what describes a remote, on the remote and in the Store (docs/format.md, "Remote
// layout" and the meta and index families): the remote's `config` blob and its branch refs
// (`refs/heads/BRANCH`), the Store's `remote/` entry, its remote-tracking refs (`rref/`), the
// `gc-epoch` key and the catalog records (`rpack/`, `rnum/`, `rloc/`). The remote is a
// MemTransport; the Store lives on a MemKv with the id key of kRemoteSeed.
//
// Input: u8 flags, then framed pieces: config, ref value of main, another branch name and its
// ref value, the `remote/origin` entry (only with flags & 1; an honest one otherwise, lazy with
// flags & 2), `rref/origin/main`, `rpack/origin/PACK`, `rnum/origin/1`, `rloc/origin/` of one
// tree id, `gc-epoch`. Runs what reads them: the config's decoder (and its round trip), the
// remote list, Remote::Attach, Branches, Packs, IndexOf, Lookup, ref resolution and a fetch.
#include "fuzz_remote.h"
#include "history/keys.h"
#include "kv/kv.h"
#include "layerfs/store.h"
#include "history/store_impl.h"
#include "remote/catalog_keys.h"
#include "remote/remote.h"
#include "remote/sync.h"

using namespace layerfs;

namespace {

std::string_view Piece(const std::vector<std::string_view>& p, size_t i) { return i < p.size() ? p[i] : std::string_view(); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  fuzz::InstallRemoteOpener();
  const uint8_t flags = data[0];
  auto p = fuzz::Pieces(fuzz::AsView(data + 1, size - 1), 10);

  // The config's decoder alone: what decodes re-encodes to the same config.
  if (auto c = remote::DecodeRemoteConfig(Piece(p, 0)); c.ok()) {
    auto again = remote::DecodeRemoteConfig(remote::EncodeRemoteConfig(*c));
    FUZZ_CHECK(again.ok() && again->id == c->id && again->seed == c->seed && again->created == c->created &&
               again->policy.ToString() == c->policy.ToString());
  }

  auto t = std::shared_ptr<remote::Transport>(remote::NewMemTransport(fuzz::kRemoteUrl));
  fuzz::CurrentRemote() = t;
  if (p.size() > 0) (void)t->Put("config", p[0]);
  if (p.size() > 1) (void)t->Put("refs/heads/main", p[1]);
  if (p.size() > 3) (void)t->Put("refs/heads/" + std::string(p[2]), p[3]);

  auto kv = kv::NewMemKv();
  CreateOptions co;
  co.seed = fuzz::kRemoteSeed;
  co.empty = true;
  auto st = Store::OpenOnKv(kv.get(), Policy{}, co);
  FUZZ_CHECK(st.ok());
  Store& store = **st;
  {
    kv::Batch b;
    if ((flags & 1) && p.size() > 4) {
      b.Put(kv::Cf::kMeta, std::string(history::kRemotePrefix) + "origin", p[4]);
    } else {
      std::string v;  // docs/format.md: u8 1, bytes url, u8 flags, bytes remote id
      base::PutU8(&v, 1);
      base::PutBytes(&v, fuzz::kRemoteUrl);
      base::PutU8(&v, (flags & 2) ? 1 : 0);
      base::PutBytes(&v, "");
      b.Put(kv::Cf::kMeta, std::string(history::kRemotePrefix) + "origin", v);
    }
    if (flags & 2) b.Put(kv::Cf::kMeta, history::kLazyKey, "");
    if (p.size() > 5) b.Put(kv::Cf::kMeta, history::RemoteRefKey("origin", "main"), p[5]);
    if (p.size() > 6) b.Put(kv::Cf::kIndex, remote::PackKey("origin", "000000000001-0000000000000001"), p[6]);
    if (p.size() > 7) b.Put(kv::Cf::kIndex, remote::PackNumberKey("origin", 1), p[7]);
    if (p.size() > 8) b.Put(kv::Cf::kIndex, remote::LocationKey("origin", kv::Cf::kTrees, fuzz::SlotId(1)), p[8]);
    if (p.size() > 9) b.Put(kv::Cf::kMeta, history::kGcEpochKey, p[9]);
    FUZZ_CHECK(kv->Write(b, false).ok());
  }

  (void)remote::ListRemotes(store);
  (void)store.RemoteRefs();
  (void)store.Resolve("origin/main");
  auto info = remote::GetRemote(store, "origin");
  if (!info.ok()) return 0;
  auto r = remote::Remote::Open(store, *info);
  if (!r.ok()) return 0;
  remote::Remote& rem = **r;
  (void)rem.ReadConfig();
  auto branches = rem.Branches();
  if (branches.ok())
    for (const auto& [name, head] : *branches) FUZZ_CHECK(history::ValidBranchName(name));
  (void)rem.Branch("main");
  if (auto packs = rem.Packs(); packs.ok())
    for (const auto& pk : *packs) {
      auto idx = rem.IndexOf(pk);
      (void)idx;
    }
  if (auto loc = rem.Lookup(kv::Cf::kTrees, fuzz::SlotId(1)); loc.ok() && *loc) {
    FUZZ_CHECK((*loc)->entry.cf() == kv::Cf::kTrees && (*loc)->entry.id == fuzz::SlotId(1));
    std::vector<std::string> records;
    (void)rem.ReadRecords({**loc}, &records);
  }
  (void)rem.Attach(/*create=*/false);
  // A fetch over all of it: refs, the catalog (the pack above is gone from the remote), heads.
  auto fetched = remote::Fetch(store, "origin", {});
  (void)fetched;
  (void)store.RemoteRefs();
  return 0;
}
