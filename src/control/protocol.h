// The control protocol between `layerfs` and a running `layerfsd`, over the Unix socket
// STORE/control.sock (mode 0600; the server also checks the peer's uid with SO_PEERCRED).
//
// A request is one JSON line: {"argv": [...], "cwd": "/abs/dir"}: the CLI's own arguments,
// so every verb runs in the daemon exactly as it would in the CLI, against the daemon's open
// Store. A response is one JSON line {"exit": N, "out": BYTES, "err": BYTES} followed by that
// many raw bytes of standard output, then of standard error (file content passes unchanged).
// Stateless functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "layerfs/status.h"

namespace layerfs::control {

struct Request {
  std::vector<std::string> argv;
  std::string cwd;
};

struct Response {
  int exit = 0;
  std::string out, err;
};

std::string SocketPath(const std::string& store);
std::string PidPath(const std::string& store);

// Sends `req` to the daemon of `store`. ECONNREFUSED / ENOENT when no daemon listens.
Result<Response> Call(const std::string& store, const Request& req);
// True when a daemon answers on the Store's socket.
bool DaemonRunning(const std::string& store);

// Server side: a listening socket, and one connection's request and response.
Result<int> Listen(const std::string& store);
// Reads a request from `fd`; EACCES if the peer is another user (root may talk to anyone's).
Result<Request> ReadRequest(int fd);
Status WriteResponse(int fd, const Response& resp);

}  // namespace layerfs::control
