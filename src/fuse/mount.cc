// Mount: session setup, mount options, the serving thread, and unmount.
//
// Unmount never touches the session's /dev/fuse descriptor from another thread while the loop
// reads it: it flags the session as exited, detaches the mount (the kernel then aborts the
// connection and the loop's read fails with ENODEV), joins the loop thread, and only then lets
// fuse_session_unmount close the descriptor. A mount kept busy after the detach (an open file)
// is aborted through /sys/fs/fuse/connections.
#include "fuse/mount.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "fuse/ops_table.h"

namespace layerfs::fuse {
namespace {

// While this thread mounts, the last error libfuse logs (MountCapturingStderr).
thread_local std::string* g_mount_error = nullptr;

constexpr int kInitTimeoutMs = 10'000;
constexpr auto kDetachGrace = std::chrono::seconds(3);

void Init(void* userdata, fuse_conn_info* conn) noexcept {
  // Off: atomic_o_trunc (the kernel sends O_TRUNC as setattr), handle_killpriv (v1; the transport
  // asks for v2 instead: the kernel flags the writes and setattrs that must clear setuid/setgid,
  // and stops asking for security.capability before every write), writeback cache (measured and
  // not taken: Adapter::writeback), splice reads (writes are copied into memory anyway), remote
  // locks (the kernel keeps them locally).
  conn->want &= ~(FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_HANDLE_KILLPRIV | FUSE_CAP_WRITEBACK_CACHE |
                  FUSE_CAP_SPLICE_READ | FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_DONT_MASK);
  // No splice writes: every data-log block is read into memory and checked against its
  // checksum before it is replied (Workspace::FillRead), so there is nothing to splice.
  const unsigned on = FUSE_CAP_READDIRPLUS | FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_CACHE_SYMLINKS |
                      FUSE_CAP_ASYNC_READ | FUSE_CAP_PARALLEL_DIROPS;
  conn->want |= conn->capable & on;
  if (static_cast<Adapter*>(userdata)->writeback) conn->want |= conn->capable & FUSE_CAP_WRITEBACK_CACHE;
  conn->max_write = kMaxWrite;
  conn->max_readahead = kMaxReadahead;
  conn->time_gran = 1;
  static_cast<Adapter*>(userdata)->SignalInit(true);
}

// fuse_session_mount, with what is written to stderr meanwhile kept: a user's mount is made by
// fusermount3, which says on stderr why it refused (allow_other without user_allow_other, no
// passwd entry...). Its last line comes back in *refusal, else the last error libfuse logged
// (no access to /dev/fuse); everything goes on to the real stderr and the log too. Mounts take
// turns here, since stderr is the process's.
int MountCapturingStderr(fuse_session* se, const char* where, std::string* refusal) {
  static std::mutex mu;
  std::lock_guard l(mu);
  int p[2];
  const int saved = dup(2);
  if (saved < 0 || pipe2(p, O_CLOEXEC) != 0) {
    if (saved >= 0) close(saved);
    return fuse_session_mount(se, where);
  }
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  dup2(p[1], 2);
  close(p[1]);
  std::string logged;
  g_mount_error = &logged;
  const int rc = fuse_session_mount(se, where);
  g_mount_error = nullptr;
  dup2(saved, 2);
  close(saved);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(p[0]);
  if (!text.empty()) (void)!write(2, text.data(), text.size());
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const size_t nl = text.rfind('\n');
  if (rc != 0) *refusal = !text.empty() ? (nl == std::string::npos ? text : text.substr(nl + 1)) : logged;
  return rc;
}

// fuse_custom_io hooks: libfuse hands them the session's userdata, the Adapter.
ssize_t IoRead(int fd, void* buf, size_t len, void* ud) { return static_cast<Adapter*>(ud)->uring->Read(fd, buf, len); }
ssize_t IoWritev(int fd, iovec* iov, int count, void* ud) {
  return static_cast<Adapter*>(ud)->uring->Writev(fd, iov, count);
}
ssize_t IoSpliceSend(int fdin, off_t* offin, int fdout, off_t* offout, size_t len, unsigned flags, void* ud) {
  return static_cast<Adapter*>(ud)->uring->SpliceSend(fdin, offin, fdout, offout, len, flags);
}

bool EnvIs(const char* name, std::string_view value) {
  const char* env = getenv(name);
  return env != nullptr && std::string_view(env) == value;
}

bool UringWanted(const MountOptions& o) {
  if (EnvIs("LAYERFS_FUSE_URING", "0")) return false;
  return o.uring && UringTransport::KernelEnabled();
}

const fuse_lowlevel_ops& Ops() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o{};
    o.init = Init;
    AddEntryOps(o);
    AddFileOps(o);
    AddDirOps(o);
    AddXattrOps(o);
    return o;
  }();
  return ops;
}

