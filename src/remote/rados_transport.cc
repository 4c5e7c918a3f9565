// RadosTransport: a remote in a RADOS pool (rados://POOL[/NAMESPACE]), through librados' C API.
//
// Each key is one object of that name in the URL's namespace (the default namespace without
// one). Configuration is found as the `rados` tool finds it: CEPH_CONF or the default paths
// (rados_conf_read_file(NULL)), then CEPH_ARGS; the client is client.admin unless CEPH_ARGS
// names another (--id/--user X, --name/-n TYPE.ID), and its keyring is the one the config names.
//
// - Put is one write_full, which a RADOS write applies atomically; PutIfAbsent adds an
//   exclusive create to the same op. A blob must fit in one write: above osd_max_write_size
//   (90 MiB by default) or osd_max_object_size (128 MiB) Put fails with EFBIG before sending.
//   (Bigger atomic writes would need a temporary object and copy-from, which the C API lacks;
//   the layers above keep packs far smaller.)
// - Refs: the token is the object's version (user_version, which only grows within a PG, even
//   across delete and re-create). CasRef is assert_version + write_full in one op (or exclusive
//   create + write_full for an absent ref); the OSD refuses a stale version with ERANGE or
//   EOVERFLOW, an absent object with ENOENT, which become ESTALE. Versions are read from each
//   op's own completion (rados_aio_get_version), never from the shared ioctx, so concurrent
//   calls cannot see each other's versions.
// - Get reads stat + the first MiB in one op, the rest (if any) in a second op asserting the
//   first one's version, so a blob replaced in between is read again, never mixed.
// - ReadRanges issues up to 32 reads at once with aio.
// - List walks the namespace's objects (the OSDs filter by namespace; the whole pool's PGs are
//   visited) and keeps those with the prefix, sorted. It costs one pass over the pool: callers
//   should list rarely.
// - Timeouts: rados_osd_op_timeout, rados_mon_op_timeout and client_mount_timeout are set to
//   LAYERFS_REMOTE_TIMEOUT (30 s), so a dead OSD or monitor gives ETIMEDOUT, never a hang; the
//   objecter's laggy-op check runs well within that, so a restarted OSD is found again.
#include <dlfcn.h>
#include <rados/librados.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <vector>

#include "remote/backends.h"

