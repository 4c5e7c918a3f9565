// `layerfs exec REF [--commit [-m MSG]] [--isolate [--no-network]] [--mountpoint DIR] [--json]
// -- CMD [ARGS...]` (docs/design.md, "Agent interface"): runs CMD with its working directory in
// REF's Workspace and passes its exit status through.
//
// Built from the protocol's verbs over one connection to the Store's daemon (started, as
// `layerfs mount` does, when none runs): a commit REF is forked first under a printed name; a
// branch that is not mounted is mounted for the run (on a temporary directory unless
// --mountpoint) and unmounted after; with --commit the Workspace is committed once CMD ends,
// whatever its status. CMD inherits stdin, stdout and stderr. With --isolate it runs under
// bubblewrap (Debian's bubblewrap) with the Workspace at /workspace as the only writable path of
// the host (see IsolationArgs).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

#include "client/client.h"
#include "client/session.h"
#include "control/json_bytes.h"
#include "front/front.h"

namespace layerfs::client {

namespace {

using nlohmann::json;

constexpr int kExecFailed = 125;  // exec itself failed (as env(1), timeout(1) and docker run do)

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_forward_tty = 0;  // forward SIGINT/SIGQUIT too (the child has its own session)

void Forward(int sig) {
  if (g_child > 0) kill(static_cast<pid_t>(g_child), sig);
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& a : v) s += (s.empty() ? "" : " ") + a;
  return s;
}

// The bubblewrap command line for --isolate. What it isolates:
//  - files: the sandbox's root is an empty tmpfs, read-only once set up, holding the host's
//    top-level directories bound read-only (--ro-bind each, recursively, and its symlinks such as
//    /bin -> usr/bin as they are), the Workspace read-write at /workspace (the working
//    directory), a private empty tmpfs at /tmp (gone with the sandbox), a minimal private /dev
//    (null, zero, full, random, urandom, tty, a private /dev/shm), a /proc of the sandbox's own
//    processes (bubblewrap keeps /proc/sys and friends read-only), and the Store directory hidden
//    under an empty tmpfs (neither its data nor the daemon's control socket can be reached);
//  - processes: new PID, IPC, UTS (and cgroup where possible) namespaces; all capabilities
//    dropped (root inside cannot remount anything); no new privileges (setuid binaries do not
//    elevate); a new session (no TIOCSTI into the caller's terminal); killed with its parent;
//  - network: with --no-network a new network namespace with only a loopback.
// What it does not isolate: reading anything the user can read on the host (the system, $HOME,
// other users' world-readable files); Unix sockets in the host's tree (connect(2) is not a write:
// /run's sockets stay reachable, the Store's do not); the network without --no-network; CPU,
// memory and disk use (no limits); the kernel itself (same kernel, same user id).
std::vector<std::string> IsolationArgs(const std::string& mountpoint, const std::string& store, bool no_network,
                                       const std::vector<std::string>& command) {
  std::vector<std::string> a = {"bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc",
                                "--unshare-uts", "--unshare-cgroup-try", "--cap-drop", "ALL"};
  if (no_network) a.push_back("--unshare-net");
  std::unique_ptr<DIR, int (*)(DIR*)> root(opendir("/"), closedir);
  std::vector<std::string> names;
  while (root && (errno = 0, true)) {
    dirent* e = readdir(root.get());
    if (!e) break;
    std::string n = e->d_name;
    if (n != "." && n != ".." && n != "proc" && n != "dev" && n != "tmp" && n != "workspace") names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    const std::string p = "/" + n;
    char target[PATH_MAX];
    ssize_t len = readlink(p.c_str(), target, sizeof target - 1);
    if (len > 0) a.insert(a.end(), {"--symlink", std::string(target, len), p});
    else a.insert(a.end(), {"--ro-bind", p, p});
  }
  a.insert(a.end(), {"--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"});
  // Hidden, unless /tmp's tmpfs already covers it.
  if (!store.empty() && store != "/" && store.rfind("/tmp/", 0) != 0)
    a.insert(a.end(), {"--tmpfs", store, "--remount-ro", store});
  a.insert(a.end(), {"--bind", mountpoint, "/workspace", "--remount-ro", "/", "--chdir", "/workspace", "--setenv",
                     "PWD", "/workspace", "--"});
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

// Runs argv with cwd `dir`; returns its wait status.
Result<int> Spawn(const std::vector<std::string>& argv, const std::string& dir, bool isolated) {
  std::vector<char*> cargv;
  for (const auto& s : argv) cargv.push_back(const_cast<char*>(s.c_str()));
  cargv.push_back(nullptr);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return Status::Errorf(errno, "fork: {}", strerror(errno));
  if (pid == 0) {
    for (int sig : {SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGPIPE}) signal(sig, SIG_DFL);
    if (chdir(dir.c_str()) != 0) {
      fprintf(stderr, "layerfs: exec: cd %s: %s\n", dir.c_str(), strerror(errno));
      _exit(kExecFailed);
    }
    if (!isolated) setenv("PWD", dir.c_str(), 1);
    execvp(cargv[0], cargv.data());
    int e = errno;
    fprintf(stderr, "layerfs: exec: %s: %s\n", cargv[0], strerror(e));
    _exit(e == ENOENT ? 127 : 126);
  }
  g_child = pid;
  g_forward_tty = isolated;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Status::Errorf(errno, "wait: {}", strerror(errno));
  }
  g_child = 0;
  return status;
}

class Exec {
 public:
  Exec(const std::string& store, const std::string& cwd, const cli::CommandLine& cl)
      : session_(store, cwd), args_(cl.all) {}