void LogToSpdlog(fuse_log_level level, const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  std::string_view msg(buf);
  while (!msg.empty() && msg.back() == '\n') msg.remove_suffix(1);
  if (g_mount_error && level <= FUSE_LOG_ERR) g_mount_error->assign(msg);
  auto lvl = level <= FUSE_LOG_ERR ? spdlog::level::err
             : level <= FUSE_LOG_WARNING ? spdlog::level::warn
             : level <= FUSE_LOG_INFO ? spdlog::level::info
                                      : spdlog::level::debug;
  spdlog::log(lvl, "fuse: {}", msg);
}

// fuse_opt treats ',' as a separator and '\' as an escape.
std::string Escape(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == ',' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

std::string OptionString(const MountOptions& o, bool read_only) {
  std::string s = "default_permissions,fsname=" + Escape(o.fsname.empty() ? "layerfs" : o.fsname) +
                  ",subtype=layerfs";
  if (o.allow_other) s += ",allow_other";
  if (read_only) s += ",ro";
  return s;
}

// The kernel caps a FUSE mount's readahead at its backing device's default (128 KiB) whatever
// max_readahead the daemon asks for, so sequential reads arrive as 128 KiB requests. Root may
// raise it: measured on a 1 GiB file, cold, 1 MiB requests made 4x fewer round trips and ~1.6x
// the throughput (now 512 KiB: kMaxReadahead).
void RaiseReadahead(dev_t dev) {
  const std::string path = fmt::format("/sys/class/bdi/{}:{}/read_ahead_kb", major(dev), minor(dev));
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;  // not root: the kernel's default stays
  const std::string kb = std::to_string(kMaxReadahead >> 10);
  if (write(fd, kb.data(), kb.size()) < 0) spdlog::debug("{}: {}", path, strerror(errno));
  close(fd);
}

// Lazy unmount: the mount disappears from the namespace now and the kernel aborts the
// connection once nothing on it is in use.
Status Detach(const std::string& mountpoint) {
  if (geteuid() == 0) {
    if (umount2(mountpoint.c_str(), MNT_DETACH) == 0) return Status::Ok();
    return Status::Errorf(errno, "umount2 {}: {}", mountpoint, strerror(errno));
  }
  pid_t pid = fork();
  if (pid < 0) return Status::Errorf(errno, "fork: {}", strerror(errno));
  if (pid == 0) {
    execlp("fusermount3", "fusermount3", "-u", "-z", "-q", "--", mountpoint.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return Status::Ok();
  return Status::Errorf(EIO, "fusermount3 -u -z {} failed", mountpoint);
}

// Severs the connection of the mount that had device `dev` (the fusectl file system).
bool Abort(dev_t dev) {
  const std::string path = fmt::format("/sys/fs/fuse/connections/{}/abort", minor(dev));
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && geteuid() == 0 &&
      mount("fusectl", "/sys/fs/fuse/connections", "fusectl", 0, nullptr) == 0) {
    fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);  // fusectl was not mounted (systemd mounts it)
  }
  if (fd < 0) return false;
  bool ok = write(fd, "1", 1) == 1;
  close(fd);
  return ok;
}

}  // namespace

// Drops the kernel's caches for what a merge changed under the mount (entries, attributes,
// page cache). Errors are expected and ignored: ENOENT when the kernel holds nothing for it.
class KernelInvalidator : public workspace::InvalidationSink {
 public:
  explicit KernelInvalidator(fuse_session* se) : se_(se) {}
  void InodeChanged(Ino ino) override { (void)fuse_lowlevel_notify_inval_inode(se_, ino, 0, 0); }
  void EntryChanged(Ino parent, std::string_view name) override {
    (void)fuse_lowlevel_notify_inval_entry(se_, parent, name.data(), name.size());
  }

 private:
  fuse_session* se_;
};

struct Mount::State {
  std::unique_ptr<Adapter> ad;
  std::unique_ptr<KernelInvalidator> invalidator;
  std::unique_ptr<UringTransport> uring;
  fuse_session* se = nullptr;
  bool multithreaded = false;
  dev_t dev = 0;
  std::thread loop;
  std::atomic<bool> serving{false};
  std::mutex done_mu;
  std::condition_variable done_cv;
  bool loop_done = false;
  std::mutex unmount_mu;
  bool unmounted = false;

