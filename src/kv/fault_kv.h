// FaultKv: wraps a Kv and injects failures, so error paths are testable without a broken disk.
// Thread-safe (the counters are atomics).
//
// What it can do (tests/unit and docs/reliability.md):
//   FailWritesAfter(n, code)  n more writes succeed, then every write fails with `code` (ENOSPC
//                             by default): a disk that fills after the Nth write.
//   FailAfterNextSync(code)   writes succeed until a synced one has (a commit, an fsync), then
//                             fail: a disk that fills right after a sync.
//   FailSyncs(on)             SyncWal fails with EIO (a writeback error).
//   FailReads(on)             every read fails with EIO.
// A failed write applies nothing. Like a stopped RocksKv, the failures go on until Recover() (or
// a new arming) clears them: Recover() here stands for "space came back".
#pragma once

#include <atomic>

#include "kv/kv.h"

namespace layerfs::kv {

class FaultKv : public Kv {
 public:
  explicit FaultKv(Kv* base) : base_(base) {}
  // After `n` more successful writes, every write fails with `code` (ENOSPC by default) until
  // the next call or Recover(); n < 0 disarms.
  void FailWritesAfter(int64_t n, int code = ENOSPC) {
    code_ = code;
    after_sync_ = false;
    writes_left_ = n < 0 ? -1 : n;
  }
  // Writes succeed until the next synced write has succeeded; then they fail with `code`.
  void FailAfterNextSync(int code = ENOSPC) {
    code_ = code;
    writes_left_ = -1;
    after_sync_ = true;
  }
  void FailSyncs(bool on) { fail_syncs_ = on; }
  void FailReads(bool on) { fail_reads_ = on; }
  int64_t writes_failed() const { return writes_failed_.load(); }
  int64_t recoveries() const { return recoveries_.load(); }

  Result<std::optional<std::string>> Get(Cf cf, std::string_view key, const Snapshot* s) override {
    if (fail_reads_) return Status::Error(EIO, "injected read failure");
    return base_->Get(cf, key, s);
  }
  Status Write(const Batch& b, bool sync) override {
    // -1: no fault armed; 0: every write fails (and keeps failing); n > 0: n more succeed.
    int64_t left = writes_left_.load();
    while (left > 0 && !writes_left_.compare_exchange_weak(left, left - 1)) {
    }
    if (left == 0) {
      writes_failed_++;
      return Status::Error(code_, "injected write failure");
    }
    Status s = base_->Write(b, sync);
    if (s.ok() && sync && after_sync_.exchange(false)) writes_left_ = 0;
    return s;
  }
  Status Scan(Cf cf, std::string_view b, std::string_view e,
              const std::function<bool(std::string_view, std::string_view)>& fn,
              const Snapshot* s) override {
    if (fail_reads_) return Status::Error(EIO, "injected read failure");
    return base_->Scan(cf, b, e, fn, s);
  }
  std::shared_ptr<const Snapshot> GetSnapshot() override { return base_->GetSnapshot(); }
  Status Compact(Cf cf) override { return base_->Compact(cf); }
  Status CompactAll() override { return base_->CompactAll(); }
  Status Flush() override { return base_->Flush(); }
  Status SyncWal() override {
    if (fail_syncs_) return Status::Error(EIO, "injected sync failure");
    if (writes_left_.load() == 0) {
      writes_failed_++;
      return Status::Error(code_, "injected write failure");
    }
    return base_->SyncWal();
  }
  Result<CfStats> Stats(Cf cf) override { return base_->Stats(cf); }
  Status Recover() override {
    if (writes_left_.load() == 0) recoveries_++;
    writes_left_ = -1;
    after_sync_ = false;
    return base_->Recover();
  }
  bool read_only() const override { return base_->read_only(); }
  bool Aliased(Cf cf) const override { return base_->Aliased(cf); }

 private:
  Kv* base_;
  std::atomic<int64_t> writes_left_{-1};
  std::atomic<int> code_{ENOSPC};
  std::atomic<bool> after_sync_{false};
  std::atomic<bool> fail_syncs_{false};
  std::atomic<bool> fail_reads_{false};
  std::atomic<int64_t> writes_failed_{0}, recoveries_{0};
};

}  // namespace layerfs::kv
