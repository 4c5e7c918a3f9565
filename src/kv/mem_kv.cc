// MemKv: Kv over std::map, for tests. Snapshots copy the maps (tests are small).
#include <map>
#include <mutex>

#include "kv/kv.h"

namespace layerfs::kv {
namespace {

using Maps = std::array<std::map<std::string, std::string, std::less<>>, kNumCfs>;

class MemSnapshot : public Snapshot {
 public:
  explicit MemSnapshot(Maps m) : maps(std::move(m)) {}
  Maps maps;
};

class MemKv : public Kv {
 public:
  Result<std::optional<std::string>> Get(Cf cf, std::string_view key, const Snapshot* snap) override {
    std::lock_guard l(mu_);
    const auto& m = snap ? static_cast<const MemSnapshot*>(snap)->maps[int(cf)] : maps_[int(cf)];
    auto it = m.find(key);
    if (it == m.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  }
  Status Write(const Batch& batch, bool) override {
    std::lock_guard l(mu_);
    for (const auto& e : batch.entries()) {  // all or nothing: refuse before applying any
      if (e.op == Batch::Op::kPatch) LFS_TRY(CheckPatch(e.cf, e.value));
    }
    for (const auto& e : batch.entries()) {
      auto& m = maps_[int(e.cf)];
      switch (e.op) {
        case Batch::Op::kPut: m[e.key] = e.value; break;
        case Batch::Op::kDelete: m.erase(e.key); break;
        case Batch::Op::kDeleteRange:
          m.erase(m.lower_bound(e.key), m.lower_bound(e.value));
          break;
        case Batch::Op::kPatch:
          if (!ApplyPatch(e.value, &m[e.key])) return Status::Error(EIO, "malformed patch");
          break;
      }
    }
    return Status::Ok();
  }
  Status Scan(Cf cf, std::string_view begin, std::string_view end,
              const std::function<bool(std::string_view, std::string_view)>& fn,
              const Snapshot* snap) override {
    std::map<std::string, std::string, std::less<>> copy;
    {
      std::lock_guard l(mu_);
      const auto& m = snap ? static_cast<const MemSnapshot*>(snap)->maps[int(cf)] : maps_[int(cf)];
      auto hi = end.empty() ? m.end() : m.lower_bound(end);
      copy.insert(m.lower_bound(begin), hi);
    }
    for (const auto& [k, v] : copy)
      if (!fn(k, v)) break;
    return Status::Ok();
  }
  std::shared_ptr<const Snapshot> GetSnapshot() override {
    std::lock_guard l(mu_);
    return std::make_shared<MemSnapshot>(maps_);
  }
  Status Compact(Cf) override { return Status::Ok(); }
  Status CompactAll() override { return Status::Ok(); }
  Status Flush() override { return Status::Ok(); }
  Status SyncWal() override { return Status::Ok(); }
  Result<CfStats> Stats(Cf cf) override {
    std::lock_guard l(mu_);
    CfStats s;
    for (const auto& [k, v] : maps_[int(cf)]) {
      s.entries++;
      s.raw_key_bytes += k.size();
      s.raw_value_bytes += v.size();
    }
    s.data_bytes = s.raw_key_bytes + s.raw_value_bytes;
    s.sst_file_bytes = s.data_bytes;
    return s;
  }

 private:
  std::mutex mu_;
  Maps maps_;
};

}  // namespace

std::unique_ptr<Kv> NewMemKv() { return std::make_unique<MemKv>(); }

}  // namespace layerfs::kv
