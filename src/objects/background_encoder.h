// BackgroundEncoder: encodes an ObjectStore's pending records (deferred by Workspace commits)
// on a thread of its own, oldest first, so a commit returns once its raw content is durable.
//
// The thread runs at nice 10, below the threads serving mounts and commits.
// Owned by the Store; the daemon starts it (Start), other processes do not, and whatever is left
// pending stays readable and is encoded by the next encoder, or by Drain (stats, gc). Each record
// is finalized in one unsynced batch (ObjectStore::Finalize): a crash at any point leaves every
// record pending or final, both readable. A failed finalization (a full disk) leaves the record
// pending and is retried after a pause that grows to 5 s.
//
// Thread-safe. Stop(true) encodes everything queued before returning; Stop(false) returns after
// the record in hand (a daemon's exit: never held up by a backlog).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "layerfs/status.h"
#include "objects/object_store.h"

namespace layerfs::objects {

class BackgroundEncoder {
 public:
  explicit BackgroundEncoder(ObjectStore& os) : os_(os) {}
  ~BackgroundEncoder() { Stop(false); }
  BackgroundEncoder(const BackgroundEncoder&) = delete;
  BackgroundEncoder& operator=(const BackgroundEncoder&) = delete;

  // Starts the thread (idempotent); from now on Workspace commits defer their encoding.
  void Start();
  void Stop(bool drain);
  bool running() const { return running_; }
  // Returns once nothing is pending: waits for the thread, or encodes on the caller's thread
  // when none runs. The first error of an inline finalization is returned (the rest stay queued);
  // with the thread running, its last error as soon as its last attempt failed (ENOSPC on a
  // full disk: callers that can work with pending records go on).
  Status Drain();
  // Records finalized by this encoder (and by Drain), and failures retried.
  uint64_t finalized() const { return finalized_; }
  uint64_t failures() const { return failures_; }

 private:
  void Loop();

  ObjectStore& os_;
  std::mutex mu_;  // Start/Stop
  std::thread thread_;
  std::atomic<bool> running_{false}, stop_{false}, drain_on_stop_{false};
  std::atomic<uint64_t> finalized_{0}, failures_{0};
  std::atomic<bool> failing_{false};  // the thread's last attempt failed
  std::mutex pause_mu_;  // the pause after a failure, cut short by Stop
  std::condition_variable pause_cv_;
  std::mutex err_mu_;
  Status last_error_;  // the thread's last failure (guarded by err_mu_)
};

}  // namespace layerfs::objects
