#include "objects/background_encoder.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>

#include <spdlog/spdlog.h>

namespace layerfs::objects {

void BackgroundEncoder::Start() {
  std::lock_guard l(mu_);
  if (running_) return;
  stop_ = false;
  running_ = true;
  os_.SetDeferring(true);
  // spdlog's registry is a lazily built singleton inside libspdlog; build it here so the thread
  // below (which logs) starts after it exists rather than racing the first log call elsewhere.
  spdlog::default_logger_raw();
  thread_ = std::thread([this] { Loop(); });
}

void BackgroundEncoder::Stop(bool drain) {
  std::lock_guard l(mu_);
  if (!running_) return;
  drain_on_stop_ = drain;
  {
    std::lock_guard pl(pause_mu_);  // a pause after a failure (a full disk) ends now
    stop_ = true;
  }
  pause_cv_.notify_all();
  os_.SetDeferring(false);
  thread_.join();
  running_ = false;
}

void BackgroundEncoder::Loop() {
  // Below the threads that serve mounts and commits: on a busy machine the encoding waits, not
  // the user. (Linux: a thread's nice value is its own.)
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);
  int pause_ms = 0;
  for (;;) {
    if (stop_ && (!drain_on_stop_ || os_.QueuedCount() == 0)) return;
    Queued e;
    if (!os_.PopQueued(&e)) {
      if (stop_) return;
      os_.WaitQueued(200);
      continue;
    }
    Status s = os_.Finalize(e.kind, e.id);
    if (s.ok()) {
      finalized_++;
      failing_ = false;
      pause_ms = 0;
      os_.DoneQueued(e, false);
      continue;
    }
    {
      std::lock_guard l(err_mu_);
      last_error_ = s;
    }
    failing_ = true;
    failures_++;
    spdlog::warn("background encoding of {} {}: {} (left pending, retried)", KindName(e.kind), e.id.Hex(),
                 s.message());
    os_.DoneQueued(e, true);
    // A full disk or a damaged record: do not spin. Stopping gives up on the rest (still pending
    // and readable; the next encoder retries).
    if (stop_) return;
    pause_ms = pause_ms == 0 ? 100 : std::min(pause_ms * 2, 5000);
    std::unique_lock pl(pause_mu_);
    pause_cv_.wait_for(pl, std::chrono::milliseconds(pause_ms), [this] { return stop_.load(); });
  }
}

Status BackgroundEncoder::Drain() {
  if (running_) {
    // The thread retries failures forever; a caller waiting while it fails (a full disk) gets
    // its last error at once instead of hanging: the records stay pending and readable.
    while (!os_.WaitQueueEmpty(200)) {
      if (failing_) {
        std::lock_guard l(err_mu_);
        return Status::Errorf(last_error_.ok() ? EIO : last_error_.code(), "background encoding is failing ({} "
                              "records pending): {}", os_.QueuedCount(), last_error_.message());
      }
      if (!running_) break;
    }
    if (running_) return Status::Ok();
  }
  size_t budget = os_.QueuedCount();
  Queued e;
  while (budget-- > 0 && os_.PopQueued(&e)) {
    Status s = os_.Finalize(e.kind, e.id);
    os_.DoneQueued(e, !s.ok());
    if (!s.ok()) return s;
    finalized_++;
  }
  return Status::Ok();
}

}  // namespace layerfs::objects
