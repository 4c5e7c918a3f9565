// layerfsd: holds one Store open, serves its mounts, and answers the control protocol
// (docs/protocol.md) on STORE/control.sock by running the verbs of the verb table. Daemonises
// unless -f; exits when its last mount goes (unless --keep), after --idle SECONDS without a mount
// or a connection, on SIGTERM/SIGINT (unmounting everything first), or when asked to start with
// a failed mount. A start-up failure is one line on stderr and a non-zero exit status: "layerfsd:
// ..." or, with --json, the protocol's error object {"error": {"code", "errno", "message"}}, so
// that a client starting the daemon (the CLI, the SDKs) keeps its code (EBUSY: the Store is held by
// another process; ENOENT: there is no Store).
#include <execinfo.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <fstream>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>
#include <thread>

#include <CLI/CLI.hpp>

#include "base/store_files.h"
#include "cli/cli.h"
#include "control/protocol.h"
#include "cli/command_line.h"
#include "daemon/control_server.h"
#include "daemon/mount_service.h"
#include "remote/lazy.h"
#include "workspace/collector.h"
#include "kv/kv.h"

namespace {

using namespace layerfs;

int g_wake[2] = {-1, -1};  // self-pipe: signals and "last mount gone" wake the accept loop
std::atomic<bool> g_stop{false};
std::atomic<int> active{0};  // connection threads

void OnSignal(int) {
  g_stop = true;
  char c = 's';
  (void)!write(g_wake[1], &c, 1);
}

void Wake() {
  char c = 'w';
  (void)!write(g_wake[1], &c, 1);
}

// A daemon that dies must say so in its log: a fatal signal (an abort in a library, a crash)
// writes one line and a backtrace there (async-signal-safe calls only), then dies as it would.
int g_log_fd = -1;
void OnFatal(int sig) {
  if (g_log_fd >= 0) {
    char line[160];
    int n = snprintf(line, sizeof line, "[layerfsd] [critical] fatal signal %d (%s); backtrace:\n", sig,
                     sig == SIGABRT ? "abort" : sig == SIGSEGV ? "segmentation fault" : sig == SIGBUS ? "bus error" : "fatal");
    if (n > 0) (void)!write(g_log_fd, line, static_cast<size_t>(n));
    void* frames[64];
    int depth = backtrace(frames, 64);
    backtrace_symbols_fd(frames, depth, g_log_fd);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void InstallFatalHandlers(const std::string& log_path) {
  g_log_fd = open(log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  // Room for about 10,000 more lines, allocated now: the log lives in the Store, and the lines
  // that matter most are written when its disk is full (appends into preallocated blocks need
  // no new ones). The file's size is unchanged; `layerfs stats` does not count the log.
  struct stat st {};
  if (g_log_fd >= 0 && fstat(g_log_fd, &st) == 0)
    (void)fallocate(g_log_fd, FALLOC_FL_KEEP_SIZE, st.st_size, 1 << 20);
  void* frames[1];
  (void)backtrace(frames, 1);  // loads libgcc now: backtrace may not allocate in the handler
  struct sigaction sa {};
  sa.sa_handler = OnFatal;
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE}) sigaction(sig, &sa, nullptr);
}

struct Daemon {
  std::unique_ptr<Store> store;
  std::unique_ptr<workspace::DataLogCollector> collector;
  std::unique_ptr<workspace::WorkspaceRegistry> reg;
  std::unique_ptr<daemon::MountTable> mounts;
  std::unique_ptr<daemon::ControlServer> server;
  bool keep = false;
  int idle = -1;  // --idle SECONDS; < 0: live for the mounts

  // Without --idle the daemon lives for its mounts: it goes once it has served a request (the
  // mount that started it, even a failed one) and neither a mount nor a connection remains.
  // With --idle it goes once it has had neither for that many seconds.
  bool ShouldExit() {
    if (g_stop) return true;
    // `active` counts a connection from its accept, before its thread has started.
    if (keep || active > 0 || mounts->Reap() > 0) return false;
    if (idle < 0) return server->served() > 0;
    return std::chrono::steady_clock::now() - server->last_activity() >= std::chrono::seconds(idle);
  }
};

// One start-up failure on stderr, as text or (--json) as the protocol's error object.
void PrintStartFailure(const Status& s, bool as_json) {
  if (as_json) fprintf(stderr, "%s\n", control::Dump(nlohmann::json{{"error", control::ErrorJson(s)}}).c_str());
  else fprintf(stderr, "layerfsd: %s\n", s.message().c_str());
}

int Main(int argc, char** argv) {
  CLI::App app{"layerfsd: serves a LayerFS store's mounts and control socket"};
  std::string store_path;
  bool foreground = false, keep = false, as_json = false;
  int idle = -1;
  std::vector<std::string> then;
  app.add_option("--store", store_path, "Store directory")->required();
  app.add_flag("-f,--foreground", foreground, "Do not daemonise; log to stderr");
  app.add_flag("--keep", keep, "Keep running when the last mount goes");
  app.add_flag("--json", as_json, "Report a start-up failure as a JSON error object on stderr");
  app.add_option("--idle", idle, "Exit once there has been no mount and no connection for SECONDS "
                                 "(default: exit with the last mount)")->check(CLI::NonNegativeNumber);
  app.footer("  --then ARGS...  a layerfs command line to run once started (e.g. mount -f main DIR);\n"
             "                  everything after --then belongs to it");
  // Everything after --then is the start-up command, flags included (mount -f ...): split it off
  // before parsing, or its options would be taken for the daemon's.
  int own = argc;
  for (int i = 1; i < argc; i++)
    if (std::string_view(argv[i]) == "--then") {
      own = i;
      then.assign(argv + i + 1, argv + argc);
      if (then.empty()) {
        fprintf(stderr, "layerfsd: --then needs a command\n");
        return 2;
      }
      break;
    }
  try {
    app.parse(own, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    fprintf(stderr, "layerfsd: %s\n", e.what());
    return 2;
  }
  char real[PATH_MAX];
  if (!realpath(store_path.c_str(), real)) {
    PrintStartFailure(Status::Errorf(errno, "store {}: {}", store_path, strerror(errno)), as_json);
    return 1;
  }
  store_path = real;
  int ready[2] = {-1, -1};
  if (!foreground) {
    // Daemonise: the parent returns once the child listens, or reports why it could not (the
    // child sends "ok", or the error object of its failure).
    if (pipe(ready) != 0) {
      PrintStartFailure(Status::Errorf(errno, "pipe: {}", strerror(errno)), as_json);
      return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
      PrintStartFailure(Status::Errorf(errno, "fork: {}", strerror(errno)), as_json);
      return 1;
    }
    if (pid > 0) {
      close(ready[1]);
      std::string msg;
      char buf[512];
      ssize_t n;
      while ((n = read(ready[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0) msg.append(buf, n);
      if (msg == "ok") return 0;
      Status failed = Status::Error(EIO, "exited during start-up");
      if (!msg.empty()) {
        nlohmann::json e = control::ParseOrDiscarded(msg);
        failed = e.is_discarded() ? Status::Error(EIO, msg) : control::StatusFromError(e);
      }
      PrintStartFailure(failed, as_json);
      return 1;
    }
    close(ready[0]);
    setsid();
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    if (null > 2) close(null);
    // The log is opened by name: make sure the name is a regular file of ours, not a symlink a
    // crafted Store put there (base/store_files.h).
    const std::string log_path = store_path + "/layerfsd.log";
    if (base::PrepareStoreFile(log_path, base::StoreFileMode(store_path)).ok()) {
      spdlog::set_default_logger(spdlog::basic_logger_mt("layerfsd", log_path));
      // What others write to our stderr goes to the log too: above all fusermount3, which
      // libfuse runs to mount as a user and which says there why a mount was refused.
      int log_fd = open(log_path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
      if (log_fd >= 0) {
        dup2(log_fd, 2);
        close(log_fd);
      }
    }
    spdlog::flush_every(std::chrono::seconds(1));
    // Errors reach the log at once: the daemon may be killed (or the disk fill) a second later.
    spdlog::flush_on(spdlog::level::warn);
    InstallFatalHandlers(store_path + "/layerfsd.log");
  }
  // Tells whoever started us that we serve (s ok) or why we cannot.
  auto report = [&](const Status& s) {
    if (ready[1] >= 0) {
      const std::string msg = s.ok() ? "ok" : control::Dump(control::ErrorJson(s));
      (void)!write(ready[1], msg.data(), msg.size());
      close(ready[1]);
      ready[1] = -1;
    } else if (!s.ok()) {
      PrintStartFailure(s, as_json);
    }
  };
  Daemon d;
  d.keep = keep;
  d.idle = idle;
  // On a full disk the reserve gives the database room to open: the mounts are how files get
  // deleted to make room.
  auto st = Store::Open(store_path, {.read_only = false, .release_reserve = true});
  if (!st.ok()) {
    report(st.status());
    return 1;
  }
  d.store = std::move(*st);
  // A lazy Store reads what it lacks from its lazy remotes, from any thread (FUSE ones too).
  if (auto src = remote::AttachLazySource(*d.store); !src.ok()) {
    report(src.status());
    return 1;
  }
  // Commits return once their content is durable; encoding it into history runs on the
  // encoder's thread (docs/design.md, "Commits in the background"). LAYERFS_BACKGROUND_ENCODING=0
  // encodes inside each commit instead (A/B runs).
  if (const char* bg = getenv("LAYERFS_BACKGROUND_ENCODING"); !bg || std::string_view(bg) != "0")
    d.store->StartBackgroundEncoding();
  // Data-log segments freed by commits go on the collector's thread, after the commit returns.
  d.collector = std::make_unique<workspace::DataLogCollector>(*d.store);
  d.reg = std::make_unique<workspace::WorkspaceRegistry>(*d.store);
  d.mounts = std::make_unique<daemon::MountTable>(*d.store, *d.reg);
  d.server = std::make_unique<daemon::ControlServer>(*d.store, *d.reg, *d.mounts);
  auto lfd = control::Listen(store_path);
  if (!lfd.ok()) {
    report(lfd.status());
    return 1;
  }
  if (Status ps = base::WriteStoreFile(control::PidPath(store_path), fmt::format("{}\n", getpid()),
                                       base::StoreFileMode(store_path));
      !ps.ok()) {
    report(ps);
    return 1;
  }
  if (pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0) return 1;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  spdlog::info("layerfsd {} serving {}", getpid(), store_path);
  if (!then.empty()) {
    std::vector<std::string> args{"layerfs"};
    args.insert(args.end(), then.begin(), then.end());
    char cwd[PATH_MAX];
    cli::StdOutput o;
    cli::CommandLine cl = cli::ParseCommandLine(args, o);
    int code = cl.exit;
    Status s = Status::Invalid("start-up command: bad command line");
    if (code < 0) {
      nlohmann::json result;
      s = d.server->Run(*cl.verb, cl.args, getcwd(cwd, sizeof cwd) ? cwd : "/", geteuid(), getegid(), nullptr,
                        &result);
      code = cli::PrintOutcome(cl, s, result, o);
    }
    fflush(stdout);
    if (code != 0) {
      report(Status::Error(s.ok() ? EIO : s.code(), "start-up command failed"));
      unlink(control::SocketPath(store_path).c_str());
      return code;
    }
  }
  report(Status::Ok());
  while (!d.ShouldExit()) {
    pollfd p[2] = {{*lfd, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
    int n = poll(p, 2, 250);
    if (n < 0 && errno != EINTR) break;
    if (p[1].revents & POLLIN) {
      char buf[64];
      while (read(g_wake[0], buf, sizeof buf) > 0) {
      }
    }
    if (p[0].revents & POLLIN) {
      int c = accept4(*lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) {
        active++;
        std::thread([&d, c] {
          d.server->Serve(c);
          active--;
          Wake();
        }).detach();
      }
    }
  }
  spdlog::info("layerfsd shutting down");
  close(*lfd);
  unlink(control::SocketPath(store_path).c_str());
  // Connections still open end with the daemon; requests under way are answered first.
  d.server->ShutdownAll();
  while (active > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  d.mounts->UnmountAll();
  d.mounts.reset();
  d.reg.reset();
  d.collector.reset();  // runs the last collection the commits asked for
  // Committed blocks were deleted from the workspace family; drop them from disk too. On a full
  // disk this is skipped (ENOSPC before RocksDB is asked): the deletions stay in the tables
  // until the next exit with room.
  Status cs = d.store->kv().Compact(kv::Cf::kWorkspace);
  if (!cs.ok()) spdlog::warn("compact workspace data at exit: {}", cs.message());
  d.store.reset();
  spdlog::info("layerfsd {} closed {}", getpid(), store_path);
  unlink(control::PidPath(store_path).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
