// MemKv: Kv over std::map, for tests. Multi-version, as RocksDB is: each key keeps its values
// with the sequence number of the batch that wrote them, a snapshot is a sequence number, and a
// key's versions no live snapshot can see are dropped as it is written again (and in an
// occasional sweep). A snapshot costs O(1) instead of a copy of every family: the Workspace
// takes one per read, and copying the maps had been most of the time of the longest unit tests
// under the sanitizers (a quarter of WorkspaceTest.RandomOperationsAgainstModel under ASan).
#include <array>
#include <limits>
#include <optional>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "kv/kv.h"

namespace layerfs::kv {
namespace {

constexpr uint64_t kLatest = std::numeric_limits<uint64_t>::max();

struct Version {
  uint64_t seq;
  std::optional<std::string> value;  // nullopt: deleted
};
using Versions = std::vector<Version>;  // ascending seq, never empty in a map
using Map = std::map<std::string, Versions, std::less<>>;

// Shared by the Kv and its snapshots, so a snapshot may outlive the Kv.
struct State {
  std::mutex mu;
  uint64_t seq = 0;  // the last batch's
  std::array<Map, kNumCfs> maps;
  std::multiset<uint64_t> live;  // the sequence numbers live snapshots (and scans) read at
  uint64_t garbage = 0;          // versions kept only for live snapshots, about

  // The value of a key at seq (kLatest: the newest). REQUIRES: mu.
  static const std::optional<std::string>* At(const Versions& vs, uint64_t seq) {
    for (auto it = vs.rbegin(); it != vs.rend(); ++it)
      if (it->seq <= seq) return &it->value;
    return nullptr;
  }
  uint64_t Oldest() const { return live.empty() ? kLatest : *live.begin(); }
  // Drops the versions no snapshot at or after `oldest` can see; true when nothing is left
  // (the key reads as absent everywhere). REQUIRES: mu.
  static bool Prune(Versions* vs, uint64_t oldest) {
    size_t keep = 0;  // the newest version at or before oldest: what the oldest reader sees
    for (size_t i = 0; i < vs->size(); i++)
      if ((*vs)[i].seq <= oldest) keep = i;
    if (keep > 0) vs->erase(vs->begin(), vs->begin() + static_cast<ptrdiff_t>(keep));
    return vs->size() == 1 && !vs->front().value && vs->front().seq <= oldest;
  }
  void Set(Cf cf, std::string_view key, std::optional<std::string> value, uint64_t at) {
    auto& m = maps[int(cf)];
    auto it = m.find(key);
    if (it == m.end()) {
      if (!value) return;  // deleting what is not there
      it = m.emplace(std::string(key), Versions{}).first;
    }
    Versions& vs = it->second;
    if (!vs.empty() && vs.back().seq == at) {
      vs.back().value = std::move(value);  // the same batch wrote it before
    } else {
      vs.push_back({at, std::move(value)});
    }
    if (Prune(&vs, Oldest())) {
      m.erase(it);
    } else if (vs.size() > 1 || !vs.back().value) {
      garbage++;
    }
  }
  // Every family's unseen versions dropped, once they could be a good part of the maps.
  void SweepIfWorthIt() {
    size_t keys = 0;
    for (const auto& m : maps) keys += m.size();
    if (garbage < 1024 || garbage < keys / 4) return;
    const uint64_t oldest = Oldest();
    for (auto& m : maps)
      for (auto it = m.begin(); it != m.end();)
        it = Prune(&it->second, oldest) ? m.erase(it) : std::next(it);
    garbage = 0;
  }
  void Release(uint64_t at) {
    std::lock_guard l(mu);
    live.erase(live.find(at));
    SweepIfWorthIt();
  }
};

class MemSnapshot : public Snapshot {
 public:
  MemSnapshot(std::shared_ptr<State> st, uint64_t seq) : st_(std::move(st)), seq_(seq) {}
  ~MemSnapshot() override { st_->Release(seq_); }
  uint64_t seq() const { return seq_; }

