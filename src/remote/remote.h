// Remote: one remote as one Store sees it — its transport, its config, its branches, and the
// Store's local catalog of the remote's pack indexes (where each record is, whether a pack has
// been fetched). Push, fetch and the lazy object source are built on it (docs/design.md,
// "Remotes"). Owns its transport; borrows the Store. Thread-safe: catalog refreshes are
// serialised, everything else may run from several threads (FUSE threads fetch through one).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "layerfs/store.h"
#include "remote/config.h"
#include "remote/pack.h"
#include "remote/transport.h"

namespace layerfs::remote {

struct BranchHead {
  ObjectId id;
  std::string token;  // for a compare-and-swap of this ref
};

// A record on the remote: its index entry and its pack.
struct Located {
  IndexEntry entry;
  uint32_t pack_number = 0;
  std::string pack;
};

class Remote {
 public:
  // The Store's remote `name`, or one described by `info` (clone, tests). Opens the transport;
  // no round trip yet.
  static Result<std::unique_ptr<Remote>> Open(Store& store, const std::string& name);
  static Result<std::unique_ptr<Remote>> Open(Store& store, const RemoteInfo& info);

  const RemoteInfo& info() const { return info_; }
  const std::string& name() const { return info_.name; }
  Transport& transport() { return *t_; }

  // The remote's config; nullopt when the remote is empty.
  Result<std::optional<RemoteConfig>> ReadConfig();
  // Checks the remote against the Store: the same id key, or DIVERGED with one line. With
  // `create`, an empty remote gets this Store's config first (PutIfAbsent; a racing writer's
  // config wins and is checked). A remote whose id changed (recreated under the same URL) costs
  // the Store its catalog and remote-tracking refs of the old one. Returns false for an empty
  // remote when !create.
  Result<bool> Attach(bool create);

  Result<std::map<std::string, BranchHead>> Branches();
  Result<std::optional<BranchHead>> Branch(const std::string& branch);
  // Moves the remote branch to `id` if its token is still `token` (nullopt: it must be absent);
  // ESTALE otherwise. Returns the new token.
  Result<std::string> SetBranch(const std::string& branch, const ObjectId& id, const std::optional<std::string>& token);

  // Lists the remote's indexes, takes in those not catalogued yet and forgets those gone.
  // `indexes` / `bytes` (optional) count what was read.
  Status Refresh(uint64_t* indexes = nullptr, uint64_t* bytes = nullptr);
  // Refresh, at most once per `interval` (for lazy misses).
  Status RefreshAtMostEvery(std::chrono::milliseconds interval);
  Result<std::optional<Located>> Lookup(kv::Cf cf, const ObjectId& id);

  struct Pack {
    std::string name;
    uint32_t number = 0;
    bool fetched = false;  // every record was local after a fetch in this gc epoch
  };
  Result<std::vector<Pack>> Packs();
  Result<PackIndex> IndexOf(const Pack& p);
  // Marks packs fetched in `b` (at the current gc epoch).
  Status MarkFetched(const std::vector<Pack>& packs, kv::Batch* b);

  // Reads the records of `wanted` (ranges of one pack merged when close), each checked against
  // its entry, not yet by hash. `bytes` (optional) adds what was read.
  Status ReadRecords(const std::vector<Located>& wanted, std::vector<std::string>* records, uint64_t* bytes = nullptr);

  // Uploads a pack, then its index, and takes the index into the catalog. Returns the bytes sent.
  Result<uint64_t> PutPack(const std::string& pack, const std::string& index);

 private:
  Remote(Store& store, RemoteInfo info, std::shared_ptr<Transport> t)
      : store_(store), info_(std::move(info)), t_(std::move(t)) {}
  Status Ingest(const std::string& pack, std::string_view raw_index, uint32_t number, kv::Batch* b);
  Result<uint32_t> NextPackNumber();
  Result<std::string> PackName(uint32_t number);
  Result<uint64_t> FetchMark();

  Store& store_;
  RemoteInfo info_;
  std::shared_ptr<Transport> t_;
  std::mutex refresh_mu_;  // one catalog refresh at a time
  std::mutex mu_;          // guards names_ and last_refresh_
  std::map<uint32_t, std::string> names_;
  std::optional<std::chrono::steady_clock::time_point> last_refresh_;
};

// Pack names: 12 hex digits of milliseconds, '-', 16 random hex digits.
std::string NewPackName();
bool ValidPackName(std::string_view name);

}  // namespace layerfs::remote
