// DataLogCollector: frees the Store's unreferenced data-log segments on a thread of its own.
//
// A commit folds the Workspace's whole blocks into history and deletes their data-log records;
// the segments they lived in can then go (CollectDataLog: a WAL sync, a scan of every
// Workspace's block references, unlinks). Done inside the commit, that cost 1-15 ms of every
// `layerfs commit` (more on a busy disk) for space nobody was waiting for. With a collector
// started, Workspaces that want a collection (DataLog::RequestCollect) wake it instead
// (DataLog::WakeCollector) and return; the collector runs CollectDataLog, and runs it again
// while requests keep coming or pins (a read or write in flight) make it skip. What a
// collection frees is decided from durable records only, so running it later changes nothing
// but when the space comes back. Without a collector (a CLI process, tests), Workspaces collect
// inline as before.
//
// The daemon owns one for its Store's life: start it after the Store opens, destroy it before
// the Store closes. Destruction stops the thread and runs one last collection, so an exiting
// daemon leaves no dead segment behind. Runs are at least kMinGap apart: requests that come
// faster share one. The spacing saves work, not room: while the filesystem's free space is
// within kUrgentRoom of what writers may not take (kv::SpaceGuard), a wanted collection runs at
// once (checked when a request comes and every kRoomCheck while it waits), so a file deleted
// on a nearly full disk gives its space back as soon as before.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "kv/space_guard.h"
#include "layerfs/store.h"

namespace layerfs::workspace {

class DataLogCollector {
 public:
  // `min_gap`: kMinGap unless a test wants another.
  explicit DataLogCollector(Store& store, std::chrono::milliseconds min_gap = kMinGap);
  ~DataLogCollector();
  DataLogCollector(const DataLogCollector&) = delete;
  DataLogCollector& operator=(const DataLogCollector&) = delete;

  // Collections run so far (tests).
  uint64_t runs() const;
  static constexpr std::chrono::milliseconds kMinGap{500};
  static constexpr uint64_t kUrgentRoom = 256ull << 20;
  static constexpr std::chrono::milliseconds kRoomCheck{50};
  // Whether collections skip the spacing: free bytes below the kept bytes plus kUrgentRoom.
  static bool ShortOfRoom(kv::SpaceGuard& space);

 private:
  void Run();

  Store& store_;
  const std::chrono::milliseconds min_gap_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
  bool stop_ = false;
  uint64_t runs_ = 0;
  std::thread thread_;
};

}  // namespace layerfs::workspace
