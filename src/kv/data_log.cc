#include "kv/data_log.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/coding.h"
#include "base/hash.h"
#include "base/store_files.h"
#include "kv/space_guard.h"

namespace layerfs::kv {

DataRef DataRef::Of(uint32_t seg, uint64_t off, std::string_view bytes) {
  DataRef r(seg, off, static_cast<uint32_t>(bytes.size()));
  r.has_hash = true;
  r.hash = base::Hash64(bytes);
  return r;
}

void DataRef::EncodeTo(std::string* dst) const {
  base::PutFixed32(dst, segment);
  base::PutFixed64(dst, offset);
  base::PutFixed32(dst, has_hash ? (length | kHashFlag) : length);
  if (has_hash) base::PutFixed64(dst, hash);
}

bool DataRef::DecodePrefix(std::string_view src, DataRef* out, size_t* used) {
  base::Reader r(src);
  uint32_t len;
  if (!r.Fixed32(&out->segment) || !r.Fixed64(&out->offset) || !r.Fixed32(&len)) return false;
  out->has_hash = (len & kHashFlag) != 0;
  out->length = len & ~kHashFlag;
  out->hash = 0;
  if (out->has_hash && !r.Fixed64(&out->hash)) return false;
  // No segment is larger than kSegmentBytes (appends start a new one first): a ref reaching past
  // that is damage, and refusing it here keeps every offset + length below from wrapping.
  if (out->offset > DataLog::kSegmentBytes || out->length > DataLog::kSegmentBytes - out->offset) return false;
  *used = out->EncodedSize();
  return true;
}

bool DataRef::Decode(std::string_view src, DataRef* out) {
  size_t used = 0;
  return DecodePrefix(src, out, &used) && used == src.size();
}

struct DataLog::Segment {
  int fd = -1;
  std::string mem;  // in-memory log
  std::shared_ptr<FileIo> io;
  ~Segment() {
    if (fd >= 0) io->Close(fd);
  }
};

namespace {

std::string SegName(const std::string& dir, uint32_t seg) { return fmt::format("{}/{:08}.seg", dir, seg); }

Status Errno(std::string_view what) { return Status::Errorf(errno == ENOSPC ? ENOSPC : EIO, "{}: {}", what, strerror(errno)); }

}  // namespace

Result<std::unique_ptr<DataLog>> DataLog::Open(const std::string& dir, const DataLogOptions& opts) {
  auto log = std::unique_ptr<DataLog>(new DataLog());
  log->dir_ = dir;
  log->opts_ = opts;
  log->io_ = opts.io ? opts.io : FileIo::Posix();
  if (dir.empty()) return log;
  // Segments are written only inside the Store (base/store_files.h).
  LFS_TRY(base::RefuseSymlink(dir, "data log"));
  DIR* d = opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT) return log;  // created with the first segment
    return Errno("open " + dir);
  }
  std::vector<uint32_t> found;
  while (auto* e = readdir(d)) {
    unsigned seg = 0;
    char tail[8] = {};
    if (std::sscanf(e->d_name, "%8u.se%1s", &seg, tail) == 2 && seg > 0 && std::strlen(e->d_name) == 12)
      found.push_back(seg);
  }
  closedir(d);
  for (uint32_t seg : found) {
    auto s = std::make_shared<Segment>();
    s->io = log->io_;
    s->fd = log->io_->Open(SegName(dir, seg), (opts.read_only ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_CLOEXEC, 0);
    if (s->fd < 0) return Errno("open " + SegName(dir, seg));
    log->segments_[seg] = std::move(s);
    log->next_ = std::max(log->next_, seg + 1);
  }
  // Segments left by an earlier process may hold only dead data: look at them at the next chance.
  if (!found.empty() && !opts.read_only) log->collect_wanted_ = true;
  return log;
}

DataLog::~DataLog() = default;

