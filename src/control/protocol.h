// The control protocol between LayerFS clients (the CLI, `layerfs mcp`, the SDKs) and the
// `layerfsd` that holds a Store: JSON lines over the Unix socket STORE/control.sock. The contract
// is docs/protocol.md (version 1); this is its framing and the C++ client.
//
// A Conn is one connected socket; it carries any number of requests, one after another. Each
// request gets zero or more events, then one final response (Call reads them all). Messages are
// at most kMaxMessage bytes; a longer one is TOO_LARGE. A Conn belongs to one thread at a time.
// The free functions are stateless and thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "control/json_bytes.h"
#include "layerfs/status.h"

namespace layerfs::control {

using nlohmann::json;

constexpr int kVersion = 1;
constexpr size_t kMaxMessage = 64 << 20;

std::string SocketPath(const std::string& store);
std::string PidPath(const std::string& store);

class Conn {
 public:
  explicit Conn(int fd) : fd_(fd) {}
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Connects to the daemon of `store`: ENOENT or ECONNREFUSED when none listens.
  static Result<std::unique_ptr<Conn>> Connect(const std::string& store);

  // Sends one message (a line; `line` must hold no newline).
  Status SendLine(std::string_view line);
  Status Send(const json& msg) { return SendLine(Dump(msg)); }
  // The next message, without its newline. EPIPE when the peer closed between messages;
  // kProtocol when it closed in the middle of one (`*partial` gets how many bytes it had sent);
  // kTooLarge when a line grows past kMaxMessage (the connection is then unusable).
  Result<std::string> ReadLine(size_t* partial = nullptr);
  int fd() const { return fd_; }

 private:
  int fd_;
  std::string buf_;
  size_t scanned_ = 0;  // bytes of buf_ already searched for a newline
};

// The outcome of one request: the verb's Status (the code of its error response) and its result
// (null when it has none; an error may carry one: a merge's conflicts).
struct Reply {
  Status status;
  json result;
};

// The Status an error object {"code", "errno", "message"} stands for.
Status StatusFromError(const json& error);
// The error object for a failed Status (docs/protocol.md, "Error codes").
json ErrorJson(const Status& s);

// Sends a request and reads its events (progress goes to `on_progress`, if set) and its final
// response. A transport failure (the daemon died, a malformed reply) is the returned Status;
// a verb's failure is Reply::status.
Result<Reply> Call(Conn& c, const std::string& verb, const json& args, const std::string& cwd,
                   const std::function<void(const json& progress)>& on_progress = nullptr);

// True when a daemon answers on the Store's socket.
bool DaemonRunning(const std::string& store);
// The layerfsd to start: $LAYERFSD, else the one beside this program, else ../../bin/layerfsd
// from it (the full CLI in PREFIX/libexec/layerfs), else layerfsd on PATH.
std::string DaemonPath();
// Starts `layerfsd --store STORE --json [--idle SECONDS]` (from $LAYERFSD, beside this program, or on
// PATH; idle_seconds < 0: without --idle, so it lives for its mounts) and waits until it
// answers. Waits first for a daemon that is still exiting. A failure to start keeps the code
// layerfsd reported (EBUSY: the Store is held by another process; ENOENT: no Store there).
Status StartDaemon(const std::string& store, int idle_seconds);
// Waits (a few seconds at most) for the daemon named by the Store's pid file to end: one that
// stopped listening, or is about to, while it closes the Store.
void WaitForExitingDaemon(const std::string& store);
// Connects, starting a daemon (StartDaemon) when none listens.
Result<std::unique_ptr<Conn>> ConnectOrStart(const std::string& store, int idle_seconds);

// Server side: the listening socket (mode 0600), replacing a stale one.
Result<int> Listen(const std::string& store);

}  // namespace layerfs::control
