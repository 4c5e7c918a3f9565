// FaultKv: wraps a Kv and injects failures, so error paths are testable without a broken disk.
// Thread-safe (the counters are atomics).
#pragma once

#include <atomic>

#include "kv/kv.h"

namespace layerfs::kv {

class FaultKv : public Kv {
 public:
  explicit FaultKv(Kv* base) : base_(base) {}
  // After `n` more successful writes, every write fails with `code` (ENOSPC by default) until
  // the next call; n < 0 disarms.
  void FailWritesAfter(int64_t n, int code = ENOSPC) {
    code_ = code;
    writes_left_ = n < 0 ? -1 : n;
  }
  void FailReads(bool on) { fail_reads_ = on; }

  Result<std::optional<std::string>> Get(Cf cf, std::string_view key, const Snapshot* s) override {
    if (fail_reads_) return Status::Error(EIO, "injected read failure");
    return base_->Get(cf, key, s);
  }
  Status Write(const Batch& b, bool sync) override {
    // -1: no fault armed; 0: every write fails (and keeps failing); n > 0: n more succeed.
    int64_t left = writes_left_.load();
    while (left > 0 && !writes_left_.compare_exchange_weak(left, left - 1)) {
    }
    if (left == 0) return Status::Error(code_, "injected write failure");
    return base_->Write(b, sync);
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
  Status SyncWal() override { return base_->SyncWal(); }
  Result<CfStats> Stats(Cf cf) override { return base_->Stats(cf); }

 private:
  Kv* base_;
  std::atomic<int64_t> writes_left_{-1};
  std::atomic<int> code_{ENOSPC};
  std::atomic<bool> fail_reads_{false};
};

}  // namespace layerfs::kv
