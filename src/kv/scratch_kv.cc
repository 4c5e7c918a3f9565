// ScratchKv: writes held in memory over a Kv that is only read (kv.h, NewScratchKv).
//
// The changes are one map per column family from key to value, or to nothing for a deleted key
// (a range deletion becomes one such mark per key of the base in the range). A write applies to
// a copy of the maps and swaps it in, so snapshots and scans share the maps they started with;
// what it holds is small (a Workspace's few records made to read it).
#include <array>
#include <map>
#include <mutex>

#include "kv/kv.h"

namespace layerfs::kv {
namespace {

using Changes = std::array<std::map<std::string, std::optional<std::string>, std::less<>>, kNumCfs>;

class ScratchSnapshot : public Snapshot {
 public:
  ScratchSnapshot(std::shared_ptr<const Snapshot> b, std::shared_ptr<const Changes> c)
      : base(std::move(b)), changes(std::move(c)) {}
  std::shared_ptr<const Snapshot> base;
  std::shared_ptr<const Changes> changes;
};

class ScratchKv : public Kv {
 public:
  explicit ScratchKv(Kv& base) : base_(base), changes_(std::make_shared<Changes>()) {}

  Result<std::optional<std::string>> Get(Cf cf, std::string_view key, const Snapshot* snap) override {
    auto [base_snap, changes] = View(snap);
    const auto& m = (*changes)[int(cf)];
    if (auto it = m.find(key); it != m.end()) return it->second;
    return base_.Get(cf, key, base_snap);
  }

  Status Write(const Batch& batch, bool) override {
    for (const auto& e : batch.entries())  // all or nothing: refuse before applying any
      if (e.op == Batch::Op::kPatch) LFS_TRY(CheckPatch(e.cf, e.value));
    std::lock_guard l(mu_);
    // Applied to a copy, swapped in whole: a failed read of the base leaves nothing applied, and
    // readers holding the old maps (snapshots, scans) keep them.
    auto next = std::make_shared<Changes>(*changes_);
    for (const auto& e : batch.entries()) {
      auto& m = (*next)[int(e.cf)];
      switch (e.op) {
        case Batch::Op::kPut: m[e.key] = e.value; break;
        case Batch::Op::kDelete: m[e.key] = std::nullopt; break;
        case Batch::Op::kDeleteRange: {
          auto hi = m.lower_bound(e.value);
          for (auto it = m.lower_bound(e.key); it != hi; ++it) it->second = std::nullopt;
          if (e.key >= e.value) break;
          std::vector<std::string> keys;
          LFS_TRY(base_.Scan(e.cf, e.key, e.value, [&](std::string_view k, std::string_view) {
            keys.emplace_back(k);
            return true;
          }));
          for (auto& k : keys) m[std::move(k)] = std::nullopt;
          break;
        }
        case Batch::Op::kPatch: {
          std::string v;
          if (auto it = m.find(e.key); it != m.end()) {
            if (it->second) v = *it->second;
          } else {
            LFS_ASSIGN(auto bv, base_.Get(e.cf, e.key));
            if (bv) v = std::move(*bv);
          }
          if (!ApplyPatch(e.value, &v)) return Status::Error(EINVAL, "malformed patch");
          m[e.key] = std::move(v);
          break;
        }
      }
    }
    changes_ = std::move(next);
    return Status::Ok();
  }

  Status Scan(Cf cf, std::string_view begin, std::string_view end,
              const std::function<bool(std::string_view, std::string_view)>& fn, const Snapshot* snap) override {
    auto [base_snap, changes] = View(snap);
    const auto& m = (*changes)[int(cf)];
    auto it = m.lower_bound(begin);
    const auto stop = end.empty() ? m.end() : m.lower_bound(end);
    bool more = true;
    // Our entries before `k` (or all left, with k null), then whether `k` is ours.
    auto emit_before = [&](const std::string_view* k) {
      for (; more && it != stop && (!k || it->first < *k); ++it)
        if (it->second) more = fn(it->first, *it->second);
    };
    LFS_TRY(base_.Scan(cf, begin, end, [&](std::string_view k, std::string_view v) {
      emit_before(&k);
      if (!more) return false;
      if (it != stop && it->first == k) {
        const auto& mine = it->second;
        ++it;
        if (mine) more = fn(k, *mine);
      } else {
        more = fn(k, v);
      }
      return more;
    }, base_snap));
    emit_before(nullptr);
    return Status::Ok();
  }

  std::shared_ptr<const Snapshot> GetSnapshot() override {
    std::lock_guard l(mu_);
    return std::make_shared<ScratchSnapshot>(base_.GetSnapshot(), changes_);
  }
  // Nothing of it is ever on disk: flushing, compacting and syncing have nothing to do.
  Status Compact(Cf) override { return Status::Ok(); }
  Status CompactAll() override { return Status::Ok(); }
  Status Flush() override { return Status::Ok(); }
  Status SyncWal() override { return Status::Ok(); }
  Result<CfStats> Stats(Cf cf) override { return base_.Stats(cf); }
  bool Aliased(Cf cf) const override { return base_.Aliased(cf); }

 private:
  std::pair<const Snapshot*, std::shared_ptr<const Changes>> View(const Snapshot* snap) {
    if (snap) {
      auto* s = static_cast<const ScratchSnapshot*>(snap);
      return {s->base.get(), s->changes};
    }
    std::lock_guard l(mu_);
    return {nullptr, changes_};
  }

  Kv& base_;
  std::mutex mu_;  // guards changes_ (the pointer; the maps it points to are never changed)
  std::shared_ptr<const Changes> changes_;
};

}  // namespace

std::unique_ptr<Kv> NewScratchKv(Kv& base) { return std::make_unique<ScratchKv>(base); }

}  // namespace layerfs::kv
