// SpaceGuard: how much of the filesystem under a Store LayerFS lets its writers take, and the
// reserve it keeps for the database.
//
// Why (docs/design.md, "Full disks and damaged media"): once a write to RocksDB's WAL or a
// flush fails for lack of space, RocksDB takes no more writes until it is reopened, and the
// reopen itself needs room (a new MANIFEST, OPTIONS file and WAL). A full disk must therefore be
// the writers' problem first, never the database's. Growth is admitted only while the
// filesystem keeps `floor_bytes` free beyond what the database's memtables will write when they
// flush (`Use::kGrow`: data-log appends, large batches; `Use::kSmall`, batches under 64 KiB
// such as renames and attribute changes, may go down to half of that); what frees space
// (unlink, rmdir, truncate, branch deletion, gc) is always admitted (`Use::kFree`). A refusal is
// ENOSPC with the figures in its message.
//
// The reserve: a preallocated file STORE/reserve of `reserve_bytes`, for when something else
// fills the disk (a process writing beside the Store). It is released only when it is needed:
// when the database or the data log runs out of space, or when the Store cannot be opened for
// lack of space (a daemon starting on a full disk; the read-only verbs never release it). Held
// until then, it is there for the next open even after a daemon closed on a full disk. It is
// taken back once the filesystem has room for it twice over beyond what writers may not take.
// `layerfs stats` does not count it.
//
// Free space is statvfs's f_bavail, asked again at most every 200 ms while the admitted bytes
// stay within half of the headroom measured last, and at once otherwise; so writers far from a
// full disk pay no system call. Thread-safe. Owned by the Store; the Kv and the data log hold a
// pointer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "layerfs/status.h"

namespace layerfs::kv {

class SpaceGuard {
 public:
  struct Options {
    uint64_t floor_bytes = 16 << 20;
    uint64_t reserve_bytes = 8 << 20;
  };
  // The defaults, overridden by LAYERFS_SPACE_FLOOR / LAYERFS_SPACE_RESERVE (bytes; tests).
  static Options DefaultOptions();

  enum class Use { kGrow, kSmall, kFree };
  static constexpr uint64_t kSmallBytes = 64 << 10;

  // A guard over the filesystem holding `store_dir`; with `writable`, it takes the reserve if it
  // is missing and there is room. `store_dir` empty: no filesystem (a Store over a caller's Kv);
  // everything is admitted unless a test sets SetFreeBytesForTest.
  static std::unique_ptr<SpaceGuard> Open(const std::string& store_dir, bool writable, const Options& opts);
  ~SpaceGuard();

  // Ok if `bytes` more may be written for `use`; ENOSPC otherwise (nothing is written).
  Status Admit(uint64_t bytes, Use use);
  // What the database will write by itself (its memtables' flush): counted on top of the floor.
  // Called without locks held by the guard; may be called from any thread.
  void SetPendingBytes(std::function<uint64_t()> pending);
  // What the guard tries once before refusing a write: `relieve` (the database's flush) when the
  // pending bytes are at least kRelieveBytes, then it asks again. Memtables count at their full
  // size, superseded values included (a pending record and then its encoding, a block written
  // twice), and a flush writes only the latest of each: on a small filesystem the count alone
  // could refuse every write. Returns true if it flushed. Called without the guard's lock, by
  // one thread at a time.
  void SetRelieve(std::function<bool()> relieve);
  static constexpr uint64_t kRelieveBytes = 8 << 20;
  // Frees the reserve file (if held) so the database has room; `why` goes to the log.
  void ReleaseReserve(std::string_view why);
  // Free bytes now (statvfs, asked now).
  uint64_t FreeBytes();
  // The bytes writers may not take: the floor plus the pending bytes. Statfs on a mount reports
  // the free space less this, so df shows what a writer can still write.
  uint64_t KeptBytes();
  bool reserve_held() const { return reserve_held_.load(); }
  const Options& options() const { return opts_; }
  const std::string& reserve_path() const { return reserve_path_; }

  // Tests: a fake filesystem free-space figure (and no statvfs).
  void SetFreeBytesForTest(std::function<uint64_t()> free_bytes);

 private:
  SpaceGuard() = default;
  // Asks the filesystem, takes or releases the reserve as needed, and resets the budget.
  // REQUIRES: mu_ held.
  uint64_t RefreshLocked();
  bool TakeReserveLocked();
  Status AdmitOnce(uint64_t bytes, Use use);
  uint64_t Statvfs();

  Options opts_;
  std::string dir_, reserve_path_;
  bool writable_ = false;
  std::mutex mu_;  // the refresh, the reserve file, the callbacks
  std::function<uint64_t()> pending_, fake_free_;
  std::function<bool()> relieve_;
  std::mutex relieve_mu_;  // one relief at a time; never held with mu_
  std::atomic<bool> reserve_held_{false};
  // Bytes kGrow writers may still take before the filesystem is asked again, and when it was
  // asked last.
  std::atomic<int64_t> budget_{0};
  std::atomic<int64_t> refreshed_ns_{0};
  uint64_t last_free_ = 0, last_kept_ = 0;
};

}  // namespace layerfs::kv