 private:
  std::shared_ptr<State> st_;
  uint64_t seq_;
};

class MemKv : public Kv {
 public:
  Result<std::optional<std::string>> Get(Cf cf, std::string_view key, const Snapshot* snap) override {
    std::lock_guard l(st_->mu);
    const auto& m = st_->maps[int(cf)];
    auto it = m.find(key);
    if (it == m.end()) return std::optional<std::string>();
    const auto* v = State::At(it->second, SeqOf(snap));
    return v ? *v : std::optional<std::string>();
  }
  Status Write(const Batch& batch, bool) override {
    std::lock_guard l(st_->mu);
    for (const auto& e : batch.entries()) {  // all or nothing: refuse before applying any
      if (e.op == Batch::Op::kPatch) LFS_TRY(CheckPatch(e.cf, e.value));
    }
    const uint64_t at = ++st_->seq;
    for (const auto& e : batch.entries()) {
      switch (e.op) {
        case Batch::Op::kPut: st_->Set(e.cf, e.key, e.value, at); break;
        case Batch::Op::kDelete: st_->Set(e.cf, e.key, std::nullopt, at); break;
        case Batch::Op::kDeleteRange: {
          auto& m = st_->maps[int(e.cf)];
          std::vector<std::string> keys;
          for (auto it = m.lower_bound(e.key); it != m.end() && it->first < e.value; ++it)
            if (it->second.back().value) keys.push_back(it->first);
          for (const auto& k : keys) st_->Set(e.cf, k, std::nullopt, at);
          break;
        }
        case Batch::Op::kPatch: {
          std::string v;
          auto& m = st_->maps[int(e.cf)];
          if (auto it = m.find(e.key); it != m.end())
            if (const auto* cur = State::At(it->second, kLatest); cur && *cur) v = **cur;
          if (!ApplyPatch(e.value, &v)) return Status::Error(EIO, "malformed patch");
          st_->Set(e.cf, e.key, std::move(v), at);
          break;
        }
      }
    }
    return Status::Ok();
  }
  // fn may call back into this Kv: the records are handed over in batches read under the lock
  // at one sequence number (the snapshot's, else the newest when the scan began, held as a
  // snapshot would be), fn called without it.
  Status Scan(Cf cf, std::string_view begin, std::string_view end,
              const std::function<bool(std::string_view, std::string_view)>& fn,
              const Snapshot* snap) override {
    std::shared_ptr<const Snapshot> own;
    if (!snap) {
      own = GetSnapshot();
      snap = own.get();
    }
    const uint64_t at = SeqOf(snap);
    std::string cursor(begin);
    bool first = true;
    std::vector<std::pair<std::string, std::string>> batch;
    for (;;) {
      batch.clear();
      {
        std::lock_guard l(st_->mu);
        const auto& m = st_->maps[int(cf)];
        auto it = first ? m.lower_bound(cursor) : m.upper_bound(cursor);
        for (; it != m.end() && (end.empty() || it->first < end) && batch.size() < 256; ++it) {
          const auto* v = State::At(it->second, at);
          if (v && *v) batch.emplace_back(it->first, **v);
        }
        if (batch.empty()) return Status::Ok();
      }
      first = false;
      for (const auto& [k, v] : batch)
        if (!fn(k, v)) return Status::Ok();
      cursor = batch.back().first;
    }
  }
  std::shared_ptr<const Snapshot> GetSnapshot() override {
    std::lock_guard l(st_->mu);
    st_->live.insert(st_->seq);
    return std::make_shared<MemSnapshot>(st_, st_->seq);
  }
  Status Compact(Cf) override { return Status::Ok(); }
  Status CompactAll() override { return Status::Ok(); }
  Status Flush() override { return Status::Ok(); }
  Status SyncWal() override { return Status::Ok(); }
  Result<CfStats> Stats(Cf cf) override {
    std::lock_guard l(st_->mu);
    CfStats s;
    for (const auto& [k, vs] : st_->maps[int(cf)]) {
      const auto* v = State::At(vs, kLatest);
      if (!v || !*v) continue;
      s.entries++;
      s.raw_key_bytes += k.size();
      s.raw_value_bytes += (*v)->size();
    }
    s.data_bytes = s.raw_key_bytes + s.raw_value_bytes;
    s.sst_file_bytes = s.data_bytes;
    return s;
  }

 private:
  static uint64_t SeqOf(const Snapshot* snap) {
    return snap ? static_cast<const MemSnapshot*>(snap)->seq() : kLatest;
  }
  std::shared_ptr<State> st_ = std::make_shared<State>();
};

}  // namespace

std::unique_ptr<Kv> NewMemKv() { return std::make_unique<MemKv>(); }

}  // namespace layerfs::kv
