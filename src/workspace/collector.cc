#include "workspace/collector.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "workspace/workspace.h"

namespace layerfs::workspace {

DataLogCollector::DataLogCollector(Store& store, std::chrono::milliseconds min_gap)
    : store_(store), min_gap_(min_gap) {
  thread_ = std::thread([this] { Run(); });
  store_.data_log().SetCollectorWake([this] {
    std::lock_guard l(mu_);
    woken_ = true;
    cv_.notify_one();
  });
  // Segments an earlier process left (Workspace::Open requests a collection for them).
  if (store_.data_log().collect_wanted()) store_.data_log().WakeCollector();
}

DataLogCollector::~DataLogCollector() {
  store_.data_log().SetCollectorWake(nullptr);  // from here on, requesters collect themselves
  {
    std::lock_guard l(mu_);
    stop_ = true;
    cv_.notify_one();
  }
  thread_.join();
  if (store_.data_log().collect_wanted()) {
    Status s = CollectDataLog(store_, /*wait=*/true);
    if (!s.ok()) spdlog::warn("data log: {}", s.message());
  }
}

bool DataLogCollector::ShortOfRoom(kv::SpaceGuard& space) {
  const uint64_t kept = space.KeptBytes();
  return space.FreeBytes() < kept + kUrgentRoom;
}

uint64_t DataLogCollector::runs() const {
  std::lock_guard l(mu_);
  return runs_;
}

void DataLogCollector::Run() {
  std::unique_lock l(mu_);
  auto pause = std::chrono::seconds(1);
  std::chrono::steady_clock::time_point last{};  // when the last run ended
  for (;;) {
    // A collection skipped for a pin, or asked for again while it ran, is retried shortly; a
    // failing one (a damaged record, a full disk's WAL sync) is retried after a longer pause.
    const bool again = store_.data_log().collect_wanted();
    if (!woken_ && !stop_) {
      if (again) cv_.wait_for(l, std::chrono::milliseconds(20));
      else cv_.wait(l);
    }
    if (stop_) return;
    if (!woken_ && !store_.data_log().collect_wanted()) continue;
    // At most one run per min_gap_: every truncation or deletion of a file with blocks in the
    // log asks for one (a program rewriting files: one per write), and a run syncs the WAL and
    // scans every Workspace's records. Requests in between share the next run, unless the disk
    // is short of room, which is checked again every kRoomCheck while a request waits.
    const auto now = std::chrono::steady_clock::now();
    const auto next = last + min_gap_;
    if (now < next) {
      l.unlock();
      const bool urgent = ShortOfRoom(store_.space());
      l.lock();
      if (!urgent) {
        cv_.wait_until(l, std::min(next, now + kRoomCheck), [this] { return stop_; });
        if (stop_) return;
        if (std::chrono::steady_clock::now() < next) continue;
      }
    }
    woken_ = false;
    l.unlock();
    Status s = Status::Ok();
    if (store_.data_log().collect_wanted()) s = CollectDataLog(store_, /*wait=*/true);
    l.lock();
    last = std::chrono::steady_clock::now();
    runs_++;
    if (s.ok()) {
      pause = std::chrono::seconds(1);
    } else {
      spdlog::warn("data log: {} (retried in {} s)", s.message(), pause.count());
      cv_.wait_for(l, pause, [this] { return stop_; });
      pause = std::min<std::chrono::seconds>(pause * 2, std::chrono::seconds(60));
    }
  }
}

}  // namespace layerfs::workspace
