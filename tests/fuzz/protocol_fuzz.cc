// Fuzz target: the control protocol's framing and its client (src/control/protocol.h). The input
// is what the other end of the socket sent before closing: the daemon reads it as request lines
// (Conn::ReadLine, then each line as a JSON message), and a client that sent a request reads it
// as the daemon's events and response (Call: progress events, errors, results). Names are bytes
// (control/json_bytes.h): any input as a string, and any message read, must come back whole
// through Dump and Parse.
#include <sys/socket.h>
#include <unistd.h>

#include "control/protocol.h"
#include "fuzz_util.h"

using namespace layerfs;

namespace {

// A connected pair with `data` (as much as the buffer takes) waiting to be read on the
// returned Conn's side; the writing end is shut for writing.
bool Feed(const uint8_t* data, size_t size, int sv[2]) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
  int bufsize = 4 << 20;
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof bufsize);
  setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof bufsize);
  size_t off = 0;
  while (off < size) {
    ssize_t n = send(sv[0], data + off, size - off, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  shutdown(sv[0], SHUT_WR);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (control::Parse(control::Dump(control::json(bytes))) != bytes) abort();
  int sv[2];
  // The daemon's side: lines, each a JSON message whose error objects a peer may echo.
  if (Feed(data, size, sv)) {
    control::Conn server(sv[1]);
    for (int i = 0; i < 64; i++) {
      size_t partial = 0;
      auto line = server.ReadLine(&partial);
      if (!line.ok()) break;
      auto m = control::ParseOrDiscarded(*line);
      if (m.is_discarded()) continue;
      if (control::Parse(control::Dump(m)) != m || control::Parse(control::Dump(m, 2)) != m) abort();
      if (m.is_object() && m.contains("error")) (void)control::StatusFromError(m["error"]);
    }
    close(sv[0]);
  }
  // The client's side: the input is the daemon's answer to one request.
  if (Feed(data, size, sv)) {
    control::Conn client(sv[1]);
    size_t progress = 0;
    auto reply = control::Call(client, "log", control::json::object(), "/",
                               [&](const control::json& p) { progress += p.size(); });
    if (reply.ok()) (void)control::Dump(reply->result);
    close(sv[0]);
  }
  return 0;
}
