#include "control/protocol.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

namespace layerfs::control {

using nlohmann::json;

std::string SocketPath(const std::string& store) { return store + "/control.sock"; }
std::string PidPath(const std::string& store) { return store + "/layerfsd.pid"; }

namespace {

Status Errno(std::string_view what) { return Status::Errorf(errno, "{}: {}", what, strerror(errno)); }

Result<sockaddr_un> Address(const std::string& store) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::string p = SocketPath(store);
  if (p.size() >= sizeof a.sun_path) return Status::Error(ENAMETOOLONG, "store path too long for a socket");
  std::memcpy(a.sun_path, p.c_str(), p.size() + 1);
  return a;
}

Status WriteAll(int fd, std::string_view d) {
  while (!d.empty()) {
    ssize_t n = send(fd, d.data(), d.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("control socket write");
    }
    d.remove_prefix(n);
  }
  return Status::Ok();
}

// Buffered reads of a line, then of exact byte counts.
class Reader {
 public:
  explicit Reader(int fd) : fd_(fd) {}
  Result<std::string> Line() {
    for (;;) {
      auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      if (buf_.size() > (1 << 20)) return Status::Invalid("control message too long");
      LFS_TRY(Fill());
    }
  }
  Result<std::string> Bytes(size_t n) {
    while (buf_.size() < n) LFS_TRY(Fill());
    std::string out = buf_.substr(0, n);
    buf_.erase(0, n);
    return out;
  }

 private:
  Status Fill() {
    char tmp[65536];
    ssize_t n;
    do n = recv(fd_, tmp, sizeof tmp, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) return Errno("control socket read");
    if (n == 0) return Status::Error(EPIPE, "daemon closed the connection");
    buf_.append(tmp, n);
    return Status::Ok();
  }
  int fd_;
  std::string buf_;
};

}  // namespace

Result<Response> Call(const std::string& store, const Request& req) {
  LFS_ASSIGN(sockaddr_un addr, Address(store));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    Status s = Errno("connect to daemon");
    close(fd);
    return s;
  }
  json j = {{"argv", req.argv}, {"cwd", req.cwd}};
  Status s = WriteAll(fd, j.dump() + "\n");
  Response resp;
  if (s.ok()) {
    Reader r(fd);
    auto line = r.Line();
    if (!line.ok()) {
      s = line.status();
    } else {
      try {
        json h = json::parse(*line);
        resp.exit = h.at("exit").get<int>();
        auto out = r.Bytes(h.at("out").get<size_t>());
        auto err = out.ok() ? r.Bytes(h.at("err").get<size_t>()) : out;
        if (!out.ok() || !err.ok()) s = out.ok() ? err.status() : out.status();
        else {
          resp.out = std::move(*out);
          resp.err = std::move(*err);
        }
      } catch (const std::exception& e) {
        s = Status::Errorf(EPROTO, "bad response from daemon: {}", e.what());
      }
    }
  }
  close(fd);
  if (!s.ok()) return s;
  return resp;
}

bool DaemonRunning(const std::string& store) {
  auto addr = Address(store);
  if (!addr.ok()) return false;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&*addr), sizeof *addr) == 0;
  close(fd);
  return ok;
}

Result<int> Listen(const std::string& store) {
  LFS_ASSIGN(sockaddr_un addr, Address(store));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  unlink(addr.sun_path);  // a stale socket of a daemon that died (we hold the Store's lock)
  mode_t old = umask(077);
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  umask(old);
  if (rc != 0 || listen(fd, 64) != 0) {
    Status s = Errno("listen on control socket");
    close(fd);
    return s;
  }
  chmod(addr.sun_path, 0600);
  return fd;
}

Result<Request> ReadRequest(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return Errno("peer credentials");
  if (cred.uid != geteuid() && cred.uid != 0) return Status::Error(EACCES, "peer is another user");
  Reader r(fd);
  LFS_ASSIGN(std::string line, r.Line());
  try {
    json j = json::parse(line);
    Request req;
    req.argv = j.at("argv").get<std::vector<std::string>>();
    req.cwd = j.value("cwd", "/");
    return req;
  } catch (const std::exception& e) {
    return Status::Errorf(EPROTO, "bad request: {}", e.what());
  }
}

Status WriteResponse(int fd, const Response& resp) {
  json h = {{"exit", resp.exit}, {"out", resp.out.size()}, {"err", resp.err.size()}};
  LFS_TRY(WriteAll(fd, h.dump() + "\n"));
  LFS_TRY(WriteAll(fd, resp.out));
  return WriteAll(fd, resp.err);
}

}  // namespace layerfs::control
