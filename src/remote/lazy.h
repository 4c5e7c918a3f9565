// The object source of a lazy Store: fetches a missing record, with the rest of its delta chain
// the Store lacks, from the Store's lazy remotes (docs/design.md, "Lazy Stores").
//
// On a miss for X: the catalog gives X's entry; the chain is followed in the catalog (depth down
// by one per step, at most kMaxDepth steps) to the first record the Store has; the missing
// records are read in one ReadRanges batch, decoded and hashed bottom up, and only then written
// in one batch. The other records of a fetched zstd frame (its neighbours in the pack, most often
// the sibling trees and files a reader wants next) came in the same read: each that the Store lacks
// is decoded and hashed on its own and kept when it hashes right, so it costs no later fetch.
// Concurrent misses of one id wait for one fetch; at most kMaxConcurrent fetches run
// at once; the transport's timeout bounds each. Thread-safe (FUSE threads call it).
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "layerfs/store.h"
#include "objects/object_source.h"
#include "remote/remote.h"

namespace layerfs::remote {

class LazySource : public objects::ObjectSource {
 public:
  static constexpr int kMaxConcurrent = 4;
  explicit LazySource(Store& store) : store_(store) {}
  Status Fetch(objects::Kind kind, const ObjectId& id) override;

  // What this source fetched so far (for stats and benchmarks).
  uint64_t objects_fetched() const { return objects_.load(); }
  uint64_t bytes_fetched() const { return bytes_.load(); }

 private:
  Status FetchLocked(objects::Kind kind, const ObjectId& id);
  // ENOENT when `remote` does not have it.
  Status FetchFrom(Remote& remote, objects::Kind kind, const ObjectId& id);
  Result<std::vector<std::shared_ptr<Remote>>> LazyRemotes();
  // The entries of the zstd frame at `frame_offset` of pack `at` (its index read from the
  // catalog once per pack, then kept).
  Result<std::vector<IndexEntry>> FrameEntries(Remote& remote, const Located& at);

  Store& store_;
  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::set<std::pair<int, ObjectId>> in_flight_;
  int running_ = 0;
  std::map<std::string, std::shared_ptr<Remote>> remotes_;  // by name, reopened if the URL changed
  std::atomic<uint64_t> objects_{0}, bytes_{0};
  std::mutex frames_mu_;  // guards frames_
  // Zstd frames' entries by (remote, pack name), then frame offset.
  std::map<std::pair<std::string, std::string>, std::map<uint64_t, std::vector<IndexEntry>>> frames_;
};

// Installs a LazySource on the Store's ObjectStore when some remote is lazy (at open, and after
// a remote is added); removes it when none is. Returns the source (nullptr when none).
Result<std::shared_ptr<LazySource>> AttachLazySource(Store& store);

}  // namespace layerfs::remote