Status DataLog::StartSegment() {
  if (active_ != 0) collect_wanted_ = true;
  uint32_t seg = next_++;
  auto s = std::make_shared<Segment>();
  s->io = io_;
  if (!dir_.empty()) {
    if (io_->Mkdir(dir_, 0700) == 0) {
      // A new data/ is a name in the Store's directory: without a sync of that, a power cut
      // takes data/ away with every segment in it, after their records were made durable.
      const auto slash = dir_.rfind('/');
      const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : dir_.substr(0, slash);
      if (io_->SyncDir(parent) != 0) return Errno("sync " + parent);
    } else if (errno != EEXIST) {
      return Errno("create " + dir_);
    }
    s->fd = io_->Open(SegName(dir_, seg), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (s->fd < 0) return Errno("create " + SegName(dir_, seg));
    // The new name must survive a crash before the records pointing into it are synced.
    if (io_->SyncDir(dir_) != 0) return Errno("sync " + dir_);
  }
  segments_[seg] = std::move(s);
  active_ = seg;
  tail_ = 0;
  kicked_ = 0;
  prev_kick_ = {0, 0};
  return Status::Ok();
}

std::string DataLog::SegmentPath(uint32_t seg) const {
  return dir_.empty() ? fmt::format("data segment {}", seg) : SegName(dir_, seg);
}

Status DataLog::Check(const DataRef& ref, std::string_view bytes) const {
  if (!ref.has_hash || base::Hash64(bytes) == ref.hash) return Status::Ok();
  return Status::Errorf(EIO, "{}: damaged: the {} bytes at offset {} do not match their checksum",
                        SegmentPath(ref.segment), ref.length, ref.offset);
}

Result<DataRef> DataLog::Append(std::string_view data) {
  if (opts_.read_only) return Status::Error(EROFS, "the Store is open read-only");
  if (data.size() > kSegmentBytes) return Status::Invalid("data log append larger than a segment");
  if (opts_.space) LFS_TRY(opts_.space->Admit(data.size(), SpaceGuard::Use::kGrow));
  DataRef ref;
  std::shared_ptr<Segment> s;
  std::pair<uint64_t, uint64_t> kick{0, 0};  // a range of the segment to start writing back
  std::pair<uint64_t, uint64_t> drop{0, 0};  // the range kicked before it: written, drop its pages
  {
    std::lock_guard l(mu_);
    if (active_ == 0 || tail_ + data.size() > kSegmentBytes) LFS_TRY(StartSegment());
    ref = {active_, tail_, static_cast<uint32_t>(data.size())};
    tail_ += data.size();
    if (ref.offset >= kicked_ + kWritebackBytes) {
      drop = prev_kick_;
      kick = {kicked_, ref.offset - kicked_};
      prev_kick_ = kick;
      kicked_ = ref.offset;
    }
    s = segments_[active_];
    unsynced_.insert(active_);
    if (s->fd < 0) {
      if (s->mem.size() < tail_) s->mem.resize(tail_);
      std::memcpy(s->mem.data() + ref.offset, data.data(), data.size());
      return ref;
    }
  }
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = io_->Pwrite(s->fd, data.data() + done, data.size() - done, ref.offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // The disk filled under us (something else wrote to it): what was written is pointed at
      // by nothing. The reserve goes to the database, which must still record the failure's
      // consequences (nothing) and the deletions that free space.
      if (n < 0 && errno == ENOSPC && opts_.space) {
        opts_.space->ReleaseReserve("the data log ran out of space");
        errno = ENOSPC;
      }
      return Errno("write " + SegName(dir_, ref.segment));
    }
    done += n;
  }
  // Marked again now that the bytes are in the file: a Sync that ran between the mark above and
  // this write took the mark and synced the segment without them, and nothing else would mark it
  // before the database syncs the batch that points here.
  {
    std::lock_guard l(mu_);
    unsynced_.insert(ref.segment);
  }
  // Start writing back what the earlier appends left behind (a hint: durability is still only
  // Sync's), so the disk writes while the caller goes on instead of all at its fsync.
  if (kick.second != 0) {
    (void)::sync_file_range(s->fd, static_cast<off_t>(kick.first), static_cast<off_t>(kick.second),
                            SYNC_FILE_RANGE_WRITE);
  }
  // The range kicked before is normally on disk by now: drop its pages (those still being
  // written back stay; no waiting). The file's reader has them in the mount's own page cache;
  // keeping a second copy here doubled the memory a large write touched, and on this kind of VM
  // fresh pages are the dearest part of a write (docs/design.md).
  if (drop.second != 0) {
    (void)::posix_fadvise(s->fd, static_cast<off_t>(drop.first), static_cast<off_t>(drop.second), POSIX_FADV_DONTNEED);
  }
  return ref;
}

