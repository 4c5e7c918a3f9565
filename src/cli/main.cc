// layerfs: runs a verb here, or forwards it to the layerfsd that holds the Store (starting one
// for `mount`). Prints the verb's output; a failure is one line "layerfs: ..." and exit 1.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <thread>

#include "cli/cli.h"
#include "control/protocol.h"

namespace {

using namespace layerfs;

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  std::string p = buf;
  return p.substr(0, p.rfind('/'));
}

std::string DaemonPath() {
  if (const char* env = getenv("LAYERFSD")) return env;
  std::string beside = SelfDir() + "/layerfsd";
  if (access(beside.c_str(), X_OK) == 0) return beside;
  return "layerfsd";
}

int Emit(const std::string& out, const std::string& err, int code) {
  fwrite(out.data(), 1, out.size(), stdout);
  fwrite(err.data(), 1, err.size(), stderr);
  return code;
}

int Fail(const std::string& msg, int code = 1) { return Emit("", "layerfs: " + msg + "\n", code); }

// A daemon that served its last unmount stops listening before it has closed the Store: wait
// for that process to end before starting another.
void WaitForExitingDaemon(const std::string& store) {
  FILE* f = fopen(control::PidPath(store).c_str(), "r");
  if (!f) return;
  long pid = 0;
  if (fscanf(f, "%ld", &pid) != 1) pid = 0;
  fclose(f);
  for (int i = 0; pid > 0 && i < 300 && kill(static_cast<pid_t>(pid), 0) == 0; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

// Starts layerfsd for `store` and waits until it answers (it daemonises itself).
Status StartDaemon(const std::string& store) {
  WaitForExitingDaemon(store);
  pid_t pid = fork();
  if (pid < 0) return Status::Errorf(errno, "fork: {}", strerror(errno));
  if (pid == 0) {
    std::string d = DaemonPath();
    execlp(d.c_str(), d.c_str(), "--store", store.c_str(), static_cast<char*>(nullptr));
    fprintf(stderr, "layerfs: cannot run %s: %s\n", d.c_str(), strerror(errno));
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return Status::Error(EIO, "layerfsd failed to start");
  for (int i = 0; i < 200; i++) {
    if (control::DaemonRunning(store)) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Status::Error(ETIMEDOUT, "layerfsd did not answer");
}

// `mount -t fuse.layerfs STORE:REF DIR -o OPTS` and fstab entries of that type reach us through
// mount.fuse3 as `layerfs STORE:REF DIR [-o OPTS]`; that becomes
// `layerfs --store STORE mount REF DIR [--read-only] [--allow-other] [--threads]`. REF never holds
// a ':', so the last one splits. Generic mount options are the kernel's or mount's business.
Result<std::optional<std::vector<std::string>>> FromMountHelper(const std::vector<std::string>& args) {
  using R = std::optional<std::vector<std::string>>;
  if (args.size() < 3 || args[1].empty() || args[1][0] == '-') return R();
  const size_t colon = args[1].rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == args[1].size()) return R();
  std::vector<std::string> out = {args[0], "--store", args[1].substr(0, colon), "mount",
                                  args[1].substr(colon + 1), args[2]};
  static const std::set<std::string> kIgnored = {
      "rw", "defaults", "auto", "noauto", "user", "nouser", "users", "nofail", "_netdev", "dev", "nodev",
      "suid", "nosuid", "exec", "noexec", "atime", "noatime", "relatime", "strictatime", "async",
      "default_permissions"};
  for (size_t i = 3; i < args.size(); i++) {
    if (args[i] != "-o" || i + 1 == args.size()) {
      return Status::Invalid(fmt::format("mount helper: unexpected argument '{}'", args[i]));
    }
    std::string opts = args[++i];
    size_t pos = 0;
    while (pos <= opts.size()) {
      size_t end = opts.find(',', pos);
      if (end == std::string::npos) end = opts.size();
      std::string o = opts.substr(pos, end - pos);
      pos = end + 1;
      if (o.empty() || kIgnored.count(o) || o.rfind("x-", 0) == 0 || o.rfind("comment=", 0) == 0) continue;
      if (o == "ro") out.push_back("--read-only");
      else if (o == "allow_other") out.push_back("--allow-other");
      else if (o == "threads") out.push_back("--threads");
      else if (o == "single_threaded") out.push_back("--single-threaded");
      else return Status::Invalid(fmt::format("mount option '{}' is not supported", o));
    }
  }
  return R(std::move(out));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  auto helper = FromMountHelper(args);
  if (!helper.ok()) return Fail(helper.status().message(), 2);
  std::vector<char*> helper_argv;
  if (*helper) {
    args = std::move(**helper);
    for (auto& a : args) helper_argv.push_back(a.data());
    argc = static_cast<int>(helper_argv.size());
    helper_argv.push_back(nullptr);
    argv = helper_argv.data();
  }
  char cwd[PATH_MAX];
  cli::Context ctx;
  ctx.cwd = getcwd(cwd, sizeof cwd) ? cwd : "/";
  // A first pass parses the command line here: usage errors and --help never need a daemon,
  // and it tells the verb and the store.
  std::string verb, store;
  bool foreground = false;
  {
    cli::Context probe;
    probe.cwd = ctx.cwd;
    CLI::App app;
    app.require_subcommand(1);
    std::string store_opt;
    app.add_option("--store", store_opt);
    cli::AddAllVerbs(app, probe);
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      if (e.get_exit_code() == 0) return app.exit(e);
      return Fail(e.what(), 2);
    }
    verb = app.get_subcommands().at(0)->get_name();
    if (verb == "mount") foreground = app.get_subcommand("mount")->get_option("-f")->as<bool>();
    store = store_opt;
  }
  if (store.empty()) {
    if (const char* env = getenv("LAYERFS_STORE")) store = env;
  }
  if (store.empty() && verb != "init") {
    // A verb on a mount finds its Store from the mount.
    for (size_t i = 2; i < args.size() && store.empty(); i++)
      if (args[i][0] != '-') store = cli::StoreOfMount(args[i]);
    if (store.empty()) store = cli::StoreOfMount(ctx.cwd);
  }
  if (!store.empty()) {
    char real[PATH_MAX];
    if (realpath(store.c_str(), real)) store = real;
  }
  ctx.store_path = store;
  if (verb != "init" && !store.empty()) {
    bool running = control::DaemonRunning(store);
    if (!running && verb == "mount") {
      if (foreground) {
        // Become the daemon, with the mount as its first request.
        std::string d = DaemonPath();
        std::vector<std::string> dargs = {d, "--store", store, "-f", "--then"};
        for (int i = 1; i < argc; i++) dargs.push_back(argv[i]);
        std::vector<char*> cargs;
        for (auto& a : dargs) cargs.push_back(a.data());
        cargs.push_back(nullptr);
        execvp(d.c_str(), cargs.data());
        return Fail(fmt::format("cannot run {}: {}", d, strerror(errno)));
      }
      Status s = StartDaemon(store);
      if (!s.ok()) return Fail(s.message());
      running = true;
    }
    if (running) {
      auto resp = control::Call(store, {args, ctx.cwd});
      if (resp.ok()) return Emit(resp->out, resp->err, resp->exit);
      if (verb == "mount") return Fail(resp.status().message());
      // The daemon went away between the check and the call: run here.
    }
  }
  int code = cli::RunVerbs(ctx, args);
  return Emit(ctx.out, ctx.err, code);
}
