#include "control/protocol.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

namespace layerfs::control {

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

}  // namespace

Conn::~Conn() {
  if (fd_ >= 0) close(fd_);
}

Result<std::unique_ptr<Conn>> Conn::Connect(const std::string& store) {
  LFS_ASSIGN(sockaddr_un addr, Address(store));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    Status s = Errno("connect to layerfsd");
    close(fd);
    return s;
  }
  return std::make_unique<Conn>(fd);
}

Status Conn::SendLine(std::string_view line) {
  std::string msg;
  msg.reserve(line.size() + 1);
  msg.append(line);
  msg.push_back('\n');
  std::string_view d = msg;
  while (!d.empty()) {
    ssize_t n = send(fd_, d.data(), d.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("control socket write");
    }
    d.remove_prefix(n);
  }
  return Status::Ok();
}

Result<std::string> Conn::ReadLine(size_t* partial) {
  for (;;) {
    auto nl = buf_.find('\n', scanned_);
    if (nl != std::string::npos) {
      if (nl > kMaxMessage) return Status::Errorf(kTooLarge, "message over {} bytes", kMaxMessage);
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      scanned_ = 0;
      return line;
    }
    scanned_ = buf_.size();
    if (buf_.size() > kMaxMessage) return Status::Errorf(kTooLarge, "message over {} bytes", kMaxMessage);
    char tmp[65536];
    ssize_t n;
    do n = recv(fd_, tmp, sizeof tmp, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) return Errno("control socket read");
    if (n == 0) {
      if (buf_.empty()) return Status::Error(EPIPE, "connection closed");
      if (partial) *partial = buf_.size();
      return Status::Errorf(kProtocol, "truncated message: the connection ended {} bytes into it", buf_.size());
    }
    buf_.append(tmp, n);
  }
}

json ErrorJson(const Status& s) {
  return {{"code", s.CodeName()}, {"errno", s.code() > 0 && s.code() < 0x10000 ? s.code() : 0},
          {"message", s.message()}};
}

Status StatusFromError(const json& e) {
  if (!e.is_object()) return Status::Errorf(kProtocol, "malformed error from layerfsd: {}", Dump(e));
  // A peer's fields of the wrong type are read as absent (json::value would throw on them).
  std::string code = e.contains("code") && e["code"].is_string() ? e["code"].get<std::string>() : "";
  std::string msg = e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : code;
  int num = e.contains("errno") && e["errno"].is_number_integer() ? e["errno"].get<int>() : 0;
  for (int own : {kNotFastForward, kConflict, kDiverged, kTooLarge, kProtocol})
    if (Status::Error(own, "").CodeName() == code) return Status::Error(own, msg);
  return Status::Error(num > 0 ? num : EIO, msg);
}

Result<Reply> Call(Conn& c, const std::string& verb, const json& args, const std::string& cwd,
                   const std::function<void(const json&)>& on_progress) {
  static std::atomic<uint64_t> next_id{1};
  const uint64_t id = next_id++;
  json req = {{"protocol", kVersion}, {"id", id}, {"verb", verb}, {"args", args}, {"cwd", cwd}};
  std::string line = Dump(req);
  if (line.size() > kMaxMessage) return Status::Errorf(kTooLarge, "request over {} bytes", kMaxMessage);
  // A daemon that refuses the connection (another user's) answers and closes before reading the
  // request: the send then fails, but its answer is waiting to be read, and says more.
  Status sent = c.SendLine(line);
  for (;;) {
    auto got = c.ReadLine();
    if (!got.ok()) {
      if (!sent.ok()) return sent;
      if (got.status().code() == EPIPE) return Status::Error(EPIPE, "layerfsd closed the connection");
      return got.status();
    }
    json m;
    try {
      m = Parse(*got);
    } catch (const std::exception& e) {
      return Status::Errorf(kProtocol, "bad message from layerfsd: {}", e.what());
    }
    if (!m.is_object()) return Status::Errorf(kProtocol, "bad message from layerfsd: {}", got->substr(0, 200));
    if (m.contains("event")) {
      if (on_progress && m["event"] == "progress" && m.contains("progress")) on_progress(m["progress"]);
      continue;
    }
    // A response with id null answers a request the daemon could not read (a version mismatch).
    if (!m.contains("ok") || !m["ok"].is_boolean())
      return Status::Errorf(kProtocol, "bad message from layerfsd: {}", got->substr(0, 200));
    if (!m["id"].is_null() && m["id"] != id)
      return Status::Errorf(kProtocol, "response for request {} while waiting for {}", Dump(m["id"]), id);
    Reply r;
    if (m["ok"].get<bool>()) {
      r.result = m.value("result", json());
    } else {
      const json& e = m.contains("error") ? m["error"] : json();
      r.status = StatusFromError(e);
      if (e.is_object() && e.contains("result")) r.result = e["result"];
    }
    return r;
  }
}