void DataLog::DropReadBehind(int fd, uint64_t off, uint64_t len) {
  constexpr uint64_t kWindow = 2 << 20;
  const uint64_t boundary = (off + kWindow - 1) & ~(kWindow - 1);  // first window start >= off
  if (boundary >= off + len || boundary < 2 * kWindow) return;
  (void)::posix_fadvise(fd, static_cast<off_t>(boundary - 2 * kWindow), static_cast<off_t>(kWindow),
                        POSIX_FADV_DONTNEED);
}

Status DataLog::Read(const DataRef& ref, char* out) {
  std::shared_ptr<Segment> s;
  {
    std::lock_guard l(mu_);
    auto it = segments_.find(ref.segment);
    if (it == segments_.end()) return Status::Errorf(EIO, "{} is missing", SegmentPath(ref.segment));
    s = it->second;
    if (s->fd < 0) {
      if (ref.offset > s->mem.size() || ref.length > s->mem.size() - ref.offset)
        return Status::Errorf(EIO, "{} is shorter than its records", SegmentPath(ref.segment));
      std::memcpy(out, s->mem.data() + ref.offset, ref.length);
      return Check(ref, std::string_view(out, ref.length));
    }
  }
  size_t done = 0;
  while (done < ref.length) {
    ssize_t n = ::pread(s->fd, out + done, ref.length - done, ref.offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Errorf(EIO, "read {}: {}", SegmentPath(ref.segment), strerror(errno));
    // Shorter than the records pointing into it: cut short (a damaged disk or a crash before the
    // data was synced; records are made durable only after their data, so not by a crash alone).
    if (n == 0)
      return Status::Errorf(EIO, "{}: damaged: it ends before offset {} that a record points at",
                            SegmentPath(ref.segment), ref.offset + ref.length);
    done += n;
  }
  return Check(ref, std::string_view(out, ref.length));
}

Status DataLog::ReadPart(const DataRef& ref, uint64_t from, uint64_t len, char* out) {
  if (from > ref.length || len > ref.length - from) return Status::Corrupt("data log: read past the end of a block");
  if (from == 0 && len == ref.length) return Read(ref, out);
  std::string whole(ref.length, '\0');
  LFS_TRY(Read(ref, whole.data()));
  std::memcpy(out, whole.data() + from, len);
  return Status::Ok();
}

std::optional<DataLog::FileRange> DataLog::File(const DataRef& ref) {
  std::shared_ptr<Segment> s;
  {
    std::lock_guard l(mu_);
    auto it = segments_.find(ref.segment);
    if (it == segments_.end() || it->second->fd < 0) return std::nullopt;
    s = it->second;
  }
  struct stat st;
  if (::fstat(s->fd, &st) != 0 || ref.offset > static_cast<uint64_t>(st.st_size) ||
      ref.length > static_cast<uint64_t>(st.st_size) - ref.offset)
    return std::nullopt;
  return FileRange{s->fd, static_cast<uint64_t>(st.st_size), s};
}

Status DataLog::Sync() {
  // One at a time: a second caller must not return while the first is still syncing the
  // segments it took (the database syncs after this returns, from any thread).
  std::lock_guard serial(sync_mu_);
  std::vector<std::shared_ptr<Segment>> todo;
  std::set<uint32_t> segs;
  {
    std::lock_guard l(mu_);
    segs.swap(unsynced_);
    for (uint32_t seg : segs) {
      auto it = segments_.find(seg);
      if (it != segments_.end() && it->second->fd >= 0) todo.push_back(it->second);
    }
  }
  for (auto& s : todo) {
    if (io_->Fdatasync(s->fd) != 0) {
      Status st = Errno("sync data segment");
      std::lock_guard l(mu_);
      unsynced_.insert(segs.begin(), segs.end());
      return st;
    }
  }
  return Status::Ok();
}

void DataLog::NumberAbove(uint32_t seg) {
  std::lock_guard l(mu_);
  next_ = std::max(next_, seg + 1);
}

void DataLog::SetCollectorWake(std::function<void()> wake) {
  std::lock_guard l(wake_mu_);
  wake_ = std::move(wake);
}

bool DataLog::WakeCollector() {
  std::lock_guard l(wake_mu_);
  if (!wake_) return false;
  wake_();
  return true;
}

bool DataLog::empty() {
  std::lock_guard l(mu_);
  return segments_.empty();
}

Result<bool> DataLog::Collect(const std::function<Result<std::set<uint32_t>>()>& live_segments, bool wait) {
  if (opts_.read_only) return false;
  std::unique_lock<std::shared_mutex> excl(pins_, std::defer_lock);
  // try_lock only: a waiting exclusive locker could otherwise block a shared one taken while
  // another is held (a reader pins, then waits for a writer that also pins).
  for (int i = 0; !excl.try_lock() && wait && i < 50; i++) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (!excl.owns_lock()) return false;
  // Cleared before the records are read: a request made while they are (a commit deleting
  // blocks meanwhile) stays for the next run instead of being taken by this one.
  collect_wanted_ = false;
  auto live_or = live_segments();
  if (!live_or.ok()) {
    collect_wanted_ = true;
    return live_or.status();
  }
  std::set<uint32_t> live = std::move(*live_or);
  std::vector<std::shared_ptr<Segment>> dead;
  std::vector<uint32_t> dead_ids;
  {
    std::lock_guard l(mu_);
    for (auto it = segments_.begin(); it != segments_.end();) {
      if (live.count(it->first)) {
        ++it;
        continue;
      }
      dead_ids.push_back(it->first);
      dead.push_back(std::move(it->second));
      unsynced_.erase(it->first);
      if (it->first == active_) active_ = 0;
      it = segments_.erase(it);
    }
  }
  // Out of the map, the dead segments take no new append (an active one that died is replaced
  // at the next append) and no new pin, and everything pointing into them is durable as gone
  // (live_segments() synced the records first), so the unlinks run with reads and writes going
  // on: deleting a segment whose pages are still being written back waits for them, and under
  // the exclusive pin deleting a 512 MiB file stalled another writer's small writes for 110 ms.
  // The sync itself must stay under the pin: it syncs the data log and then the WAL, and a write
  // landing between the two would leave a durable record whose bytes are not.
  excl.unlock();
  for (uint32_t seg : dead_ids)
    if (!dir_.empty() && io_->Unlink(SegName(dir_, seg)) != 0 && errno != ENOENT)
      return Errno("delete data segment");
  // An empty log leaves no directory behind (a Store's size is its data); the next append makes it.
  // Under mu_, which an append holds from its mkdir of data/ to its segment's creation: checked
  // and removed outside it, the directory could go between the two and fail the append.
  if (!dir_.empty()) {
    std::lock_guard l(mu_);
    if (segments_.empty()) (void)io_->Rmdir(dir_);
  }
  return true;
}

}  // namespace layerfs::kv