namespace layerfs::remote {
namespace {

// librados is opened when the first rados:// remote is (dlopen), not linked: a process that never
// uses one does not load it, nor libceph-common with it, whose 130 MB of zeroed data every
// LeakSanitizer run scanned page by page (0.4 s at the exit of every ASan test process), and
// LayerFS runs where librados is not installed until a rados:// remote is asked for.
// LAYERFS_LIBRADOS names another library file (default librados.so.2).
#define LFS_RADOS_FUNCTIONS(X) \
  X(rados_aio_create_completion2) \
  X(rados_aio_get_return_value) \
  X(rados_aio_get_version) \
  X(rados_aio_read_op_operate) \
  X(rados_aio_release) \
  X(rados_aio_wait_for_complete) \
  X(rados_aio_write_op_operate) \
  X(rados_conf_get) \
  X(rados_conf_parse_env) \
  X(rados_conf_read_file) \
  X(rados_conf_set) \
  X(rados_connect) \
  X(rados_create2) \
  X(rados_create_read_op) \
  X(rados_create_write_op) \
  X(rados_ioctx_create) \
  X(rados_ioctx_destroy) \
  X(rados_ioctx_set_namespace) \
  X(rados_nobjects_list_close) \
  X(rados_nobjects_list_next2) \
  X(rados_nobjects_list_open) \
  X(rados_read_op_assert_version) \
  X(rados_read_op_read) \
  X(rados_read_op_stat) \
  X(rados_release_read_op) \
  X(rados_release_write_op) \
  X(rados_shutdown) \
  X(rados_write_op_assert_version) \
  X(rados_write_op_create) \
  X(rados_write_op_remove) \
  X(rados_write_op_write_full)

struct RadosApi {
#define LFS_RADOS_POINTER(f) decltype(&::f) f = nullptr;
  LFS_RADOS_FUNCTIONS(LFS_RADOS_POINTER)
#undef LFS_RADOS_POINTER
};

const RadosApi* g_rados = nullptr;  // set once, before any transport exists
const RadosApi& Rados() { return *g_rados; }

Status LoadRados() {
  static std::once_flag once;
  static Status loaded = Status::Ok();
  std::call_once(once, [] {
    const char* env = getenv("LAYERFS_LIBRADOS");
    const std::string file = env && *env ? env : "librados.so.2";
    void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = dlerror();
      loaded = Status::Errorf(ENOSYS, "rados:// remotes need librados ({}): {} (Debian: apt-get install librados2)",
                              file, why ? why : "cannot load it");
      return;
    }
    static RadosApi api;
    std::string missing;
#define LFS_RADOS_RESOLVE(f) \
    api.f = reinterpret_cast<decltype(&::f)>(dlsym(h, #f)); \
    if (!api.f && missing.empty()) missing = #f;
    LFS_RADOS_FUNCTIONS(LFS_RADOS_RESOLVE)
#undef LFS_RADOS_RESOLVE
    if (!missing.empty()) {
      loaded = Status::Errorf(ENOSYS, "rados:// remotes: {} lacks {} (librados too old?)", file, missing);
      return;
    }
    g_rados = &api;
  });
  return loaded;
}


constexpr size_t kFirstRead = 1 << 20;  // Get's first op reads this much with the stat
constexpr size_t kRefRead = 64 << 10;
constexpr size_t kMaxInFlight = 32;

struct Completion {
  rados_completion_t c = nullptr;
  Completion() { Rados().rados_aio_create_completion2(nullptr, nullptr, &c); }
  ~Completion() {
    if (c) Rados().rados_aio_release(c);
  }
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;
  // Waits; returns the op's result (0 or -errno).
  int Wait() {
    Rados().rados_aio_wait_for_complete(c);
    return Rados().rados_aio_get_return_value(c);
  }
  uint64_t version() const { return Rados().rados_aio_get_version(c); }
};

struct WriteOp {
  rados_write_op_t op = Rados().rados_create_write_op();
  ~WriteOp() { Rados().rados_release_write_op(op); }
};
struct ReadOp {
  rados_read_op_t op = Rados().rados_create_read_op();
  ~ReadOp() { Rados().rados_release_read_op(op); }
};

// The client name CEPH_ARGS asks for, as ceph's own tools read it; client.admin otherwise.
std::string ClientName() {
  const char* env = getenv("CEPH_ARGS");
  std::string name = "client.admin";
  if (!env) return name;
  std::istringstream in(env);
  std::vector<std::string> args{std::istream_iterator<std::string>(in), {}};
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    auto value = [&](std::string_view opt) -> std::optional<std::string> {
      if (a == opt && i + 1 < args.size()) return args[++i];
      if (a.starts_with(std::string(opt) + "=")) return a.substr(opt.size() + 1);
      return std::nullopt;
    };
    if (auto v = value("--id")) name = "client." + *v;
    else if (auto v2 = value("--user")) name = "client." + *v2;
    else if (auto v3 = value("--name")) name = *v3;
    else if (auto v4 = value("-n")) name = *v4;
  }
  return name;
}

class RadosTransport : public Transport {
 public:
  RadosTransport(RemoteUrl url, rados_t cluster, rados_ioctx_t io, uint64_t max_blob)
      : url_(std::move(url)), cluster_(cluster), io_(io), max_blob_(max_blob) {}
  ~RadosTransport() override {
    Rados().rados_ioctx_destroy(io_);
    Rados().rados_shutdown(cluster_);
  }

