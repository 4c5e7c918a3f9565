#include "client/session.h"

#include <unistd.h>

namespace layerfs::client {

using nlohmann::json;

json ProgressToJson(const Progress& p) {
  json j = {{"phase", p.phase}, {"objects", p.objects}, {"bytes", p.bytes}, {"rate", p.rate}, {"done", p.done}};
  if (p.objects_total) j["objects_total"] = p.objects_total;
  if (p.bytes_total) j["bytes_total"] = p.bytes_total;
  return j;
}

Progress ProgressFromJson(const json& j) {
  Progress p;
  if (!j.is_object()) return p;
  p.phase = j.value("phase", "");
  p.objects = j.value("objects", uint64_t{0});
  p.objects_total = j.value("objects_total", uint64_t{0});
  p.bytes = j.value("bytes", uint64_t{0});
  p.bytes_total = j.value("bytes_total", uint64_t{0});
  p.rate = j.value("rate", 0.0);
  p.done = j.value("done", false);
  return p;
}

bool Session::Connect() {
  if (conn_) return true;
  if (store_.empty()) return false;
  auto c = control::Conn::Connect(store_);
  if (!c.ok()) return false;
  conn_ = std::move(*c);
  fresh_ = true;
  return true;
}

Status Session::ConnectOrStart(int idle_seconds) {
  start_idle_ = idle_seconds;
  if (conn_) return Status::Ok();
  if (store_.empty()) return Status::Invalid("no store given: use --store PATH or set LAYERFS_STORE");
  LFS_ASSIGN(conn_, control::ConnectOrStart(store_, idle_seconds));
  fresh_ = true;
  return Status::Ok();
}

namespace {

bool Disconnected(const Status& s) { return s.code() == EPIPE || s.code() == ECONNRESET; }

}  // namespace

Status Session::Call(const cli::Verb& v, const cli::Args& args, json* result, const ProgressFn& progress) {
  for (int attempt = 0; conn_ && v.protocol; attempt++) {
    std::function<void(const json&)> on_progress;
    if (progress) on_progress = [&](const json& p) { progress(ProgressFromJson(p)); };
    auto r = control::Call(*conn_, v.name, args.raw(), cwd_, on_progress);
    if (r.ok()) {
      fresh_ = false;
      *result = std::move(r->result);
      return r->status;
    }
    const bool retry = fresh_ && attempt < 3 && Disconnected(r.status());
    conn_.reset();
    if (!retry) return r.status().Context("layerfsd");
    control::WaitForExitingDaemon(store_);
    if (start_idle_ != kNoStart) LFS_TRY(ConnectOrStart(start_idle_));
    else Connect();  // else: no daemon any more, run it here
  }
  if (!local_) {
    local_ = std::make_unique<cli::Context>();
    local_->store_path = store_;
    local_->cwd = cwd_;
    local_->uid = geteuid();
    local_->gid = getegid();
  }
  local_->progress = progress;
  return cli::RunVerb(*local_, v, args, result);
}

Status Session::Call(const std::string& verb, const json& args, json* result, const ProgressFn& progress) {
  const cli::Verb* v = cli::FindVerb(verb);
  if (!v) return Status::Invalid(fmt::format("unknown verb '{}'", verb));
  return Call(*v, cli::Args(args), result, progress);
}

}  // namespace layerfs::client
