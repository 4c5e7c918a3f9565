#include "kv/space_guard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>

namespace layerfs::kv {

namespace {

constexpr int64_t kRefreshNs = 200'000'000;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t EnvBytes(const char* name, uint64_t fallback) {
  const char* v = getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  unsigned long long n = strtoull(v, &end, 10);
  return end && *end == '\0' ? n : fallback;
}

std::string Mib(uint64_t b) { return fmt::format("{:.1f} MiB", b / 1048576.0); }

}  // namespace

SpaceGuard::Options SpaceGuard::DefaultOptions() {
  Options o;
  o.floor_bytes = EnvBytes("LAYERFS_SPACE_FLOOR", o.floor_bytes);
  o.reserve_bytes = EnvBytes("LAYERFS_SPACE_RESERVE", o.reserve_bytes);
  return o;
}

std::unique_ptr<SpaceGuard> SpaceGuard::Open(const std::string& store_dir, bool writable, const Options& opts) {
  auto g = std::unique_ptr<SpaceGuard>(new SpaceGuard());
  g->opts_ = opts;
  g->dir_ = store_dir;
  g->writable_ = writable && !store_dir.empty();
  if (!store_dir.empty()) {
    g->reserve_path_ = store_dir + "/reserve";
    struct stat st;
    if (stat(g->reserve_path_.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_blocks) * 512 >= opts.reserve_bytes)
      g->reserve_held_ = true;
  }
  std::lock_guard l(g->mu_);
  g->RefreshLocked();
  return g;
}

SpaceGuard::~SpaceGuard() = default;

void SpaceGuard::SetPendingBytes(std::function<uint64_t()> pending) {
  std::lock_guard l(mu_);
  pending_ = std::move(pending);
  refreshed_ns_ = 0;
}

void SpaceGuard::SetRelieve(std::function<bool()> relieve) {
  std::lock_guard l(mu_);
  relieve_ = std::move(relieve);
}

void SpaceGuard::SetFreeBytesForTest(std::function<uint64_t()> free_bytes) {
  std::lock_guard l(mu_);
  fake_free_ = std::move(free_bytes);
  RefreshLocked();
}

uint64_t SpaceGuard::Statvfs() {
  if (fake_free_) return fake_free_();
  if (dir_.empty()) return UINT64_MAX / 4;
  struct statvfs s;
  if (statvfs(dir_.c_str(), &s) != 0) return UINT64_MAX / 4;  // cannot tell: let the write find out
  return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
}

bool SpaceGuard::TakeReserveLocked() {
  int fd = ::open(reserve_path_.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  int rc = posix_fallocate(fd, 0, static_cast<off_t>(opts_.reserve_bytes));
  if (rc == 0) rc = fdatasync(fd);
  ::close(fd);
  if (rc != 0) {
    ::unlink(reserve_path_.c_str());
    return false;
  }
  reserve_held_ = true;
  return true;
}

void SpaceGuard::ReleaseReserve(std::string_view why) {
  std::lock_guard l(mu_);
  if (!reserve_held_) return;
  if (::unlink(reserve_path_.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("space: cannot release the reserve {}: {}", reserve_path_, strerror(errno));
    return;
  }
  reserve_held_ = false;
  spdlog::warn("space: released the {} reserve ({}); it is taken back once there is room", Mib(opts_.reserve_bytes),
               why);
  refreshed_ns_ = 0;
}

uint64_t SpaceGuard::RefreshLocked() {
  uint64_t free = Statvfs();
  uint64_t pending = 0;
  if (pending_) pending = pending_();
  const uint64_t kept = opts_.floor_bytes + pending;
  if (writable_) {
    if (!reserve_held_ && opts_.reserve_bytes > 0 && free >= kept + 2 * opts_.reserve_bytes) {
      if (TakeReserveLocked()) {
        spdlog::info("space: took the {} reserve back ({} were free)", Mib(opts_.reserve_bytes), Mib(free));
        free = Statvfs();
      }
    }
  }
  last_free_ = free;
  last_kept_ = kept;
  // Half the headroom may be admitted without asking again: the other half covers what the
  // database and other processes write meanwhile (and the refresh every 200 ms catches them).
  int64_t headroom = free > kept ? static_cast<int64_t>(free - kept) : 0;
  budget_ = headroom / 2;
  refreshed_ns_ = NowNs();
  return free;
}

Status SpaceGuard::Admit(uint64_t bytes, Use use) {
  Status s = AdmitOnce(bytes, use);
  if (s.ok() || s.code() != ENOSPC) return s;
  std::function<bool()> relieve;
  uint64_t pending = 0;
  {
    std::lock_guard l(mu_);
    relieve = relieve_;
    if (pending_) pending = pending_();
  }
  if (!relieve || pending < kRelieveBytes) return s;
  {
    std::lock_guard r(relieve_mu_);
    // Another writer may have flushed meanwhile: ask before flushing again.
    if (Status again = AdmitOnce(bytes, use); again.ok()) return again;
    if (!relieve()) return s;
    std::lock_guard l(mu_);
    refreshed_ns_ = 0;
  }
  return AdmitOnce(bytes, use);
}

Status SpaceGuard::AdmitOnce(uint64_t bytes, Use use) {
  if (use == Use::kFree) return Status::Ok();
  if (dir_.empty() && !fake_free_) return Status::Ok();
  const int64_t now = NowNs();
  if (now - refreshed_ns_.load(std::memory_order_relaxed) < kRefreshNs) {
    int64_t before = budget_.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
    if (before >= static_cast<int64_t>(bytes)) return Status::Ok();
  }
  std::lock_guard l(mu_);
  uint64_t free = RefreshLocked();
  // Small writes may take half the floor, never the memtables' share: that is what their
  // flush will write.
  uint64_t kept = use == Use::kGrow ? last_kept_ : last_kept_ - opts_.floor_bytes / 2;
  if (free >= kept && free - kept >= bytes) {
    budget_.fetch_sub(static_cast<int64_t>(bytes));
    return Status::Ok();
  }
  return Status::Errorf(ENOSPC, "no space left on device: {} free, {} more asked; the Store keeps {} for its database",
                        Mib(free), Mib(bytes), Mib(kept));
}

uint64_t SpaceGuard::FreeBytes() {
  std::lock_guard l(mu_);
  return RefreshLocked();
}

uint64_t SpaceGuard::KeptBytes() {
  std::lock_guard l(mu_);
  if (NowNs() - refreshed_ns_.load() >= kRefreshNs) RefreshLocked();
  return (dir_.empty() && !fake_free_) ? 0 : last_kept_;
}

}  // namespace layerfs::kv