  Status Put(std::string_view key, std::string_view data) override {
    LFS_TRY(CheckKey(key));
    LFS_TRY(CheckSize(key, data.size()));
    WriteOp w;
    Rados().rados_write_op_write_full(w.op, data.data(), data.size());
    int r = RunWrite(key, w.op, nullptr);
    return r == 0 ? Status::Ok() : Error("put", key, r);
  }
  Status PutIfAbsent(std::string_view key, std::string_view data) override {
    LFS_TRY(CheckKey(key));
    LFS_TRY(CheckSize(key, data.size()));
    WriteOp w;
    Rados().rados_write_op_create(w.op, LIBRADOS_CREATE_EXCLUSIVE, nullptr);
    Rados().rados_write_op_write_full(w.op, data.data(), data.size());
    int r = RunWrite(key, w.op, nullptr);
    if (r == -EEXIST) return Status::Errorf(EEXIST, "{}: already exists", Where("put", key));
    return r == 0 ? Status::Ok() : Error("put", key, r);
  }
  Result<std::string> Get(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    LFS_ASSIGN(auto got, ReadWhole(key, kFirstRead));
    return std::move(got.first);
  }
  Result<uint64_t> Size(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    ReadOp op;
    uint64_t size = 0;
    int stat_rval = 0;
    Rados().rados_read_op_stat(op.op, &size, nullptr, &stat_rval);
    Completion c;
    int r = Rados().rados_aio_read_op_operate(op.op, io_, c.c, std::string(key).c_str(), 0);
    if (r == 0) r = c.Wait();
    if (r < 0) return Error("size", key, r);
    return size;
  }
  Status ReadRanges(std::vector<RangeRead>* reads) override {
    struct Pending {
      RangeRead* read;
      ReadOp op;
      Completion c;
      size_t got = 0;
      uint64_t size = 0;
      int rval = 0;
    };
    Status first;
    std::vector<std::unique_ptr<Pending>> flight;
    auto finish = [&](Pending& p) {
      int r = p.c.Wait();
      if (r == 0) r = p.rval;
      if (r < 0) {
        p.read->data.clear();
        p.read->status = Error("read", p.read->key, r);
      } else {
        p.read->data.resize(p.got);
      }
    };
    for (auto& rr : *reads) {
      rr.data.clear();
      rr.status = CheckKey(rr.key);
      if (!rr.status.ok()) continue;
      if (rr.length > max_blob_) rr.length = max_blob_;  // nothing is longer than that
      auto p = std::make_unique<Pending>();
      p->read = &rr;
      if (rr.length == 0) {  // a read of length 0 would return the rest of the object
        Rados().rados_read_op_stat(p->op.op, &p->size, nullptr, &p->rval);
      } else {
        rr.data.resize(rr.length);
        Rados().rados_read_op_read(p->op.op, rr.offset, rr.length, rr.data.data(), &p->got, &p->rval);
      }
      int r = Rados().rados_aio_read_op_operate(p->op.op, io_, p->c.c, rr.key.c_str(), 0);
      if (r < 0) {
        rr.data.clear();
        rr.status = Error("read", rr.key, r);
        continue;
      }
      flight.push_back(std::move(p));
      if (flight.size() >= kMaxInFlight) {
        finish(*flight.front());
        flight.erase(flight.begin());
      }
    }
    for (auto& p : flight) finish(*p);
    for (auto& rr : *reads)
      if (!rr.status.ok() && first.ok()) first = rr.status;
    return first;
  }
  Result<std::vector<std::string>> List(std::string_view prefix) override {
    LFS_TRY(CheckPrefix(prefix));
    rados_list_ctx_t ctx;
    int r = Rados().rados_nobjects_list_open(io_, &ctx);
    if (r < 0) return Error("list", prefix, r);
    std::vector<std::string> keys;
    for (;;) {
      const char *entry = nullptr, *nspace = nullptr;
      size_t entry_size = 0, nspace_size = 0;
      r = Rados().rados_nobjects_list_next2(ctx, &entry, nullptr, &nspace, &entry_size, nullptr, &nspace_size);
      if (r == -ENOENT) {
        r = 0;
        break;
      }
      if (r < 0) break;
      std::string_view name(entry, entry_size);
      if (std::string_view(nspace, nspace_size) != url_.prefix) continue;
      if (name.starts_with(prefix) && CheckKey(name).ok()) keys.emplace_back(name);
    }
    Rados().rados_nobjects_list_close(ctx);
    if (r < 0) return Error("list", prefix, r);
    std::sort(keys.begin(), keys.end());
    return keys;
  }
  Status Delete(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    WriteOp w;
    Rados().rados_write_op_remove(w.op);
    int r = RunWrite(key, w.op, nullptr);
    return r == 0 || r == -ENOENT ? Status::Ok() : Error("delete", key, r);
  }

