#include "daemon/control_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "control/protocol.h"
#include "front/front.h"

namespace layerfs::daemon {

using nlohmann::json;

std::chrono::steady_clock::time_point ControlServer::last_activity() const {
  return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(last_activity_ns_.load()));
}

void ControlServer::Touch() { last_activity_ns_ = std::chrono::steady_clock::now().time_since_epoch().count(); }

Status ControlServer::Run(const cli::Verb& v, const cli::Args& args, const std::string& cwd, uint32_t uid,
                          uint32_t gid, const ProgressFn& progress, json* result) {
  cli::Context ctx;
  ctx.cwd = cwd;
  ctx.uid = uid;
  ctx.gid = gid;
  ctx.store_path = store_.path();
  ctx.store = &store_;
  ctx.workspaces = &reg_;
  ctx.mounts = &mounts_;
  ctx.progress = progress;
  Status s = cli::RunVerb(ctx, v, args, result);
  served_++;
  return s;
}

namespace {

json ProgressJson(const Progress& p) {
  json j = {{"phase", p.phase}, {"objects", p.objects}, {"bytes", p.bytes}, {"rate", p.rate}, {"done", p.done}};
  if (p.objects_total) j["objects_total"] = p.objects_total;
  if (p.bytes_total) j["bytes_total"] = p.bytes_total;
  return j;
}

// One request's line, checked; sets *close when the connection must end after the answer.
struct Request {
  json id;  // null until one could be read
  const cli::Verb* verb = nullptr;  // null for `cli` (front/front.h)
  bool command_line = false;        // request `cli`
  cli::Args args;
  std::string cwd = "/";
};

Status Parse(const std::string& line, Request* r, bool* close) {
  json m;
  try {
    m = control::Parse(line);
  } catch (const std::exception& e) {
    return Status::Errorf(kProtocol, "not a JSON message: {}", e.what());
  }
  if (!m.is_object()) return Status::Error(kProtocol, "a request must be a JSON object");
  if (m.contains("id") && (m["id"].is_number() || m["id"].is_string())) r->id = m["id"];
  if (!m.contains("verb") && (m.contains("ok") || m.contains("event")))
    return Status::Error(kProtocol, "out of order: a response or event sent to layerfsd (clients send requests)");
  if (!m.contains("protocol"))
    return Status::Errorf(kProtocol, "missing 'protocol' (the version the client speaks; this layerfsd speaks {})",
                          control::kVersion);
  if (!m["protocol"].is_number_integer() || m["protocol"].get<int64_t>() != control::kVersion) {
    *close = true;
    return Status::Errorf(kProtocol, "client speaks protocol {}, this layerfsd speaks {}", control::Dump(m["protocol"]),
                          control::kVersion);
  }
  if (!m.contains("id")) return Status::Error(kProtocol, "missing 'id'");
  if (r->id.is_null()) return Status::Error(kProtocol, "'id' must be a number or a string");
  if (!m.contains("verb") || !m["verb"].is_string()) return Status::Error(kProtocol, "missing 'verb'");
  const std::string verb = m["verb"].get<std::string>();
  r->verb = cli::FindVerb(verb);
  r->command_line = verb == front::kRequestVerb;
  if (!r->verb && !r->command_line) return Status::Invalid(fmt::format("unknown verb '{}'", verb));
  if (r->verb && (!r->verb->protocol || !r->verb->run))
    return Status::Invalid(fmt::format("'{}' runs in the client (layerfs {}), not in layerfsd", verb, r->verb->cli));
  if (m.contains("args") && !m["args"].is_null()) {
    if (!m["args"].is_object()) return Status::Invalid(fmt::format("{}: args must be a JSON object", verb));
    r->args = cli::Args(m["args"]);
  }
  if (m.contains("cwd") && !m["cwd"].is_null()) {
    if (!m["cwd"].is_string() || m["cwd"].get<std::string>().empty() || m["cwd"].get<std::string>()[0] != '/')
      return Status::Invalid("cwd must be an absolute directory");
    r->cwd = m["cwd"].get<std::string>();
  }
  return Status::Ok();
}

// A request's work, with an exception that escapes it (the core reports failures as Status; an
// exception is a library's, or memory running out) answered as that request's failure: left to
// unwind the connection's thread it would end the daemon and every mount it serves.
template <typename F>
Status Guarded(const std::string& what, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    spdlog::error("{}: out of memory", what);
    return Status::Errorf(ENOMEM, "{}: out of memory", what);
  } catch (const std::exception& e) {
    spdlog::error("{}: internal error: {}", what, e.what());
    return Status::Errorf(EIO, "{}: internal error: {}", what, e.what());
  }
}

