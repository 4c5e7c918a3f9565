// layerfs: runs a verb of the verb table here, or sends it to the layerfsd that holds the Store
// (starting one for `mount`), and prints its result: text, or with --json the control
// protocol's result. A failure is one line "layerfs: ..." and exit 1; a usage error exit 2.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <thread>

#include "cli/command_line.h"
#include "cli/json_shapes.h"
#include "client/client.h"
#include "client/session.h"
#include "client/terminal_progress.h"

namespace {

using namespace layerfs;

int Fail(const std::string& msg, int code = 1) {
  fprintf(stderr, "layerfs: %s\n", msg.c_str());
  return code;
}

// `cat` and `read-file` print file content in windows, so a large file never has to fit in one
// protocol message (or in memory).
int Cat(client::Session& session, const cli::CommandLine& cl, cli::Output& o) {
  constexpr int64_t kWindow = 16 << 20;
  int64_t off = 0;
  for (;;) {
    nlohmann::json a = cl.args.raw();
    a["offset"] = off;
    a["length"] = kWindow;
    nlohmann::json result;
    Status s = session.Call(*cl.verb, cli::Args(a), &result);
    if (!s.ok()) return cli::PrintOutcome(cl, s, nullptr, o);
    auto data = cli::Base64Decode(result["content_base64"].get<std::string>());
    if (!data.ok()) return cli::PrintOutcome(cl, data.status(), nullptr, o);
    o.Out(*data);
    off += static_cast<int64_t>(data->size());
    if (static_cast<int64_t>(data->size()) < kWindow || off >= result["size"].get<int64_t>()) return 0;
  }
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
  if (*helper) args = std::move(**helper);
  cli::StdOutput o;
  cli::CommandLine cl = cli::ParseCommandLine(args, o);
  if (cl.exit >= 0) return cl.exit;
  const cli::Verb& verb = *cl.verb;
  char cwd_buf[PATH_MAX];
  const std::string cwd = getcwd(cwd_buf, sizeof cwd_buf) ? cwd_buf : "/";
  std::string store = cl.store;
  if (store.empty()) {
    if (const char* env = getenv("LAYERFS_STORE")) store = env;
  }
  if (store.empty() && verb.name != "init") {
    // A verb on a mount finds its Store from the mount.
    for (size_t i = 2; i < args.size() && store.empty(); i++)
      if (!args[i].empty() && args[i][0] != '-') store = cli::StoreOfMount(args[i]);
    if (store.empty()) store = cli::StoreOfMount(cwd);
  }
  if (!store.empty()) {
    char real[PATH_MAX];
    if (realpath(store.c_str(), real)) store = real;
    else if (store[0] != '/') store = cwd + "/" + store;
  }
  if (verb.name == "exec") return client::RunExec(store, cwd, cl);
  if (verb.name == "mcp") return client::RunMcp(store, cwd);
  client::Session session(verb.name == "init" ? "" : store, cwd);
  if (verb.name != "init" && !store.empty() && !session.Connect() && verb.name == "mount") {
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
  if ((verb.name == "cat" || verb.name == "read_file") && !cl.as_json) return Cat(session, cl, o);
  client::TerminalProgress progress;
  nlohmann::json result;
  Status s = session.Call(verb, cl.args, &result, progress.fn());
  return cli::PrintOutcome(cl, s, result, o);
}
