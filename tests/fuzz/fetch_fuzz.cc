// Fuzz target: fetching from a remote whose keys are the input (docs/format.md, "Remote
// layout"; docs/design.md, "Remotes"), end to end over a MemTransport: a fetch into a fresh
// Store of the remote's id key (full, or with flags & 2 lazy), then reads of what its branches
// reach (log, the root tree, files, each through the lazy source when lazy).
//
// Input: u8 flags, then framed pieces in pairs: a key (config, pack/NAME, index/NAME,
// refs/heads/BRANCH, or anything) and its value, put on the remote as is. With flags & 1 the
// values of index/ keys lack their trailer and the target appends it.
//
// The invariant: an operation fails with a Status or yields correct bytes. After everything,
// every record the Store holds decodes (its delta bases present) to content that hashes to its
// id under the Store's key (no fuzzing override: a fetched object is verified for real).
#include "fuzz_remote.h"
#include "history/keys.h"
#include "kv/kv.h"
#include "layerfs/store.h"
#include "objects/object_store.h"
#include "remote/lazy.h"
#include "remote/sync.h"

using namespace layerfs;
using objects::Kind;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  fuzz::InstallRemoteOpener();
  const uint8_t flags = data[0];
  const bool lazy = flags & 2;
  auto pieces = fuzz::Pieces(fuzz::AsView(data + 1, size - 1), 32);
  auto t = std::shared_ptr<remote::Transport>(remote::NewMemTransport(fuzz::kRemoteUrl));
  fuzz::CurrentRemote() = t;
  for (size_t i = 0; i + 1 < pieces.size(); i += 2) {
    std::string_view key = pieces[i], value = pieces[i + 1];
    if ((flags & 1) && key.starts_with("index/")) (void)t->Put(key, fuzz::WithTrailer(value));
    else (void)t->Put(key, value);
  }

  auto kv = kv::NewMemKv();
  CreateOptions co;
  co.seed = fuzz::kRemoteSeed;
  co.empty = true;
  auto st = Store::OpenOnKv(kv.get(), Policy{}, co);
  FUZZ_CHECK(st.ok());
  Store& store = **st;
  FUZZ_CHECK(remote::AddRemote(store, {"origin", std::string(fuzz::kRemoteUrl), lazy, ""}).ok());
  FUZZ_CHECK(remote::AttachLazySource(store).ok());

  auto fetched = remote::Fetch(store, "origin", {});
  if (fetched.ok()) {
    for (const auto& u : fetched->refs) {
      if (!u.new_id) continue;
      // A full fetch has every head; a lazy one fetches on the first read.
      auto log = store.Log(*u.new_id, 8);
      if (!lazy) FUZZ_CHECK(store.objects().Exists(Kind::kCommit, *u.new_id).value_or(false));
      auto c = store.GetCommit(*u.new_id);
      if (!c.ok()) continue;
      auto root = store.ReadTree(c->root);
      if (!root.ok()) continue;
      for (size_t i = 0; i < root->size() && i < 8; i++) {
        const TreeEntry& e = (*root)[i];
        if (e.type == EntryType::kFile) {
          auto content = store.ReadFile(e);
          if (content.ok()) FUZZ_CHECK(content->size() == e.size);
        } else if (e.type == EntryType::kDir) {
          (void)store.ReadTree(e.id);
        }
      }
    }
    // A second fetch finds nothing new to take in, and fails no worse.
    (void)remote::Fetch(store, "origin", {});
  }

  // Nothing unverified got in: every object record decodes to bytes of its id.
  objects::LocalOnly local;
  for (kv::Cf cf : {kv::Cf::kBlobs, kv::Cf::kTrees, kv::Cf::kCommits}) {
    std::vector<std::pair<ObjectId, Kind>> ids;
    FUZZ_CHECK(kv->Scan(cf, "", "", [&](std::string_view k, std::string_view v) {
                   auto info = objects::ParseRecord(v);
                   FUZZ_CHECK(k.size() == ObjectId::kSize && info.ok());
                   ids.emplace_back(ObjectId::FromKey(k), info->kind);
                   return true;
                 }).ok());
    for (const auto& [id, kind] : ids) {
      auto content = store.objects().GetVerified(kind, id);
      FUZZ_CHECK(content.ok());
      FUZZ_CHECK(base::HashMatches(id, *content, fuzz::kRemoteSeed));
    }
  }
  return 0;
}