  Result<std::optional<RefValue>> GetRef(std::string_view key) override {
    LFS_TRY(CheckKey(key));
    auto got = ReadWhole(key, kRefRead);
    if (!got.ok()) {
      if (got.status().code() == ENOENT) return std::optional<RefValue>();
      return got.status();
    }
    return std::optional<RefValue>(RefValue{std::move(got->first), std::to_string(got->second)});
  }
  Result<std::string> CasRef(std::string_view key, std::string_view value,
                             const std::optional<std::string>& expected) override {
    LFS_TRY(CheckKey(key));
    LFS_TRY(CheckSize(key, value.size()));
    WriteOp w;
    if (expected) {
      char* end = nullptr;
      uint64_t v = strtoull(expected->c_str(), &end, 10);
      if (expected->empty() || *end != '\0' || v == 0) return Stale(key);
      Rados().rados_write_op_assert_version(w.op, v);
    } else {
      Rados().rados_write_op_create(w.op, LIBRADOS_CREATE_EXCLUSIVE, nullptr);
    }
    Rados().rados_write_op_write_full(w.op, value.data(), value.size());
    uint64_t version = 0;
    int r = RunWrite(key, w.op, &version);
    if (r == -EEXIST || r == -ERANGE || r == -EOVERFLOW || (expected && r == -ENOENT)) return Stale(key);
    if (r < 0) return Error("set ref", key, r);
    return std::to_string(version);
  }

  const std::string& url() const override { return url_.text; }

 private:
  std::string Where(std::string_view op, std::string_view key) const {
    return fmt::format("remote {}: {} '{}'", url_.text, op, key);
  }
  Status Error(std::string_view op, std::string_view key, int r) const {
    int code = -r;
    if (code == EPERM) code = EACCES;
    std::string msg = fmt::format("{}: {}", Where(op, key), strerror(-r));
    if (code == ETIMEDOUT) msg += fmt::format(" (no answer from the cluster in {} s)", RemoteTimeoutSeconds());
    if (code == EMSGSIZE || code == EFBIG) {
      code = EFBIG;
      msg += " (larger than the cluster's osd_max_write_size or osd_max_object_size)";
    }
    return Status::Error(code, msg);
  }
  Status Stale(std::string_view key) const {
    return Status::Errorf(ESTALE, "{}: ref moved since it was read (stale token)", Where("set ref", key));
  }
  Status CheckSize(std::string_view key, uint64_t n) const {
    if (n <= max_blob_) return Status::Ok();
    return Status::Errorf(EFBIG, "{}: {} bytes is more than one RADOS write takes here ({} bytes: "
                          "osd_max_write_size / osd_max_object_size)", Where("put", key), n, max_blob_);
  }

  // Runs a write op and waits; returns 0 or -errno; *version is the object's new version.
  int RunWrite(std::string_view key, rados_write_op_t op, uint64_t* version) {
    Completion c;
    int r = Rados().rados_aio_write_op_operate(op, io_, c.c, std::string(key).c_str(), nullptr, 0);
    if (r == 0) r = c.Wait();
    if (r == 0 && version) *version = c.version();
    return r;
  }

  // The whole object and its version: stat + the first `first` bytes in one op, the rest in a
  // second op that asserts the version (a blob replaced in between is read again).
  Result<std::pair<std::string, uint64_t>> ReadWhole(std::string_view key, size_t first) {
    std::string oid(key);
    for (int attempt = 0; attempt < 8; attempt++) {
      std::unique_ptr<char[]> buf(new char[first]);
      ReadOp op;
      uint64_t size = 0;
      size_t got = 0;
      int stat_rval = 0, read_rval = 0;
      Rados().rados_read_op_stat(op.op, &size, nullptr, &stat_rval);
      Rados().rados_read_op_read(op.op, 0, first, buf.get(), &got, &read_rval);
      Completion c;
      int r = Rados().rados_aio_read_op_operate(op.op, io_, c.c, oid.c_str(), 0);
      if (r == 0) r = c.Wait();
      if (r == 0) r = stat_rval < 0 ? stat_rval : read_rval;
      if (r < 0) return Error("get", key, r);
      uint64_t version = c.version();
      std::string out(buf.get(), got);
      if (size <= got) return std::make_pair(std::move(out), version);
      if (size > max_blob_) return Status::Errorf(EIO, "{}: object of {} bytes is larger than any blob", Where("get", key), size);
      out.resize(size);
      ReadOp rest;
      size_t got2 = 0;
      int rest_rval = 0;
      Rados().rados_read_op_assert_version(rest.op, version);
      Rados().rados_read_op_read(rest.op, got, size - got, out.data() + got, &got2, &rest_rval);
      Completion c2;
      r = Rados().rados_aio_read_op_operate(rest.op, io_, c2.c, oid.c_str(), 0);
      if (r == 0) r = c2.Wait();
      if (r == -ERANGE || r == -EOVERFLOW || r == -ENOENT) continue;  // replaced meanwhile
      if (r == 0) r = rest_rval;
      if (r < 0) return Error("get", key, r);
      if (got + got2 != size) continue;
      return std::make_pair(std::move(out), version);
    }
    return Status::Errorf(EIO, "{}: the object kept changing while it was read", Where("get", key));
  }

