// layerfs-full, the full CLI: runs a verb of the verb table here, or sends it to the layerfsd that
// holds the Store (starting one for `mount`), and prints its result: text, or with --json the
// control protocol's result. A failure is one line "layerfs: ..." and exit 1; a usage error exit
// 2. The `layerfs` program users run is the front (front/front.h), which has the daemon run the
// command line when one holds the Store and execs this program otherwise.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <thread>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/command_line.h"
#include "cli/json_shapes.h"
#include "client/client.h"
#include "client/session.h"
#include "cli/terminal_progress.h"
#include "front/front.h"

namespace {

using namespace layerfs;

int Fail(const std::string& msg, int code = 1) {
  fprintf(stderr, "layerfs: %s\n", msg.c_str());
  return code;
}

// `mount -t fuse.layerfs STORE:REF DIR -o OPTS` and fstab entries of that type reach us through
// mount.fuse3 as `layerfs STORE:REF DIR [-o OPTS]`; that becomes
// `layerfs --store STORE mount REF DIR [--read-only] [--allow-other] [--threads]`. REF never holds
// a ':', so the last one splits. Generic mount options are the kernel's or mount's business.
Result<std::optional<std::vector<std::string>>> FromMountHelper(const std::vector<std::string>& args) {
  using R = std::optional<std::vector<std::string>>;
  if (!front::IsMountHelperForm(args)) return R();
  const size_t colon = args[1].rfind(':');
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
  // The core's log lines (the daemon's go to its log file): stdout is the verbs' output, so here
  // they go to stderr, errors only, as "layerfs: ..." lines.
  {
    auto logger = spdlog::stderr_logger_mt("layerfs");
    logger->set_pattern("layerfs: %v");
    logger->set_level(spdlog::level::err);
    spdlog::set_default_logger(logger);
  }
  std::vector<std::string> args(argv, argv + argc);
  auto helper = FromMountHelper(args);
  if (!helper.ok()) return Fail(helper.status().message(), 2);
  if (*helper) args = std::move(**helper);
  if (std::string refusal = front::ChangeDirs(&args); !refusal.empty()) return Fail(refusal, 2);
  cli::StdOutput o;
  cli::CommandLine cl = cli::ParseCommandLine(args, o);
  if (cl.exit >= 0) return cl.exit;
  const cli::Verb& verb = *cl.verb;
  char cwd_buf[PATH_MAX];
  const std::string cwd = getcwd(cwd_buf, sizeof cwd_buf) ? cwd_buf : "/";
  // init and clone make a Store: the CLI runs them itself, never in a daemon.
  const bool makes_store = verb.name == "init" || verb.name == "clone";
  const std::string store = front::ResolveStore(cl.store, getenv("LAYERFS_STORE"), args, cwd, makes_store);
  if (verb.name == "exec") return client::RunExec(store, cwd, cl);
  if (verb.name == "mcp") return client::RunMcp(store, cwd);
  client::Session session(makes_store ? "" : store, cwd);
  if (!makes_store && !store.empty() && !session.Connect() && verb.name == "mount") {
    if (cl.all.Bool("foreground")) {
      // Become the daemon, with the mount as its first request.
      std::string d = control::DaemonPath();
      std::vector<std::string> dargs = {d, "--store", store, "-f", "--then"};
      dargs.insert(dargs.end(), args.begin() + 1, args.end());
      std::vector<char*> cargs;
      for (auto& a : dargs) cargs.push_back(a.data());
      cargs.push_back(nullptr);
      execvp(d.c_str(), cargs.data());
      return Fail(fmt::format("cannot run {}: {}", d, strerror(errno)));
    }
  }
  if (verb.name == "mount") {
    // Through ConnectOrStart even when a daemon answered: one that was exiting is replaced.
    Status s = session.ConnectOrStart(-1);
    if (!s.ok()) return cli::PrintOutcome(cl, s, nullptr, o);
  }
  cli::TerminalProgress progress(o, isatty(STDERR_FILENO) == 1);
  auto call = [&](const cli::Verb& v, const cli::Args& a, nlohmann::json* result, const ProgressFn& p) {
    return session.Call(v, a, result, p);
  };
  return cli::RunCommandLine(cl, call, progress.fn(), o);
}
