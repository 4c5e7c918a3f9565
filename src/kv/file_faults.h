// FileFaults: failures injected into the files under a RocksKv (RocksDB's FileSystem), so the
// engine's own error paths (a WAL append or a flush that runs out of space, a failed sync) are
// testable without a full disk. Tests own one, pass it in RocksOptions::faults and arm it while
// the Kv runs. Thread-safe (atomics). Its wrapper sits above RocksOptions::io (a power-loss
// layer sees only the calls a fault let through) and below the sync order and the Store's file
// mode (kv.h, RocksOptions).
//
// An armed space budget lets appends write that many more bytes; the append that does not fit
// writes what fits (a torn append, as a real full disk leaves) and fails with RocksDB's NoSpace
// status, as does every append after it until the budget is disarmed or raised.
#pragma once

#include <atomic>
#include <cstdint>

namespace layerfs::kv {

struct FileFaults {
  enum Files : int { kAll = 0, kWal = 1, kTables = 2 };
  // Bytes appends may still write; -1: no limit.
  std::atomic<int64_t> space{-1};
  // Which files the budget applies to.
  std::atomic<int> files{kAll};
  // Syncs fail with EIO (the data stays written, as after a writeback error).
  std::atomic<bool> fail_syncs{false};
  // What was injected (for the test's assertions).
  std::atomic<int> appends_failed{0}, syncs_failed{0};

  void Arm(int64_t bytes, Files which = kAll) {
    files = which;
    space = bytes;
  }
  void Disarm() { space = -1; }
};

}  // namespace layerfs::kv
