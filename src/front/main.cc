// layerfs (the front, front.h): runs the command line in the Store's daemon when one listens,
// else execs the full CLI. Links no LayerFS library but front/store.cc, and no shared library
// but the C and C++ runtimes (none at all in a static build), so that starting it costs about
// what starting any small program costs.
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "control/json_bytes.h"
#include "front/front.h"

namespace {

using nlohmann::json;
using layerfs::front::kFullName;

std::string SelfDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

// The full CLI, with the same argv. Returns only when it cannot be run.
[[noreturn]] void ExecFull(char** argv) {
  const std::string dir = SelfDir();
  const std::string paths[] = {dir + "/" + kFullName, dir + "/../libexec/layerfs/" + kFullName};
  int err = ENOENT;
  for (const auto& p : paths) {
    execv(p.c_str(), argv);
    if (errno != ENOENT) err = errno;
  }
  execvp(kFullName, argv);  // a front copied away from its build or install tree
  if (errno != ENOENT) err = errno;
  fprintf(stderr, "layerfs: cannot run %s (beside %s/layerfs, in ../libexec/layerfs or on PATH): %s\n", kFullName,
          dir.c_str(), strerror(err));
  exit(1);
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool SendAll(int fd, const std::string& s) {
  const char* p = s.data();
  size_t n = s.size();
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

int Base64Value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool Base64Decode(const std::string& in, std::string* out) {
  out->clear();
  out->reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    if (c == '=') break;
    int v = Base64Value(c);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return true;
}

// Reads the connection's messages one line at a time.
class Lines {
 public:
  explicit Lines(int fd) : fd_(fd) {}
  // The next line; false at the end of the connection or on an error.
  bool Next(std::string* line) {
    for (;;) {
      size_t nl = buf_.find('\n', scanned_);
      if (nl != std::string::npos) {
        line->assign(buf_, 0, nl);
        buf_.erase(0, nl + 1);
        scanned_ = 0;
        return true;
      }
      scanned_ = buf_.size();
      char tmp[65536];
      ssize_t n = recv(fd_, tmp, sizeof tmp, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buf_.append(tmp, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  std::string buf_;
  size_t scanned_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  if (layerfs::front::IsMountHelperForm(args)) ExecFull(argv);
  // `-C DIR` is taken here: the full CLI, if it runs, gets the rest in DIR.
  const std::string refusal = layerfs::front::ChangeDirs(&args);
  if (!refusal.empty()) {
    fprintf(stderr, "layerfs: %s\n", refusal.c_str());
    return 2;
  }
  std::vector<char*> rest;
  for (auto& s : args) rest.push_back(s.data());
  rest.push_back(nullptr);
  argv = rest.data();
  char cwd_buf[PATH_MAX];
  const std::string cwd = getcwd(cwd_buf, sizeof cwd_buf) ? cwd_buf : "/";
  const char* store_env = getenv("LAYERFS_STORE");
  const std::string store = layerfs::front::ResolveStore(layerfs::front::StoreOption(args), store_env, args, cwd, false);
  if (store.empty()) ExecFull(argv);
  const std::string sock_path = store + "/control.sock";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (sock_path.size() >= sizeof addr.sun_path) ExecFull(argv);
  memcpy(addr.sun_path, sock_path.c_str(), sock_path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) ExecFull(argv);

  json request = {{"protocol", 1},
                  {"id", 1},
                  {"verb", layerfs::front::kRequestVerb},
                  {"cwd", cwd},
                  {"args", {{"argv", args}, {"store_env", store_env ? json(store_env) : json(nullptr)},
                            {"stderr_tty", isatty(STDERR_FILENO) == 1}}}};
  // Arguments that are not UTF-8 (file names are bytes) travel as \udcXX escapes.
  std::string line = layerfs::control::Dump(request) + "\n";
  if (!SendAll(fd, line)) {
    close(fd);
    ExecFull(argv);
  }
  Lines lines(fd);
  bool printed = false;
  std::string data;
  for (;;) {
    if (!lines.Next(&line)) {
      // Before any reply: a daemon that was exiting closed the connection unread; the full CLI
      // waits for it and starts another, or runs the verb itself.
      close(fd);
      if (!printed) ExecFull(argv);
      fprintf(stderr, "layerfs: layerfsd: the connection ended before the command finished\n");
      return 1;
    }
    json m = layerfs::control::ParseOrDiscarded(line);
    if (!m.is_object()) {
      fprintf(stderr, "layerfs: layerfsd: a reply that is not a JSON object\n");
      return 1;
    }
    if (m.contains("event")) {
      if (m["event"] != layerfs::front::kOutputEvent) continue;  // events of later versions
      const json& o = m["output"];
      if (!o.is_object() || !o.contains("data_base64") || !o["data_base64"].is_string() ||
          !Base64Decode(o["data_base64"].get<std::string>(), &data)) {
        fprintf(stderr, "layerfs: layerfsd: a malformed output event\n");
        return 1;
      }
      const int out_fd = o.value("fd", 1) == 2 ? STDERR_FILENO : STDOUT_FILENO;
      printed = true;
      // A failed write is ignored, as the full CLI's stdio ignores it (a closed pipe's SIGPIPE
      // ends us as it ends the full CLI).
      (void)WriteAll(out_fd, data.data(), data.size());
      continue;
    }
    close(fd);
    if (m.value("ok", false) && m.contains("result") && m["result"].is_object() &&
        m["result"].contains("exit_code") && m["result"]["exit_code"].is_number_integer())
      return m["result"]["exit_code"].get<int>();
    // Refused before printing anything: the command line runs in the client.
    if (!printed) ExecFull(argv);
    std::string msg = "a reply without an exit status";
    if (m.contains("error") && m["error"].is_object()) msg = m["error"].value("message", msg);
    fprintf(stderr, "layerfs: layerfsd: %s\n", msg.c_str());
    return 1;
  }
}
