// FaultTransport: wraps a Transport and injects the faults a remote has in life, so push, fetch
// and lazy reads can be tested for what happens when the network goes away halfway, a remote
// hands back damaged or short bytes, or another host moves a ref between read and swap:
//   - FailAfter(n, code, ops): the next n calls of the chosen ops pass, then each fails with
//     `code` (e.g. ETIMEDOUT) until disarmed: a push or a read cut in half;
//   - Damage(kind, prefix): bytes returned by Get and ReadRanges for keys under `prefix` come
//     back with one byte flipped, or cut to half their length;
//   - SetHook(ops, fn): fn(op, key) runs before each chosen call reaches the backend (for a
//     CasRef: move the ref underneath through the base transport);
//   - counters of calls per op and of bytes moved, to check that a transfer follows the change.
// Failed calls do not reach the backend. The base transport is borrowed, or owned when given
// as a unique_ptr. Thread-safe: settings under a mutex, counters atomic; hooks run unlocked.
#pragma once

#include <array>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>

#include "remote/transport.h"

namespace layerfs::remote {

class FaultTransport : public Transport {
 public:
  enum Op : uint32_t {
    kPut = 1 << 0, kPutIfAbsent = 1 << 1, kGet = 1 << 2, kSize = 1 << 3, kReadRanges = 1 << 4,
    kList = 1 << 5, kDelete = 1 << 6, kGetRef = 1 << 7, kCasRef = 1 << 8,
  };
  static constexpr uint32_t kBlobWrites = kPut | kPutIfAbsent;
  static constexpr uint32_t kWrites = kPut | kPutIfAbsent | kDelete | kCasRef;
  static constexpr uint32_t kReads = kGet | kSize | kReadRanges | kList | kGetRef;
  static constexpr uint32_t kAll = kWrites | kReads;
  enum class Damage { kNone, kFlip, kTruncate };

  explicit FaultTransport(Transport* base) : base_(base) {}
  explicit FaultTransport(std::unique_ptr<Transport> base) : owned_(std::move(base)), base_(owned_.get()) {}

  // After `n` more calls of `ops` pass, every call of `ops` fails with `code`; n < 0 disarms.
  void FailAfter(int64_t n, int code = EIO, uint32_t ops = kAll) {
    std::lock_guard l(mu_);
    fail_left_ = n < 0 ? -1 : n;
    fail_code_ = code;
    fail_ops_ = ops;
  }
  // Every Put and PutIfAbsent fails with `code`; reads and refs still work.
  void FailPuts(int code = ENOSPC) { FailAfter(0, code, kBlobWrites); }
  void Disarm() { FailAfter(-1); }
  // Damages what Get and ReadRanges return for keys starting with `prefix`.
  void SetDamage(Damage d, std::string prefix = "") {
    std::lock_guard l(mu_);
    damage_ = d;
    damage_prefix_ = std::move(prefix);
  }
  // Runs fn(op, key) before each call of `ops` (ReadRanges: once, with its first key); nullptr
  // removes the hook.
  void SetHook(uint32_t ops, std::function<void(Op, std::string_view)> fn) {
    std::lock_guard l(mu_);
    hook_ops_ = ops;
    hook_ = fn ? std::make_shared<std::function<void(Op, std::string_view)>>(std::move(fn)) : nullptr;
  }

  uint64_t calls(Op op) const { return calls_[Index(op)].load(); }
  uint64_t bytes_written() const { return bytes_written_.load(); }
  uint64_t bytes_read() const { return bytes_read_.load(); }
  uint64_t ranges_read() const { return ranges_read_.load(); }
  Transport* base() const { return base_; }

