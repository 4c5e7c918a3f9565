// A Session runs verbs for the `layerfs` program: over the control protocol when a daemon holds
// the Store, or in this process (opening the Store) when none does; verbs that need a daemon
// (mount, and what exec and mcp do) start one. Either way the verb's code is the verb table's,
// and the result is the protocol's JSON.
// A Session belongs to one thread.
#pragma once

#include <memory>
#include <string>

#include "cli/cli.h"
#include "control/protocol.h"

namespace layerfs::client {

class Session {
 public:
  // `store` is the Store's real path; `cwd` the directory relative paths are against.
  Session(std::string store, std::string cwd) : store_(std::move(store)), cwd_(std::move(cwd)) {}

  // Connects to the Store's daemon if one listens (true), else false (verbs then run here).
  bool Connect();
  // Connects, starting a daemon when none listens (idle_seconds < 0: one that lives for its
  // mounts and connections, as `layerfs mount` starts; else `--idle idle_seconds`).
  Status ConnectOrStart(int idle_seconds);
  bool connected() const { return conn_ != nullptr; }

  // Runs verb `v` with `args`; long work reports to `progress` (may be empty). A verb's failure
  // is the returned Status, with *result set when the failure has one. A daemon that was exiting
  // as we connected closes the connection without reading the request: the first request of a
  // connection is then sent again, to a new daemon (or run here, when none is to be started).
  Status Call(const cli::Verb& v, const cli::Args& args, nlohmann::json* result, const ProgressFn& progress = nullptr);
  Status Call(const std::string& verb, const nlohmann::json& args, nlohmann::json* result,
              const ProgressFn& progress = nullptr);

  const std::string& store() const { return store_; }
  const std::string& cwd() const { return cwd_; }

 private:
  static constexpr int kNoStart = -2;
  std::string store_, cwd_;
  std::unique_ptr<control::Conn> conn_;
  bool fresh_ = false;         // conn_ has had no answer yet
  int start_idle_ = kNoStart;  // how ConnectOrStart started a daemon (for a reconnect)
  std::unique_ptr<cli::Context> local_;  // when no daemon: this process's own Store
};

// Progress as JSON (the protocol's event) and back.
nlohmann::json ProgressToJson(const Progress& p);
Progress ProgressFromJson(const nlohmann::json& j);

}  // namespace layerfs::client
