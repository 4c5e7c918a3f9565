// MemTransport: std::map of key -> (bytes, version).
#include "remote/mem_transport.h"

#include <map>
#include <mutex>

#include "remote/backends.h"

namespace layerfs::remote {
namespace {

class MemTransport : public Transport {
 public:
  explicit MemTransport(std::string_view url) : url_(url) {}

  Status Put(std::string_view key, std::string_view data) override {
    LFS_TRY(CheckKey(key));
    std::lock_guard l(mu_);
    blobs_[std::string(key)] = {std::string(data), ++version_};
    return Status::Ok();
  }
  Status PutIfAbsent(std::string_view key, std::string_view data) override {
    LFS_TRY(CheckKey(key));
    std::lock_guard l(mu_);
    auto [it, inserted] = blobs_.try_emplace(std::string(key), Entry{std::string(data), version_ + 1});
    if (!inserted) return Status::Errorf(EEXIST, "remote {}: put '{}': already exists", url_, key);
    version_++;
    return Status::Ok();
  }
  Result<std::string> Get(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    std::lock_guard l(mu_);
    auto it = blobs_.find(key);
    if (it == blobs_.end()) return Absent("get", key);
    return it->second.data;
  }
  Result<uint64_t> Size(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    std::lock_guard l(mu_);
    auto it = blobs_.find(key);
    if (it == blobs_.end()) return Absent("size", key);
    return static_cast<uint64_t>(it->second.data.size());
  }
  Status ReadRanges(std::vector<RangeRead>* reads) override {
    Status first;
    std::lock_guard l(mu_);
    for (auto& r : *reads) {
      r.data.clear();
      r.status = CheckKey(r.key);
      if (r.status.ok()) {
        auto it = blobs_.find(r.key);
        if (it == blobs_.end()) {
          r.status = Absent("read", r.key);
        } else if (r.offset < it->second.data.size()) {
          r.data = it->second.data.substr(r.offset, r.length);
        }
      }
      if (!r.status.ok() && first.ok()) first = r.status;
    }
    return first;
  }
  Result<std::vector<std::string>> List(std::string_view prefix) override {
    LFS_TRY(CheckPrefix(prefix));
    std::lock_guard l(mu_);
    std::vector<std::string> keys;
    for (auto it = blobs_.lower_bound(prefix); it != blobs_.end() && it->first.starts_with(prefix); ++it)
      keys.push_back(it->first);
    return keys;
  }
  Status Delete(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    std::lock_guard l(mu_);
    if (auto it = blobs_.find(key); it != blobs_.end()) blobs_.erase(it);
    return Status::Ok();
  }
  Result<std::optional<RefValue>> GetRef(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    std::lock_guard l(mu_);
    auto it = blobs_.find(key);
    if (it == blobs_.end()) return std::optional<RefValue>();
    return std::optional<RefValue>(RefValue{it->second.data, std::to_string(it->second.version)});
  }
  Result<std::string> CasRef(std::string_view key, std::string_view value,
                             const std::optional<std::string>& expected) override {
    LFS_TRY(CheckKey(key));
    std::lock_guard l(mu_);
    auto it = blobs_.find(key);
    bool match = expected ? it != blobs_.end() && std::to_string(it->second.version) == *expected
                          : it == blobs_.end();
    if (!match) return Status::Errorf(ESTALE, "remote {}: set ref '{}': ref moved since it was read (stale token)", url_, key);
    blobs_[std::string(key)] = {std::string(value), ++version_};
    return std::to_string(version_);
  }
  const std::string& url() const override { return url_; }

 private:
  struct Entry {
    std::string data;
    uint64_t version;
  };
  Status Absent(std::string_view op, std::string_view key) const {
    return Status::Errorf(ENOENT, "remote {}: {} '{}': no such key", url_, op, key);
  }
  const std::string url_;
  std::mutex mu_;
  std::map<std::string, Entry, std::less<>> blobs_;  // GUARDED_BY(mu_)
  uint64_t version_ = 0;                              // GUARDED_BY(mu_)
};

}  // namespace

std::unique_ptr<Transport> NewMemTransport(std::string_view url) { return std::make_unique<MemTransport>(url); }

}  // namespace layerfs::remote