  void Serve() {
    sigset_t set;  // signals belong to the process's main thread
    sigfillset(&set);
    for (int keep : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigdelset(&set, keep);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    int rc;
    if (multithreaded) {
      fuse_loop_config* cfg = fuse_loop_cfg_create();
      fuse_loop_cfg_set_max_threads(cfg, 16);
      fuse_loop_cfg_set_clone_fd(cfg, 0);
      rc = fuse_session_loop_mt(se, cfg);
      fuse_loop_cfg_destroy(cfg);
    } else {
      rc = fuse_session_loop(se);
    }
    if (rc != 0) spdlog::debug("fuse loop ended: {}", rc);
    serving.store(false);
    ad->SignalInit(false);  // a loop that ended before the handshake fails Start
    {
      std::lock_guard lock(done_mu);
      loop_done = true;
    }
    done_cv.notify_all();
  }
};

Mount::Mount() : st_(std::make_unique<State>()) {}

Mount::~Mount() {
  Status s = Unmount();
  if (!s.ok()) spdlog::warn("unmount {}: {}", mountpoint_, s.ToString());
}

Result<std::unique_ptr<Mount>> Mount::Start(workspace::Workspace* ws, const std::string& mountpoint,
                                            const MountOptions& o) {
  static std::once_flag log_once;
  std::call_once(log_once, [] { fuse_set_log_func(LogToSpdlog); });

  char real[PATH_MAX];
  if (realpath(mountpoint.c_str(), real) == nullptr) {
    return Status::Errorf(errno, "mountpoint {}: {}", mountpoint, strerror(errno));
  }
  struct stat mst {};
  if (stat(real, &mst) != 0 || !S_ISDIR(mst.st_mode)) {
    return Status::Errorf(ENOTDIR, "mountpoint {} is not a directory", mountpoint);
  }

  std::unique_ptr<Mount> m(new Mount());
  m->mountpoint_ = real;
  State& st = *m->st_;
  const bool ro = o.read_only || ws->read_only();
  st.ad = std::make_unique<Adapter>(ws, o);
  if (const char* t = getenv("LAYERFS_FUSE_TIMEOUT")) st.ad->timeout = std::max(0.0, atof(t));
  st.ad->keep_cache_writers = !EnvIs("LAYERFS_FUSE_KEEP_CACHE", "0");
  st.ad->cache_dirs = !EnvIs("LAYERFS_FUSE_CACHE_DIR", "0");
  st.ad->writeback = EnvIs("LAYERFS_FUSE_WRITEBACK", "1");
  st.ad->copy_range = !EnvIs("LAYERFS_FUSE_COPY_RANGE", "0");
  st.ad->mountpoint = real;
  st.multithreaded = o.multithreaded;

  std::vector<std::string> argv_s = {"layerfs", "-o", OptionString(o, ro)};
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  st.se = fuse_session_new(&args, &Ops(), sizeof(fuse_lowlevel_ops), st.ad.get());
  fuse_opt_free_args(&args);
  if (st.se == nullptr) return Status::Errorf(EINVAL, "fuse_session_new failed for {}", mountpoint);
  st.ad->se = st.se;
  std::string refusal;
  if (MountCapturingStderr(st.se, real, &refusal) != 0) {
    fuse_session_destroy(st.se);
    st.se = nullptr;
    st.unmounted = true;
    if (!refusal.empty()) return Status::Errorf(EIO, "cannot mount {}: {}", mountpoint, refusal);
    return Status::Errorf(EIO, "cannot mount {} (the kernel refused it; the fuse log in layerfsd.log says why)", mountpoint);
  }
  {
    // The session's reads and writes go through UringTransport, which serves over io_uring when
    // wanted and offered, and in any case answers INIT with what libfuse 3.14 cannot ask for
    // (FUSE_HANDLE_KILLPRIV_V2). LAYERFS_FUSE_RING_IDLE=0 and LAYERFS_FUSE_KILLPRIV=0 are
    // measurement switches.
    st.uring = std::make_unique<UringTransport>(st.se, UringWanted(o), !EnvIs("LAYERFS_FUSE_RING_IDLE", "0"),
                                                !EnvIs("LAYERFS_FUSE_KILLPRIV", "0"));
    st.ad->uring = st.uring.get();
    static const fuse_custom_io io = {
        .writev = IoWritev, .read = IoRead, .splice_receive = nullptr, .splice_send = IoSpliceSend};
    if (fuse_session_custom_io(st.se, &io, fuse_session_fd(st.se)) != 0) {
      st.ad->uring = nullptr;
      st.uring.reset();
    }
  }
  st.serving.store(true);
  st.loop = std::thread([&st] { st.Serve(); });
  if (!st.ad->WaitInit(kInitTimeoutMs)) {
    Status s = m->Unmount();
    return Status::Errorf(EIO, "mount {}: no FUSE handshake{}", mountpoint, s.ok() ? "" : ": " + s.ToString());
  }
  if (!ro) {
    st.invalidator = std::make_unique<KernelInvalidator>(st.se);
    ws->SetInvalidationSink(st.invalidator.get());
  }
  // Only now: any request on the mount (even stat of its root) waits for the handshake.
  struct stat mounted {};
  if (stat(real, &mounted) == 0) {
    st.dev = mounted.st_dev;
    RaiseReadahead(mounted.st_dev);
  }
  return m;
}

Status Mount::Unmount() {
  State& st = *st_;
  std::lock_guard lock(st.unmount_mu);
  if (st.unmounted) return Status::Ok();
  st.unmounted = true;
  if (st.invalidator) st.ad->ws->SetInvalidationSink(nullptr);  // waits for a notification in progress
  Status result;
  fuse_session_exit(st.se);
  if (st.serving.load()) {
    Status d = Detach(mountpoint_);
    if (!d.ok()) result = d;
  }
  {
    std::unique_lock dl(st.done_mu);
    if (!st.done_cv.wait_for(dl, kDetachGrace, [&] { return st.loop_done; })) {
      dl.unlock();
      // Still in use after the detach: cut the connection so the loop's read returns.
      if (!Abort(st.dev)) spdlog::warn("{} is busy and fusectl is unavailable; waiting", mountpoint_);
      dl.lock();
      st.done_cv.wait(dl, [&] { return st.loop_done; });
    }
  }
  if (st.loop.joinable()) st.loop.join();
  // A loop that stopped on the exit flag (after the detach, with the mount still in use) leaves
  // the connection up; cut it first, so fuse_session_unmount only closes the descriptor rather
  // than unmounting a path that may be something else by now.
  pollfd pfd{.fd = fuse_session_fd(st.se), .events = 0, .revents = 0};
  if (pfd.fd >= 0 && poll(&pfd, 1, 0) == 0) Abort(st.dev);
  if (st.uring) st.uring->Stop();  // the connection is gone: its rings are torn down
  fuse_session_unmount(st.se);
  fuse_session_destroy(st.se);
  st.se = nullptr;
  return result;
}

bool Mount::serving() const { return st_->serving.load(); }

std::string Mount::transport() const { return st_->uring && st_->uring->active() ? "io_uring" : "/dev/fuse"; }

const char* OpName(Op op) {
  static constexpr const char* kNames[kOpCount] = {
      "lookup",    "forget",    "getattr",     "setattr",  "readlink",   "mknod",      "mkdir",
      "unlink",    "rmdir",     "symlink",     "rename",   "link",       "open",       "read",
      "write",     "statfs",    "release",     "fsync",    "setxattr",   "getxattr",   "listxattr",
      "removexattr", "flush",   "opendir",     "readdir",  "releasedir", "fsyncdir",   "create",
      "fallocate", "readdirplus", "lseek",     "batch_forget",
      "copy_file_range"};
  return kNames[static_cast<size_t>(op)];
}

std::vector<std::pair<std::string, uint64_t>> Mount::RequestCounts() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  if (!st_->ad) return out;
  for (size_t i = 0; i < kOpCount; i++) {
    uint64_t n = st_->ad->requests[i].load(std::memory_order_relaxed);
    if (n != 0) out.emplace_back(OpName(static_cast<Op>(i)), n);
  }
  return out;
}