  int Run() {
    int code = kExecFailed;
    Status s = Prepare();
    if (s.ok()) {
      auto status = RunCommand();
      if (status.ok()) {
        code = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
        if (WIFSIGNALED(*status)) signal_ = WTERMSIG(*status);
        if (args_.Bool("commit")) s = Commit();
      } else {
        s = status.status();
      }
    }
    Status u = Cleanup();
    if (s.ok()) s = u;
    if (!s.ok()) {
      fprintf(stderr, "layerfs: exec: %s\n", s.message().c_str());
      code = kExecFailed;
    }
    if (args_.Bool("json")) {
      json j = {{"exit_code", code},
                {"signal", signal_ ? json(sigabbrev_np(signal_)) : json()},
                {"branch", branch_},
                {"mountpoint", mountpoint_},
                {"mounted", mounted_for_run_},
                {"forked", forked_},
                {"isolated", args_.Bool("isolate")},
                {"commit", commit_.empty() ? json() : json(commit_)}};
      if (!s.ok()) j["error"] = control::ErrorJson(s);
      printf("%s\n", control::Dump(j).c_str());
      fflush(stdout);
    }
    return code;
  }

 private:
  Status Call(const std::string& verb, const json& args, json* result) { return session_.Call(verb, args, result); }

  // Finds or makes the branch and its mount.
  Status Prepare() {
    if (args_.Bool("no_network") && !args_.Bool("isolate")) return Status::Invalid("--no-network needs --isolate");
    if (!args_.Bool("commit") && args_.Has("message")) return Status::Invalid("-m needs --commit");
    if (session_.store().empty()) return Status::Invalid("no store given: use --store PATH or set LAYERFS_STORE");
    LFS_TRY(session_.ConnectOrStart(-1));
    std::string ref = args_.Str("ref");
    json branches;
    LFS_TRY(Call("branches", json::object(), &branches));
    if (ref == "HEAD") {
      // The branch mounted writable at the working directory (cli::Context::Head), else main;
      // in a read-only mount, its Commit (forked below, as the daemon expands HEAD for log).
      char real[PATH_MAX];
      const std::string here = realpath(session_.cwd().c_str(), real) ? real : session_.cwd();
      std::string best;
      for (const auto& b : branches) {
        if (!b.contains("mountpoint")) continue;
        const std::string mp = b["mountpoint"].get<std::string>();
        if ((here == mp || here.compare(0, mp.size() + 1, mp + "/") == 0) && mp.size() > best.size()) {
          best = mp;
          ref = b["name"].get<std::string>();
        }
      }
      if (best.empty() && front::StoreOfMount(here).empty()) ref = "main";
    }
    for (const auto& b : branches)
      if (b["name"] == ref) {
        branch_ = ref;
        if (b.contains("mountpoint")) mountpoint_ = b["mountpoint"].get<std::string>();
      }
    if (branch_.empty()) {
      // A commit: fork it under a name of its own.
      json log;
      LFS_TRY(Call("log", {{"ref", ref}, {"max_count", 1}}, &log));
      const std::string id = log.at(0)["id"].get<std::string>();
      std::string base = "exec-" + id.substr(0, 12);
      for (int i = 1;; i++) {
        std::string name = i == 1 ? base : fmt::format("{}-{}", base, i);
        bool taken = false;
        for (const auto& b : branches) taken |= b["name"] == name;
        if (taken) continue;
        json r;
        Status s = Call("fork", {{"name", name}, {"from", id}}, &r);
        if (s.code() == EEXIST) continue;
        LFS_TRY(s);
        branch_ = name;
        forked_ = true;
        break;
      }
      fprintf(stderr, "layerfs: exec: forked %s as branch %s\n", id.c_str(), branch_.c_str());
    }
    std::string want = args_.Str("mountpoint");
    if (!want.empty()) {
      want = want[0] == '/' ? want : session_.cwd() + "/" + want;
      char real[PATH_MAX];
      if (realpath(want.c_str(), real)) want = real;
    }
    if (!mountpoint_.empty()) {
      if (!want.empty() && want != mountpoint_)
        return Status::Errorf(EBUSY, "branch '{}' is mounted at {}, not {}", branch_, mountpoint_, want);
      return Status::Ok();
    }
    if (want.empty()) {
      const char* tmp = getenv("TMPDIR");
      std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/layerfs-exec.XXXXXX";
      if (!mkdtemp(tmpl.data())) return Status::Errorf(errno, "temporary mountpoint: {}", strerror(errno));
      want = tmpl;
      made_dir_ = true;
    } else if (mkdir(want.c_str(), 0755) == 0) {
      made_dir_ = true;
    } else if (errno != EEXIST) {
      return Status::Errorf(errno, "mountpoint {}: {}", want, strerror(errno));
    }
    json m;
    Status s = Call("mount", {{"ref", branch_}, {"mountpoint", want}}, &m);
    if (!s.ok()) {
      if (made_dir_) rmdir(want.c_str());
      made_dir_ = false;
      return s;
    }
    mountpoint_ = m["mountpoint"].get<std::string>();
    mounted_ = mounted_for_run_ = true;
    return Status::Ok();
  }

