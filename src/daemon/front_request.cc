// The daemon's side of the front (front/front.h): request `cli`, a `layerfs` command line run
// here as the full CLI would run it when forwarding to this daemon, its output sent back as
// `output` events.
#include <limits.h>
#include <stdlib.h>

#include <spdlog/spdlog.h>

#include "cli/command_line.h"
#include "cli/json_shapes.h"
#include "cli/terminal_progress.h"
#include "daemon/control_server.h"
#include "front/front.h"

namespace layerfs::daemon {

using nlohmann::json;

namespace {

// The CLI's stdout and stderr as `output` events, in the order they were written. Stdout is
// gathered up to a window before it is sent; stderr is sent at once (as stdio would).
class EventOutput : public cli::Output {
 public:
  EventOutput(control::Conn& conn, const json& id) : conn_(conn), id_(id) {}
  void Out(std::string_view s) override { Add(1, s); }
  void Err(std::string_view s) override {
    Add(2, s);
    Flush();
  }
  void Flush() {
    if (buf_.empty()) return;
    (void)conn_.Send({{"id", id_},
                      {"event", front::kOutputEvent},
                      {"output", {{"fd", fd_}, {"data_base64", cli::Base64Encode(buf_)}}}});
    buf_.clear();
  }

 private:
  static constexpr size_t kWindow = 1 << 20;
  void Add(int fd, std::string_view s) {
    if (fd != fd_) Flush();
    fd_ = fd;
    buf_.append(s);
    if (buf_.size() >= kWindow) Flush();
  }
  control::Conn& conn_;
  const json& id_;
  int fd_ = 1;
  std::string buf_;
};

Status RunsInClient(const std::string& why) {
  return Status::Error(ENOTSUP, fmt::format("{}: the command line runs in the client (layerfs-full)", why));
}

}  // namespace

Status ControlServer::RunCommandLine(control::Conn& conn, const json& id, const cli::Args& a, const std::string& cwd,
                                     uint32_t uid, uint32_t gid, json* result) {
  const json& raw = a.raw();
  for (const auto& [k, v] : raw.items())
    if (k != "argv" && k != "store_env" && k != "stderr_tty")
      return Status::Invalid(fmt::format("cli: unknown argument '{}'", k));
  if (!raw.contains("argv") || !raw["argv"].is_array() || raw["argv"].empty())
    return Status::Invalid("cli: argument 'argv' must be a non-empty array of strings");
  std::vector<std::string> argv;
  for (const auto& s : raw["argv"]) {
    if (!s.is_string()) return Status::Invalid("cli: argument 'argv' must be a non-empty array of strings");
    argv.push_back(s.get<std::string>());
  }
  if (raw.contains("store_env") && !raw["store_env"].is_null() && !raw["store_env"].is_string())
    return Status::Invalid("cli: argument 'store_env' must be a string or null");
  if (raw.contains("stderr_tty") && !raw["stderr_tty"].is_boolean())
    return Status::Invalid("cli: argument 'stderr_tty' must be a boolean");
  const std::string store_env = raw.value("store_env", json()).is_string() ? raw["store_env"].get<std::string>() : "";
  const bool has_store_env = raw.contains("store_env") && raw["store_env"].is_string();
  if (front::IsMountHelperForm(argv)) return RunsInClient("a mount(8) helper command line");

  EventOutput out(conn, id);
  cli::CommandLine cl = cli::ParseCommandLine(argv, out, /*stdin_ok=*/false);
  if (cl.needs_stdin) return RunsInClient("it reads standard input");
  if (cl.exit < 0) {
    const cli::Verb& v = *cl.verb;
    if (!v.protocol || !v.run) return RunsInClient(fmt::format("'{}'", v.cli.empty() ? v.name : v.cli));
    // clone makes a new Store: the full CLI runs it itself, as it does init.
    if (v.name == "clone") return RunsInClient("'clone'");
    // Only a command line the full CLI would have sent here: the same Store, found its way.
    const std::string named =
        front::ResolveStore(cl.store, has_store_env ? store_env.c_str() : nullptr, argv, cwd, v.name == "init");
    char real[PATH_MAX];
    const std::string ours = realpath(store_.path().c_str(), real) ? real : store_.path();
    if (named != ours) return RunsInClient(fmt::format("it names the Store '{}', not this daemon's", named));
    if (!v.read_only) spdlog::info("cli {}", v.name);
    {
      cli::TerminalProgress progress(out, raw.value("stderr_tty", false));
      auto call = [&](const cli::Verb& verb, const cli::Args& args, json* r, const ProgressFn& p) {
        return Run(verb, args, cwd, uid, gid, p, r);
      };
      cl.exit = cli::RunCommandLine(cl, call, progress.fn(), out);
    }
  }
  out.Flush();
  *result = {{"exit_code", cl.exit}};
  return Status::Ok();
}

}  // namespace layerfs::daemon