size_t Mount::open_handles() const { return st_->ad ? st_->ad->open_handles.load() : 0; }

Status Mount::SettleWrites() {
  int root = open(mountpoint_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return Status::Errorf(errno, "open {}: {}", mountpoint_, strerror(errno));
  const int rc = syncfs(root);
  const int e = errno;
  if (rc != 0) {
    close(root);
    return Status::Errorf(e, "sync {}: {}", mountpoint_, strerror(e));
  }
  std::vector<fuse_ino_t> inos;
  if (st_->ad) {
    std::lock_guard l(st_->ad->writers_mu);
    for (const auto& [ino, n] : st_->ad->writers) inos.push_back(ino);
  }
  Status out;
  for (fuse_ino_t ino : inos) {
    const std::string path = st_->ad->ws->PathOf(ino);
    // Unlinked since (no path): nothing a commit reads. Renamed or replaced since: what the name
    // holds now is synced instead, harmlessly.
    if (path.size() < 2 || path[0] != '/') continue;
    constexpr int kFlags = O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    int fd = openat(root, path.c_str() + 1, O_RDONLY | kFlags);
    if (fd < 0 && errno == EACCES) fd = openat(root, path.c_str() + 1, O_WRONLY | kFlags);  // mode 0200
    if (fd < 0) continue;
    struct stat st {};
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && fdatasync(fd) != 0 && out.ok())
      out = Status::Errorf(errno, "sync {}{}: {}", mountpoint_, path, strerror(errno));
    close(fd);
  }
  close(root);
  return out;
}

}  // namespace layerfs::fuse