  Status Put(std::string_view key, std::string_view data) override {
    LFS_TRY(Enter(kPut, key));
    bytes_written_ += data.size();
    return base_->Put(key, data);
  }
  Status PutIfAbsent(std::string_view key, std::string_view data) override {
    LFS_TRY(Enter(kPutIfAbsent, key));
    bytes_written_ += data.size();
    return base_->PutIfAbsent(key, data);
  }
  Result<std::string> Get(std::string_view key) override {
    LFS_TRY(Enter(kGet, key));
    auto r = base_->Get(key);
    if (r.ok()) {
      Spoil(key, &*r);
      bytes_read_ += r->size();
    }
    return r;
  }
  Result<uint64_t> Size(std::string_view key) override {
    LFS_TRY(Enter(kSize, key));
    return base_->Size(key);
  }
  Status ReadRanges(std::vector<RangeRead>* reads) override {
    Status s = Enter(kReadRanges, reads->empty() ? std::string_view() : std::string_view((*reads)[0].key));
    if (!s.ok()) {
      for (auto& r : *reads) r.status = s;
      return s;
    }
    s = base_->ReadRanges(reads);
    for (auto& r : *reads) {
      if (!r.status.ok()) continue;
      Spoil(r.key, &r.data);
      bytes_read_ += r.data.size();
      ranges_read_++;
    }
    return s;
  }
  Result<std::vector<std::string>> List(std::string_view prefix) override {
    LFS_TRY(Enter(kList, prefix));
    return base_->List(prefix);
  }
  Status Delete(std::string_view key) override {
    LFS_TRY(Enter(kDelete, key));
    return base_->Delete(key);
  }
  Result<std::optional<RefValue>> GetRef(std::string_view key) override {
    LFS_TRY(Enter(kGetRef, key));
    return base_->GetRef(key);
  }
  Result<std::string> CasRef(std::string_view key, std::string_view value,
                             const std::optional<std::string>& expected) override {
    LFS_TRY(Enter(kCasRef, key));
    return base_->CasRef(key, value, expected);
  }
  const std::string& url() const override { return base_->url(); }

 private:
  static int Index(Op op) { return __builtin_ctz(static_cast<uint32_t>(op)); }

  // Counts the call, runs the hook, then decides whether it fails.
  Status Enter(Op op, std::string_view key) {
    calls_[Index(op)]++;
    std::shared_ptr<std::function<void(Op, std::string_view)>> hook;
    {
      std::lock_guard l(mu_);
      if (hook_ && (hook_ops_ & op)) hook = hook_;
    }
    if (hook) (*hook)(op, key);
    std::lock_guard l(mu_);
    if (fail_left_ < 0 || !(fail_ops_ & op)) return Status::Ok();
    if (fail_left_ > 0) {
      fail_left_--;
      return Status::Ok();
    }
    return Status::Errorf(fail_code_, "remote {}: '{}': injected fault: {}", base_->url(), key, strerror(fail_code_));
  }

  void Spoil(std::string_view key, std::string* data) {
    std::lock_guard l(mu_);
    if (damage_ == Damage::kNone || !key.starts_with(damage_prefix_) || data->empty()) return;
    if (damage_ == Damage::kFlip) {
      (*data)[data->size() / 2] ^= 0x5a;
    } else {
      data->resize(data->size() / 2);
    }
  }

  std::unique_ptr<Transport> owned_;
  Transport* const base_;
  std::mutex mu_;
  int64_t fail_left_ = -1;  // GUARDED_BY(mu_): -1 disarmed, 0 failing, n > 0 passes left
  int fail_code_ = EIO;     // GUARDED_BY(mu_)
  uint32_t fail_ops_ = 0;   // GUARDED_BY(mu_)
  Damage damage_ = Damage::kNone;  // GUARDED_BY(mu_)
  std::string damage_prefix_;      // GUARDED_BY(mu_)
  uint32_t hook_ops_ = 0;          // GUARDED_BY(mu_)
  std::shared_ptr<std::function<void(Op, std::string_view)>> hook_;  // GUARDED_BY(mu_)
  std::array<std::atomic<uint64_t>, 9> calls_{};
  std::atomic<uint64_t> bytes_written_{0}, bytes_read_{0}, ranges_read_{0};
};

}  // namespace layerfs::remote
