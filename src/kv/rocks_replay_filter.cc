#include "kv/rocks_replay_filter.h"

#include <optional>

#include <rocksdb/write_batch.h>

#include "kv/kv.h"
#include <spdlog/spdlog.h>

namespace layerfs::kv {
namespace {

class ReplayFilter : public rocksdb::WalFilter {
 public:
  explicit ReplayFilter(std::function<bool(std::string_view, std::string_view)> ok) : ok_(std::move(ok)) {}
  const char* Name() const override { return "LayerfsReplayFilter"; }

  void ColumnFamilyLogNumberMap(const std::map<uint32_t, uint64_t>&,
                                const std::map<std::string, uint32_t>& names) override {
    auto it = names.find(CfName(Cf::kWorkspace));
    if (it != names.end()) workspace_ = it->second;
  }

  WalProcessingOption LogRecordFound(unsigned long long log, const std::string&, const rocksdb::WriteBatch& batch,
                                     rocksdb::WriteBatch*, bool* changed) override {
    *changed = false;
    if (stopped_) return WalProcessingOption::kStopReplay;
    Check h(this);
    (void)batch.Iterate(&h);
    if (h.bad) {
      stopped_ = true;
      spdlog::warn("database: WAL replay stopped in log {} at a batch of {} updates whose data-log "
                   "record lies past its segment's end (a tail lost with the power); later batches are dropped",
                   log, batch.Count());
      return WalProcessingOption::kStopReplay;
    }
    return WalProcessingOption::kContinueProcessing;
  }

 private:
  struct Check : rocksdb::WriteBatch::Handler {
    explicit Check(ReplayFilter* f) : f(f) {}
    rocksdb::Status PutCF(uint32_t cf, const rocksdb::Slice& k, const rocksdb::Slice& v) override {
      if (f->workspace_ && cf == *f->workspace_ && !f->ok_(std::string_view(k.data(), k.size()), std::string_view(v.data(), v.size())))
        bad = true;
      return rocksdb::Status::OK();
    }
    rocksdb::Status DeleteCF(uint32_t, const rocksdb::Slice&) override { return rocksdb::Status::OK(); }
    rocksdb::Status SingleDeleteCF(uint32_t, const rocksdb::Slice&) override { return rocksdb::Status::OK(); }
    rocksdb::Status DeleteRangeCF(uint32_t, const rocksdb::Slice&, const rocksdb::Slice&) override {
      return rocksdb::Status::OK();
    }
    rocksdb::Status MergeCF(uint32_t, const rocksdb::Slice&, const rocksdb::Slice&) override {
      return rocksdb::Status::OK();
    }
    void LogData(const rocksdb::Slice&) override {}
    rocksdb::Status MarkBeginPrepare(bool) override { return rocksdb::Status::OK(); }
    rocksdb::Status MarkEndPrepare(const rocksdb::Slice&) override { return rocksdb::Status::OK(); }
    rocksdb::Status MarkCommit(const rocksdb::Slice&) override { return rocksdb::Status::OK(); }
    rocksdb::Status MarkRollback(const rocksdb::Slice&) override { return rocksdb::Status::OK(); }
    rocksdb::Status MarkNoop(bool) override { return rocksdb::Status::OK(); }
    ReplayFilter* f;
    bool bad = false;
  };

  std::function<bool(std::string_view, std::string_view)> ok_;
  std::optional<uint32_t> workspace_;

 public:
  bool stopped_ = false;
};

}  // namespace

bool ReplayStopped(const rocksdb::WalFilter& filter) {
  auto* f = dynamic_cast<const ReplayFilter*>(&filter);
  return f && f->stopped_;
}

std::unique_ptr<rocksdb::WalFilter> NewReplayFilter(std::function<bool(std::string_view, std::string_view)> ok) {
  return std::make_unique<ReplayFilter>(std::move(ok));
}

}  // namespace layerfs::kv