bool DaemonRunning(const std::string& store) { return Conn::Connect(store).ok(); }

namespace {

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  std::string p = buf;
  return p.substr(0, p.rfind('/'));
}

}  // namespace

std::string DaemonPath() {
  if (const char* env = getenv("LAYERFSD")) return env;
  const std::string dir = SelfDir();
  std::string beside = dir + "/layerfsd";
  if (access(beside.c_str(), X_OK) == 0) return beside;
  // The full CLI installed as PREFIX/libexec/layerfs/layerfs-full (front/front.h): PREFIX/bin.
  std::string bin = dir + "/../../bin/layerfsd";
  if (access(bin.c_str(), X_OK) == 0) return bin;
  return "layerfsd";
}

void WaitForExitingDaemon(const std::string& store) {
  FILE* f = fopen(PidPath(store).c_str(), "r");
  if (!f) return;
  long pid = 0;
  if (fscanf(f, "%ld", &pid) != 1) pid = 0;
  fclose(f);
  // Alive and not a zombie (an exited daemon can stay one until init reaps it).
  auto alive = [pid] {
    if (kill(static_cast<pid_t>(pid), 0) != 0) return false;
    FILE* st = fopen(fmt::format("/proc/{}/stat", pid).c_str(), "r");
    if (!st) return false;
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf - 1, st);
    fclose(st);
    buf[n] = 0;
    const char* close_paren = strrchr(buf, ')');
    return !(close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z');
  };
  for (int i = 0; pid > 0 && i < 300 && alive(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

Status StartDaemon(const std::string& store, int idle_seconds) {
  // A daemon that served its last unmount stops listening before it has closed the Store: wait
  // for that process to end before starting another.
  WaitForExitingDaemon(store);
  int errpipe[2];
  if (pipe2(errpipe, O_CLOEXEC) != 0) return Errno("pipe");
  const std::string d = DaemonPath();
  const std::string idle = std::to_string(idle_seconds);
  std::string quoted_path = Dump(json(d));  // the path inside a JSON string, without its quotes
  quoted_path = quoted_path.substr(1, quoted_path.size() - 2);
  pid_t pid = fork();
  if (pid < 0) {
    Status s = Errno("fork");
    close(errpipe[0]);
    close(errpipe[1]);
    return s;
  }
  if (pid == 0) {
    // layerfsd reports why it could not start on stderr: keep it for our message.
    dup2(errpipe[1], 2);
    if (idle_seconds >= 0)
      execlp(d.c_str(), d.c_str(), "--store", store.c_str(), "--json", "--idle", idle.c_str(),
             static_cast<char*>(nullptr));
    else
      execlp(d.c_str(), d.c_str(), "--store", store.c_str(), "--json", static_cast<char*>(nullptr));
    // As layerfsd --json would report it; no allocation between fork and _exit.
    const int e = errno;
    const char* name = strerrorname_np(e);
    dprintf(2, "{\"error\":{\"code\":\"%s\",\"errno\":%d,\"message\":\"cannot run %s: %s\"}}\n", name ? name : "EIO", e,
            quoted_path.c_str(), strerror(e));
    _exit(127);
  }
  close(errpipe[1]);
  std::string err;
  char buf[512];
  ssize_t n;
  while ((n = read(errpipe[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) err.append(buf, n);
  close(errpipe[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    // layerfsd --json reports why as the protocol's error object, on its last line.
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    const std::string last = err.substr(err.rfind('\n') == std::string::npos ? 0 : err.rfind('\n') + 1);
    json e = ParseOrDiscarded(last);
    Status why = e.is_object() && e.contains("error") ? StatusFromError(e["error"])
                                                      : Status::Error(EIO, last.empty() ? "no reason given" : last);
    return Status::Error(why.code(), "layerfsd failed to start: " + why.message());
  }
  for (int i = 0; i < 200; i++) {
    if (DaemonRunning(store)) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Status::Error(ETIMEDOUT, "layerfsd did not answer");
}

Result<std::unique_ptr<Conn>> ConnectOrStart(const std::string& store, int idle_seconds) {
  auto c = Conn::Connect(store);
  if (c.ok()) return c;
  if (c.status().code() != ENOENT && c.status().code() != ECONNREFUSED) return c.status();
  LFS_TRY(StartDaemon(store, idle_seconds));
  return Conn::Connect(store);
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

}  // namespace layerfs::control