  Result<int> RunCommand() {
    std::vector<std::string> cmd = args_.Strings("command");
    if (args_.Bool("isolate")) {
      if (access("/usr/bin/bwrap", X_OK) != 0 && access("/bin/bwrap", X_OK) != 0)
        return Status::Error(ENOENT, "--isolate needs bubblewrap (bwrap): apt-get install bubblewrap");
      cmd = IsolationArgs(mountpoint_, session_.store(), args_.Bool("no_network"), cmd);
    }
    return Spawn(cmd, mountpoint_, args_.Bool("isolate"));
  }

  Status Commit() {
    std::string msg = args_.Str("message");
    if (msg.empty()) {
      msg = "exec: " + Join(args_.Strings("command"));
      if (msg.size() > 200) msg = msg.substr(0, 197) + "...";
    }
    json r;
    // By mountpoint, so the daemon syncs what the kernel still holds (mmap writes) first.
    LFS_TRY(Call("commit", {{"target", mountpoint_}, {"message", msg}}, &r));
    commit_ = r["commit"].get<std::string>();
    if (!args_.Bool("json")) fprintf(stderr, "commit %s\n", commit_.c_str());
    return Status::Ok();
  }

  Status Cleanup() {
    Status s;
    if (mounted_) {
      json r;
      s = Call("umount", {{"mountpoint", mountpoint_}}, &r);
      mounted_ = !s.ok();
    }
    if (made_dir_ && !mounted_) rmdir(mountpoint_.c_str());
    return s;
  }

  Session session_;
  const cli::Args& args_;
  std::string branch_, mountpoint_, commit_;
  bool forked_ = false, made_dir_ = false;
  bool mounted_ = false;          // mounted by this run and not yet unmounted
  bool mounted_for_run_ = false;  // mounted by this run (the JSON's "mounted")
  int signal_ = 0;
};

}  // namespace

int RunExec(const std::string& store, const std::string& cwd, const cli::CommandLine& cl) {
  // While CMD runs, signals meant for the run go to it and exec lives on to clean up: SIGTERM and
  // SIGHUP are forwarded; SIGINT and SIGQUIT from the terminal reach CMD by its process group
  // (forwarded as well when --isolate gave it a session of its own).
  struct sigaction fwd {};
  fwd.sa_handler = Forward;
  sigaction(SIGTERM, &fwd, nullptr);
  sigaction(SIGHUP, &fwd, nullptr);
  struct sigaction tty {};
  tty.sa_handler = [](int sig) {
    if (g_forward_tty) Forward(sig);
  };
  sigaction(SIGINT, &tty, nullptr);
  sigaction(SIGQUIT, &tty, nullptr);
  signal(SIGPIPE, SIG_IGN);
  Exec e(store, cwd, cl);
  return e.Run();
}

}  // namespace layerfs::client
