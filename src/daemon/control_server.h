// The daemon's side of the control protocol (docs/protocol.md): serves one connection's
// requests by running verbs from the verb table (cli/verb.h) against the daemon's open Store,
// its Workspace registry and its mounts.
//
// Each connection is served on its own thread, one request at a time: a request is read, run,
// answered (progress events first), and only then is the next line read, so a client that sends
// a second request early is answered in turn. A message that cannot be a request gets an error
// response and the connection goes on (it is still framed by lines); an oversized or truncated
// one, a version mismatch, or another user's connection gets its error and the connection ends.
// Nothing a client sends stops the daemon serving others. Thread-safe: the server holds no state
// of its own beyond counters.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>

#include "cli/cli.h"
#include "control/protocol.h"

namespace layerfs::daemon {

class ControlServer {
 public:
  ControlServer(Store& store, workspace::WorkspaceRegistry& reg, cli::MountService& mounts)
      : store_(store), reg_(reg), mounts_(mounts) {}

  // Serves connection `fd` until the peer closes it (or it must end); closes fd.
  void Serve(int fd);

  // Runs one verb in the daemon's context, as a request from `uid`/`gid` in `cwd` would.
  Status Run(const cli::Verb& v, const cli::Args& args, const std::string& cwd, uint32_t uid, uint32_t gid,
             const ProgressFn& progress, nlohmann::json* result);

  // Runs request `cli` (front/front.h; front_request.cc): a `layerfs` command line, its output
  // sent on `conn` as `output` events; *result gets {"exit_code"}. ENOTSUP, before any output,
  // when the full CLI must run it in the client.
  Status RunCommandLine(control::Conn& conn, const nlohmann::json& id, const cli::Args& args, const std::string& cwd,
                        uint32_t uid, uint32_t gid, nlohmann::json* result);

  // Ends every connection once its request under way (if any) is answered: the daemon is going.
  void ShutdownAll();

  uint64_t served() const { return served_; }
  int connections() const { return connections_; }
  // When the last connection closed or the last request ended (for --idle).
  std::chrono::steady_clock::time_point last_activity() const;

 private:
  void Touch();

  Store& store_;
  workspace::WorkspaceRegistry& reg_;
  cli::MountService& mounts_;
  std::mutex mu_;
  std::set<int> open_;  // connections' fds (guarded by mu_)
  bool closing_ = false;  // guarded by mu_
  std::atomic<uint64_t> served_{0};  // requests run
  std::atomic<int> connections_{0};
  std::atomic<int64_t> last_activity_ns_{std::chrono::steady_clock::now().time_since_epoch().count()};
};

}  // namespace layerfs::daemon