  const RemoteUrl url_;
  rados_t cluster_;
  rados_ioctx_t io_;
  const uint64_t max_blob_;
};

uint64_t ConfNumber(rados_t cluster, const char* name, uint64_t fallback) {
  char buf[64];
  if (Rados().rados_conf_get(cluster, name, buf, sizeof(buf)) != 0) return fallback;
  char* end = nullptr;
  uint64_t v = strtoull(buf, &end, 10);
  return end == buf ? fallback : v;
}

}  // namespace

Result<std::unique_ptr<Transport>> OpenRadosTransport(const RemoteUrl& url) {
  auto fail = [&](int r, std::string_view what) {
    int code = r == -EPERM ? EACCES : -r;
    std::string msg = fmt::format("remote {}: {}: {}", url.text, what, strerror(-r));
    return Status::Error(code, msg);
  };
  LFS_TRY(LoadRados());
  std::string name = ClientName();
  rados_t cluster;
  int r = Rados().rados_create2(&cluster, "ceph", name.c_str(), 0);
  if (r < 0) return fail(r, fmt::format("cannot create a Ceph client for {}", name));
  std::unique_ptr<std::remove_pointer_t<rados_t>, void (*)(rados_t)> guard(cluster, Rados().rados_shutdown);
  r = Rados().rados_conf_read_file(cluster, nullptr);  // CEPH_CONF, or /etc/ceph/ceph.conf, ~/.ceph/...
  if (r < 0) return fail(r, "no Ceph configuration (set CEPH_CONF or create /etc/ceph/ceph.conf)");
  r = Rados().rados_conf_parse_env(cluster, nullptr);  // CEPH_ARGS
  if (r < 0) return fail(r, "cannot parse CEPH_ARGS");
  // Every op gives up after the timeout. The objecter asks the monitors for a newer OSD map
  // only for ops it finds laggy (objecter_timeout, 10 s, checked every objecter_tick_interval,
  // 5 s): with a shorter op timeout a client would never see a restarted OSD's new address and
  // time out forever, so both scale with the timeout.
  int secs = RemoteTimeoutSeconds();
  std::pair<const char*, int> settings[] = {
      {"rados_osd_op_timeout", secs}, {"rados_mon_op_timeout", secs}, {"client_mount_timeout", secs},
      {"objecter_timeout", std::clamp(secs / 3, 1, 10)}, {"objecter_tick_interval", std::clamp(secs / 5, 1, 5)}};
  for (auto [opt, value] : settings) {
    r = Rados().rados_conf_set(cluster, opt, std::to_string(value).c_str());
    if (r < 0) return fail(r, fmt::format("cannot set {}", opt));
  }
  r = Rados().rados_connect(cluster);
  if (r < 0) {
    const char* conf = getenv("CEPH_CONF");
    return fail(r, fmt::format("cannot connect to the Ceph cluster as {} (config {})", name,
                               conf ? conf : "from the default paths"));
  }
  rados_ioctx_t io;
  r = Rados().rados_ioctx_create(cluster, url.location.c_str(), &io);
  if (r == -ENOENT)
    return Status::Errorf(ENOENT, "remote {}: pool '{}' does not exist (create it: ceph osd pool create {})",
                          url.text, url.location, url.location);
  if (r < 0) return fail(r, fmt::format("cannot open pool '{}'", url.location));
  Rados().rados_ioctx_set_namespace(io, url.prefix.empty() ? nullptr : url.prefix.c_str());
  uint64_t max_write = ConfNumber(cluster, "osd_max_write_size", 90) << 20;
  uint64_t max_object = ConfNumber(cluster, "osd_max_object_size", 128ull << 20);
  guard.release();
  return std::unique_ptr<Transport>(new RadosTransport(url, cluster, io, std::min(max_write, max_object)));
}

}  // namespace layerfs::remote
