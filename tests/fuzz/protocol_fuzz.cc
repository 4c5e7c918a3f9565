// Fuzz target: the daemon's control request reader (src/control/protocol.h), fed the input as
// what a client sent over the socket before closing its end.
#include <sys/socket.h>
#include <unistd.h>

#include "control/protocol.h"
#include "fuzz_util.h"

using namespace layerfs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  // Write from a thread-free loop: the socket buffer may be smaller than the input, so the
  // reader side runs after the writer has put as much as fits and closed (a shorter request).
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
  auto req = control::ReadRequest(sv[1]);
  if (req.ok()) {
    for (const auto& a : req->argv) (void)a.size();
  }
  close(sv[0]);
  close(sv[1]);
  return 0;
}