std::string Brief(const json& args) {
  std::string s = control::Dump(args);
  return s.size() > 200 ? s.substr(0, 200) + "..." : s;
}

}  // namespace

void ControlServer::ShutdownAll() {
  std::lock_guard l(mu_);
  closing_ = true;
  for (int fd : open_) shutdown(fd, SHUT_RD);
}

void ControlServer::Serve(int fd) {
  connections_++;
  Touch();
  {
    std::lock_guard l(mu_);
    open_.insert(fd);
    if (closing_) shutdown(fd, SHUT_RD);
  }
  control::Conn conn(fd);
  auto answer = [&](const json& id, const Status& s, const json& result) {
    json msg = {{"id", id}, {"ok", s.ok()}};
    if (s.ok()) {
      msg["result"] = result;
    } else {
      msg["error"] = control::ErrorJson(s);
      if (!result.is_null()) msg["error"]["result"] = result;
    }
    std::string line = control::Dump(msg);
    if (line.size() > control::kMaxMessage) {
      line = json({{"id", id}, {"ok", false},
                   {"error", control::ErrorJson(Status::Errorf(kTooLarge, "the result is {} bytes, over the {} byte limit",
                                                               line.size(), control::kMaxMessage))}})
                 .dump();  // no string of the caller's in it
    }
    (void)conn.SendLine(line);
  };
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    answer(nullptr, Status::Errorf(errno, "peer credentials: {}", strerror(errno)), nullptr);
  } else if (cred.uid != geteuid() && cred.uid != 0) {
    spdlog::warn("refused a connection of uid {}", cred.uid);
    answer(nullptr, Status::Errorf(EACCES, "uid {} is not the owner of this store (uid {}); only the owner and root are served",
                                   cred.uid, geteuid()),
           nullptr);
  } else {
    for (;;) {
      auto line = conn.ReadLine();
      if (!line.ok()) {
        // A clean close between requests ends quietly; a truncated or oversized message is told.
        if (line.status().code() == kTooLarge || line.status().code() == kProtocol) answer(nullptr, line.status(), nullptr);
        break;
      }
      Request req;
      bool close = false;
      Status s = Parse(*line, &req, &close);
      if (!s.ok()) {
        answer(req.id, s, nullptr);
        if (close) break;
        continue;
      }
      if (req.command_line) {
        json result;
        s = Guarded("cli", [&] { return RunCommandLine(conn, req.id, req.args, req.cwd, cred.uid, cred.gid, &result); });
        answer(req.id, s, result);
        Touch();
        continue;
      }
      if (req.verb->read_only) spdlog::debug("{} {}", req.verb->name, Brief(req.args.raw()));
      else spdlog::info("{} {}", req.verb->name, Brief(req.args.raw()));
      ProgressFn progress = [&](const Progress& p) {
        (void)conn.Send({{"id", req.id}, {"event", "progress"}, {"progress", ProgressJson(p)}});
      };
      json result;
      s = Guarded(req.verb->name, [&] { return Run(*req.verb, req.args, req.cwd, cred.uid, cred.gid, progress, &result); });
      if (!s.ok()) spdlog::info("{}: {} {}", req.verb->name, s.CodeName(), s.message());
      answer(req.id, s, s.ok() && result.is_null() ? json::object() : result);
      Touch();
    }
  }
  // Bytes the client sent that we will not read (after a refusal, TOO_LARGE, a version mismatch)
  // would make the close a reset, and the client could lose our last message: drop them first.
  char junk[65536];
  while (recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0) {
  }
  {
    std::lock_guard l(mu_);
    open_.erase(fd);
  }
  connections_--;
  Touch();
}

}  // namespace layerfs::daemon
