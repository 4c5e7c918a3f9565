// Store: open/create, config, refs, resolution, commits and tree reads.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <random>
#include <tuple>
#include <unordered_map>

#include "base/coding.h"
#include "base/store_files.h"
#include "history/file_content.h"
#include "history/keys.h"
#include "history/store_impl.h"
#include "kv/data_log.h"
#include "kv/file_io.h"
#include "kv/kv.h"
#include "kv/space_guard.h"
#include "objects/object_store.h"
#include "objects/tree.h"

namespace layerfs {

using objects::Kind;

Result<Policy> Policy::Parse(std::string_view s) {
  Policy p;
  uint32_t v[3];
  size_t pos = 0;
  for (int i = 0; i < 3; i++) {
    size_t end = i < 2 ? s.find('/', pos) : s.size();
    if (end == std::string_view::npos) return Status::Invalid(fmt::format("policy '{}' is not W/C/M", s));
    auto part = s.substr(pos, end - pos);
    auto [p2, ec] = std::from_chars(part.data(), part.data() + part.size(), v[i]);
    if (ec != std::errc() || p2 != part.data() + part.size() || part.empty() || v[i] > 1000)
      return Status::Invalid(fmt::format("policy '{}' is not W/C/M with caps 0..1000", s));
    pos = end + 1;
  }
  p.whole = v[0];
  p.chunk = v[1];
  p.meta = v[2];
  return p;
}

std::string Policy::ToString() const { return fmt::format("{}/{}/{}", whole, chunk, meta); }

const char* EntryTypeName(EntryType t) {
  switch (t) {
    case EntryType::kFile: return "file";
    case EntryType::kDir: return "dir";
    case EntryType::kSymlink: return "symlink";
    case EntryType::kChar: return "chardev";
    case EntryType::kBlock: return "blockdev";
    case EntryType::kFifo: return "fifo";
    case EntryType::kSocket: return "socket";
  }
  return "?";
}

namespace history {

bool ValidBranchName(std::string_view n) {
  // HEAD is what the CLI calls the branch one works on (cli::Context::Head).
  if (n.empty() || n.size() > 200 || n[0] == '-' || n[0] == '/' || n.back() == '/' || n == "HEAD" ||
      n.find("..") != std::string_view::npos || n.find("//") != std::string_view::npos)
    return false;
  for (char c : n)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/')) return false;
  return true;
}

int64_t NowNanos() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

}  // namespace history

using history::NowNanos;

Store::~Store() {
  // A daemon's exit is not held up by a backlog: the encoder finishes the record in hand; the
  // rest stays pending (readable), for the next encoder or a stats or gc to encode.
  if (impl_ && impl_->encoder) impl_->encoder->Stop(/*drain=*/false);
}

void Store::StartBackgroundEncoding() { impl_->encoder->Start(); }

Status Store::DrainEncoding() { return impl_->encoder->Drain(); }

uint64_t Store::PendingEncodings() { return objects_->QueuedCount(); }

static std::string EncodeConfig(const Store::Impl& c) {
  std::string s;
  base::PutFixed32(&s, history::kFormatVersion);
  base::PutFixed64(&s, c.seed);
  base::PutVarint(&s, c.policy.whole);
  base::PutVarint(&s, c.policy.chunk);
  base::PutVarint(&s, c.policy.meta);
  base::PutSVarint(&s, c.created);
  return s;
}

static Status DecodeConfig(std::string_view v, Store::Impl* c, uint32_t* version) {
  base::Reader r(v);
  uint32_t& ver = *version;
  uint64_t w, ch, m;
  if (!r.Fixed32(&ver)) return Status::Corrupt("store config is damaged");
  if (ver < history::kOldestFormatVersion || ver > history::kFormatVersion)
    return Status::Errorf(EPROTO, "store format version {} is not supported (this build reads {})", ver,
                          history::kFormatVersion);
  int64_t created;
  if (!r.Fixed64(&c->seed) || !r.Varint(&w) || !r.Varint(&ch) || !r.Varint(&m) || !r.SVarint(&created) ||
      w > 1000 || ch > 1000 || m > 1000)  // the caps Policy::Parse allows
    return Status::Corrupt("store config is damaged");
  c->policy = {static_cast<uint32_t>(w), static_cast<uint32_t>(ch), static_cast<uint32_t>(m)};
  c->created = created;
  return Status::Ok();
}

// LAYERFS_TUNING="level=9,small_level=19,..." overrides the encoder's tuning (benchmarks only).
static objects::Tuning TuningFromEnv() {
  objects::Tuning t;
  const char* env = getenv("LAYERFS_TUNING");
  if (!env) return t;
  std::string all(env);
  size_t pos = 0;
  while (pos < all.size()) {
    size_t end = all.find(',', pos);
    if (end == std::string::npos) end = all.size();
    std::string kv = all.substr(pos, end - pos);
    pos = end + 1;
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string k = kv.substr(0, eq);
    double v = atof(kv.c_str() + eq + 1);
    if (k == "level") t.level = int(v);
    else if (k == "small_level") t.small_level = int(v);
    else if (k == "small_below") t.small_below = size_t(v);
    else if (k == "large_full_level") t.large_full_level = int(v);
    else if (k == "estimate_level") t.estimate_level = int(v);
    else if (k == "snapshot_depth") t.snapshot_depth = uint32_t(v);
    else if (k == "raw_below") t.raw_below = size_t(v);
    else if (k == "background_level") t.background_level = int(v);
    else if (k == "raw_estimate_ratio") t.raw_estimate_ratio = v;
  }
  return t;
}

static Status WriteMarker(const std::string& path, const Policy& policy);

Result<std::unique_ptr<Store>> Store::Init(kv::Kv* kv, std::unique_ptr<kv::Kv> owned,
                                           const Policy* create_policy, std::string path,
                                           const CreateOptions& create,
                                           std::unique_ptr<kv::SpaceGuard> space,
                                           std::unique_ptr<kv::DataLog> data_log) {
  auto st = std::unique_ptr<Store>(new Store());
  st->path_ = std::move(path);
  st->space_ = std::move(space);
  st->data_log_ = std::move(data_log);
  st->owned_kv_ = std::move(owned);
  st->kv_ = kv;
  st->impl_ = std::make_unique<Impl>();
  LFS_ASSIGN(auto cfg, kv->Get(kv::Cf::kMeta, history::kConfigKey));
  bool fresh = !cfg.has_value();
  if (fresh) {
    if (!create_policy) return Status::Corrupt("store has no config (not a LayerFS store?)");
    if (create.seed) {
      st->impl_->seed = *create.seed;
    } else {
      std::random_device rd;
      st->impl_->seed = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(NowNanos());
    }
    st->impl_->policy = *create_policy;
    st->impl_->created = NowNanos() / 1000000000;
  } else {
    uint32_t version = 0;
    LFS_TRY(DecodeConfig(*cfg, st->impl_.get(), &version));
    if (version < history::kFormatVersion && !kv->read_only()) {
      // Upgrade in place: what changed is read both ways (Workspaces migrate as they open).
      kv::Batch b;
      b.Put(kv::Cf::kMeta, history::kConfigKey, EncodeConfig(*st->impl_));
      LFS_TRY(kv->Write(b, true));
      if (!st->path_.empty()) LFS_TRY(WriteMarker(st->path_, st->impl_->policy));
    }
  }
  st->objects_ = std::make_unique<objects::ObjectStore>(kv, st->impl_->seed, st->impl_->policy, TuningFromEnv());
  st->impl_->encoder = std::make_unique<objects::BackgroundEncoder>(*st->objects_);
  if (!fresh) LFS_TRY(st->objects_->LoadQueue());
  if (fresh && create.empty) {
    kv::Batch b;
    b.Put(kv::Cf::kMeta, history::kConfigKey, EncodeConfig(*st->impl_));
    LFS_TRY(kv->Write(b, true));
  } else if (fresh) {
    // The first Commit: an empty tree, so every branch always has a head.
    LFS_ASSIGN(auto root, st->objects_->Put(Kind::kTree, objects::EncodeTree({}), std::nullopt));
    CommitInfo c;
    c.root = root.id;
    c.message = "init";
    int64_t now = NowNanos();
    c.time_sec = now / 1000000000;
    c.time_nsec = static_cast<uint32_t>(now % 1000000000);
    LFS_ASSIGN(auto cr, st->objects_->Put(Kind::kCommit, objects::EncodeCommit(c), std::nullopt));
    kv::Batch b;
    st->objects_->TakeBatch(&b);
    b.Put(kv::Cf::kMeta, history::kConfigKey, EncodeConfig(*st->impl_));
    b.Put(kv::Cf::kMeta, history::RefKey("main"), cr.id.AsKey());
    LFS_TRY(kv->Write(b, true));
  }
  return st;
}

// The human-readable marker (informational), never through a symlink.
static Status WriteMarker(const std::string& path, const Policy& policy) {
  return base::WriteStoreFile(path + "/LAYERFS",
                              fmt::format("LayerFS store, format {}, policy {}\n", history::kFormatVersion,
                                          policy.ToString()),
                              base::StoreFileMode(path));
}

static bool DirIsEmptyOrAbsent(const std::string& path, bool* exists) {
  DIR* d = opendir(path.c_str());
  if (!d) {
    *exists = false;
    return errno == ENOENT;
  }
  *exists = true;
  bool empty = true;
  while (dirent* e = readdir(d))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = false;
  closedir(d);
  return empty;
}

// The replay check of the database (kv/rocks_replay_filter.h): a Workspace's `P R` record
// (docs/format.md: BE64 workspace id, 'R', ...; value: a DataRef, then patches) must point at
// bytes that are in its data-log segment, if that segment is still there. After a power cut that
// took the data log's unsynced tail but not the WAL's, the replay stops at the first record that
// does not. The length word's bit 31 flags a checksum (format 6): DecodePrefix masks it. Sizes
// are looked up each time, not cached: a reopen in the same process (kv.h, Recover) replays a
// WAL whose records point into segments that grew since the last open.
// `named` keeps the highest segment number a replayed record names.
static std::function<bool(std::string_view, std::string_view)> DataRefsOnDisk(
    const std::string& store_path, std::shared_ptr<std::atomic<uint32_t>> named) {
  const std::string dir = store_path + "/data";
  return [dir, named](std::string_view key, std::string_view value) {
    if (key.size() < 9 || key[8] != 'R') return true;
    kv::DataRef ref;
    size_t used = 0;
    if (!kv::DataRef::DecodePrefix(value, &ref, &used)) return true;
    if (ref.segment > named->load()) named->store(ref.segment);
    struct stat st;
    // A segment that is gone was collected: the records pointing into it were deleted by a
    // later write (a segment's name is durable before any record points into it).
    if (::stat(fmt::format("{}/{:08}.seg", dir, ref.segment).c_str(), &st) != 0) return true;
    return ref.offset + ref.length <= static_cast<uint64_t>(st.st_size);
  };
}

// The Store's own pieces beside its database: the space guard and the data log (both read-only
// for a read-only open), and the database's options that tie them to it.
struct StoreParts {
  std::unique_ptr<kv::SpaceGuard> space;
  std::unique_ptr<kv::DataLog> log;
  kv::RocksOptions ro;
  // The highest data-log segment a record replayed from the database's logs names: the data
  // log numbers new segments above it once the database is open (DataLog::NumberAbove).
  std::shared_ptr<std::atomic<uint32_t>> named = std::make_shared<std::atomic<uint32_t>>(0);
};

static Result<StoreParts> MakeParts(const std::string& path, bool read_only, std::shared_ptr<kv::FileIo> io) {
  StoreParts p;
  p.space = kv::SpaceGuard::Open(path, !read_only, kv::SpaceGuard::DefaultOptions());
  LFS_ASSIGN(p.log, kv::DataLog::Open(path + "/data", {.space = p.space.get(), .read_only = read_only, .io = io}));
  p.ro.read_only = read_only;
  p.ro.space = p.space.get();
  p.ro.io = std::move(io);
  p.ro.workspace_replay_ok = DataRefsOnDisk(path, p.named);
  kv::DataLog* log = p.log.get();  // outlives the Kv (Store::data_log_)
  p.ro.before_sync = [log] { return log->Sync(); };
  return p;
}

Result<std::unique_ptr<Store>> Store::Create(const std::string& path, const Policy& policy,
                                             const CreateOptions& opts) {
  bool exists;
  if (!DirIsEmptyOrAbsent(path, &exists))
    return Status::Exists(fmt::format("{} exists and is not an empty directory", path));
  if (!exists && mkdir(path.c_str(), 0700) != 0)
    return Status::Errorf(errno, "create {}: {}", path, strerror(errno));
  // Private: only its owner reaches a new Store (chmod on the directory shares it later).
  if (chmod(path.c_str(), 0700) != 0) return Status::Errorf(errno, "chmod {}: {}", path, strerror(errno));
  LFS_TRY(WriteMarker(path, policy));
  // RocksDB would make db/ 0755 (less the umask).
  if (mkdir((path + "/db").c_str(), 0700) != 0 && errno != EEXIST)
    return Status::Errorf(errno, "create {}/db: {}", path, strerror(errno));
  LFS_ASSIGN(StoreParts parts, MakeParts(path, false, nullptr));
  parts.ro.create_if_missing = true;
  parts.ro.file_mode = 0600;
  parts.ro.error_if_exists = true;
  LFS_ASSIGN(auto kvp, kv::OpenRocksKv(path + "/db", parts.ro));
  parts.log->NumberAbove(parts.named->load());
  kv::Kv* raw = kvp.get();
  LFS_ASSIGN(auto store, Init(raw, std::move(kvp), &policy, path, opts, std::move(parts.space), std::move(parts.log)));
  // The new names durable too (RocksDB syncs db/ for its own files, not db/ in the Store nor
  // the Store in its parent): a power cut after `init` returned must not take the Store away.
  auto norm = std::filesystem::path(path).lexically_normal();
  if (!norm.has_filename()) norm = norm.parent_path();  // "a/b/" names b
  const std::string parent = norm.parent_path().string();
  for (const std::string& d : {path, parent.empty() ? std::string(".") : parent})
    if (kv::FileIo::Posix()->SyncDir(d) != 0) return Status::Errorf(EIO, "sync {}: {}", d, strerror(errno));
  return store;
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, const StoreOpenOptions& opts) {
  struct stat st;
  if (stat((path + "/db/CURRENT").c_str(), &st) != 0) {
    if (errno == EACCES) return Status::Errorf(EACCES, "{}: permission denied (the Store belongs to another user)", path);
    return Status::NotFound(fmt::format("{} is not a LayerFS store", path));
  }
  LFS_TRY(base::RefuseSymlink(path + "/db", "database"));
  LFS_ASSIGN(StoreParts parts, MakeParts(path, opts.read_only, opts.io));
  parts.ro.file_mode = base::StoreFileMode(path);
  parts.ro.release_reserve_to_open = opts.release_reserve;
  auto kvp = kv::OpenRocksKv(path + "/db", parts.ro);
  if (!kvp.ok()) {
    if (kvp.status().code() == EBUSY)
      return Status::Error(EBUSY, fmt::format("store {} is in use by another process", path));
    return kvp.status();
  }
  parts.log->NumberAbove(parts.named->load());
  kv::Kv* raw = kvp->get();
  return Init(raw, std::move(*kvp), nullptr, path, {}, std::move(parts.space), std::move(parts.log));
}

Result<std::unique_ptr<Store>> Store::OpenOnKv(kv::Kv* kv, const Policy& policy, const CreateOptions& create) {
  auto space = kv::SpaceGuard::Open("", false, kv::SpaceGuard::Options{});
  LFS_ASSIGN(auto log, kv::DataLog::Open("", {.space = space.get()}));
  return Init(kv, nullptr, &policy, "", create, std::move(space), std::move(log));
}

bool Store::read_only() const { return kv_->read_only(); }

const Policy& Store::policy() const { return impl_->policy; }
uint64_t Store::seed() const { return impl_->seed; }
std::shared_mutex& Store::gc_mutex() { return impl_->gc_mu; }

Result<bool> Store::IsLazy() {
  LFS_ASSIGN(auto v, kv_->Get(kv::Cf::kMeta, history::kLazyKey));
  return v.has_value();
}

Result<std::vector<std::pair<std::string, ObjectId>>> Store::RemoteRefs() {
  std::vector<std::pair<std::string, ObjectId>> out;
  std::string begin(history::kRemoteRefPrefix);
  LFS_TRY(kv_->Scan(kv::Cf::kMeta, begin, history::PrefixEnd(begin), [&](auto k, auto v) {
    if (v.size() == ObjectId::kSize) out.emplace_back(std::string(k.substr(begin.size())), ObjectId::FromKey(v));
    return true;
  }));
  return out;
}

Status Store::CasBranch(const std::string& name, const std::optional<ObjectId>& expected,
                        const std::optional<ObjectId>& to, kv::Batch* extra) {
  if (!history::ValidBranchName(name)) return Status::Invalid(fmt::format("invalid branch name '{}'", name));
  std::lock_guard l(impl_->ref_mu);
  LFS_ASSIGN(auto head, BranchHead(name));
  if (head != expected) return Status::Error(EAGAIN, fmt::format("branch '{}' moved meanwhile", name));
  kv::Batch b;
  if (extra)
    for (const auto& e : extra->entries()) b.Add(e);
  if (to) b.Put(kv::Cf::kMeta, history::RefKey(name), to->AsKey());
  else b.Delete(kv::Cf::kMeta, history::RefKey(name));
  return kv_->Write(b, true);
}

Result<std::optional<ObjectId>> Store::BranchHead(const std::string& name) {
  LFS_ASSIGN(auto v, kv_->Get(kv::Cf::kMeta, history::RefKey(name)));
  if (!v) return std::optional<ObjectId>();
  if (v->size() != ObjectId::kSize) return Status::Corrupt(fmt::format("branch {}: damaged ref", name));
  return std::optional<ObjectId>(ObjectId::FromKey(*v));
}

Result<std::vector<std::pair<std::string, ObjectId>>> Store::Branches() {
  std::vector<std::pair<std::string, ObjectId>> out;
  std::string begin(history::kRefPrefix);
  LFS_TRY(kv_->Scan(kv::Cf::kMeta, begin, history::PrefixEnd(begin), [&](auto k, auto v) {
    if (v.size() == ObjectId::kSize)
      out.emplace_back(std::string(k.substr(begin.size())), ObjectId::FromKey(v));
    return true;
  }));
  return out;
}

Result<CommitInfo> Store::GetCommit(const ObjectId& id) {
  LFS_ASSIGN(std::string data, objects_->Get(Kind::kCommit, id));
  LFS_ASSIGN(CommitInfo c, objects::DecodeCommit(data));
  c.id = id;
  return c;
}

Result<ObjectId> Store::Resolve(std::string_view spec) {
  const size_t ops_at = std::min(spec.find('~'), spec.find('^'));
  std::string_view base = spec.substr(0, ops_at);
  std::string_view ops = ops_at == std::string_view::npos ? std::string_view() : spec.substr(ops_at);
  if (base.empty()) return Status::Invalid("empty commit reference");
  std::optional<ObjectId> id;
  if (history::ValidBranchName(base)) {
    LFS_ASSIGN(id, BranchHead(std::string(base)));
    if (!id && base.find('/') != std::string_view::npos) {
      // REMOTE/BRANCH: a remote-tracking ref (a local branch of that name wins).
      LFS_ASSIGN(auto v, kv_->Get(kv::Cf::kMeta, std::string(history::kRemoteRefPrefix) + std::string(base)));
      if (v && v->size() == ObjectId::kSize) id = ObjectId::FromKey(*v);
    }
  }
  if (!id) {
    bool hex = base.size() >= 4 && base.size() <= 32 &&
               base.find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos;
    if (!hex) return Status::NotFound(fmt::format("no branch or commit '{}'", base));
    std::string lower(base);
    for (auto& c : lower) c = static_cast<char>(tolower(c));
    std::string prefix;
    for (size_t i = 0; i + 1 < lower.size(); i += 2)
      prefix.push_back(static_cast<char>(std::stoi(lower.substr(i, 2), nullptr, 16)));
    int matches = 0;
    LFS_TRY(kv_->Scan(kv::Cf::kCommits, prefix, history::PrefixEnd(prefix), [&](auto k, auto) {
      ObjectId cand = ObjectId::FromKey(k);
      if (cand.Hex().compare(0, lower.size(), lower) == 0) {
        id = cand;
        if (++matches > 1) return false;
      }
      return true;
    }));
    if (matches == 0) return Status::NotFound(fmt::format("no branch or commit '{}'", base));
    if (matches > 1) return Status::Invalid(fmt::format("commit prefix '{}' is ambiguous", base));
  }
  // ~N: N first parents back; ^N: the N-th parent (^0: the commit itself).
  while (!ops.empty()) {
    const char op = ops[0];
    size_t digits = 1;
    while (digits < ops.size() && isdigit(static_cast<unsigned char>(ops[digits]))) digits++;
    uint64_t n = 1;
    if (digits > 1) {
      auto [p, ec] = std::from_chars(ops.data() + 1, ops.data() + digits, n);
      if (ec != std::errc() || p != ops.data() + digits) return Status::Invalid(fmt::format("'{}' is not a commit reference", spec));
    }
    if (digits < ops.size() && ops[digits] != '~' && ops[digits] != '^')
      return Status::Invalid(fmt::format("'{}' is not a commit reference (REF, REF~N, REF^N)", spec));
    ops.remove_prefix(digits);
    if (op == '~') {
      for (uint64_t i = 0; i < n; i++) {
        LFS_ASSIGN(auto c, GetCommit(*id));
        if (c.parents.empty())
          return Status::NotFound(fmt::format("'{}': history has only {} commit(s) before it", spec, i));
        id = c.parents[0];
      }
    } else if (n > 0) {
      LFS_ASSIGN(auto c, GetCommit(*id));
      if (n > c.parents.size())
        return Status::NotFound(fmt::format("'{}': commit {} has {} parent(s)", spec, id->Hex().substr(0, 12), c.parents.size()));
      id = c.parents[n - 1];
    }
  }
  return *id;
}

Status Store::SetBranch(const std::string& name, const ObjectId& commit) {
  if (!history::ValidBranchName(name)) return Status::Invalid(fmt::format("invalid branch name '{}'", name));
  LFS_ASSIGN(auto c, GetCommit(commit));
  (void)c;
  std::lock_guard l(impl_->ref_mu);
  kv::Batch b;
  b.Put(kv::Cf::kMeta, history::RefKey(name), commit.AsKey());
  return kv_->Write(b, true);
}

Status Store::Fork(const std::string& name, std::string_view from) {
  if (!history::ValidBranchName(name)) return Status::Invalid(fmt::format("invalid branch name '{}'", name));
  LFS_ASSIGN(ObjectId at, Resolve(from));
  std::lock_guard l(impl_->ref_mu);
  LFS_ASSIGN(auto existing, BranchHead(name));
  if (existing) return Status::Exists(fmt::format("branch '{}' already exists", name));
  kv::Batch b;
  b.Put(kv::Cf::kMeta, history::RefKey(name), at.AsKey());
  return kv_->Write(b, true);
}

Status Store::DeleteBranch(const std::string& name) {
  std::lock_guard l(impl_->ref_mu);
  LFS_ASSIGN(auto existing, BranchHead(name));
  if (!existing) return Status::NotFound(fmt::format("no branch '{}'", name));
  kv::Batch b;
  b.set_space_exempt();  // frees space (once gc runs)
  b.Delete(kv::Cf::kMeta, history::RefKey(name));
  std::string sp = history::StatBranchPrefix(name);
  b.DeleteRange(kv::Cf::kIndex, sp, history::PrefixEnd(sp));
  return kv_->Write(b, true);
}

Result<ObjectId> Store::StageCommit(const ObjectId& root, const std::vector<ObjectId>& parents,
                                    const std::string& message, uint64_t logical_bytes, uint64_t files,
                                    objects::Txn* txn) {
  CommitInfo c;
  c.root = root;
  c.parents = parents;
  c.message = message;
  int64_t now = NowNanos();
  c.time_sec = now / 1000000000;
  c.time_nsec = static_cast<uint32_t>(now % 1000000000);
  c.logical_bytes = logical_bytes;
  c.files = files;
  LFS_ASSIGN(auto put, objects_->Put(Kind::kCommit, objects::EncodeCommit(c), std::nullopt, txn));
  return put.id;
}

Status Store::UpdateBranch(const std::string& branch, const std::optional<ObjectId>& expected_head,
                           const ObjectId& to, kv::Batch* extra, objects::Txn* txn) {
  if (!history::ValidBranchName(branch)) return Status::Invalid(fmt::format("invalid branch name '{}'", branch));
  std::lock_guard l(impl_->ref_mu);
  LFS_ASSIGN(auto head, BranchHead(branch));
  if (head != expected_head)
    return Status::Error(EAGAIN, fmt::format("branch '{}' moved meanwhile", branch));
  kv::Batch b;
  objects_->TakeBatch(&b, txn);
  if (extra)
    for (const auto& e : extra->entries()) b.Add(e);
  b.Put(kv::Cf::kMeta, history::RefKey(branch), to.AsKey());
  Status s = kv_->Write(b, true);
  if (!s.ok()) {
    objects_->ClearCache();
    return s;
  }
  if (txn) objects_->Enqueue(txn);  // its pending records are durable now
  return s;
}

Result<ObjectId> Store::CommitTree(const std::string& branch, const ObjectId& root,
                                   const std::optional<ObjectId>& expected_head,
                                   const std::string& message, uint64_t logical_bytes, uint64_t files,
                                   kv::Batch* extra, objects::Txn* txn, const std::vector<ObjectId>& more_parents) {
  if (!history::ValidBranchName(branch)) return Status::Invalid(fmt::format("invalid branch name '{}'", branch));
  std::vector<ObjectId> parents;
  {
    std::lock_guard l(impl_->ref_mu);
    LFS_ASSIGN(auto head, BranchHead(branch));
    if (head != expected_head)
      return Status::Error(EAGAIN, fmt::format("branch '{}' moved during the commit", branch));
  }
  if (expected_head) parents.push_back(*expected_head);
  parents.insert(parents.end(), more_parents.begin(), more_parents.end());
  auto id = StageCommit(root, parents, message, logical_bytes, files, txn);
  if (!id.ok()) {
    if (!txn) objects_->Abort();
    return id.status();
  }
  LFS_TRY(UpdateBranch(branch, expected_head, *id, extra, txn));
  return *id;
}

Result<std::vector<CommitInfo>> Store::Log(const ObjectId& from, size_t limit) {
  std::vector<CommitInfo> out;
  std::optional<ObjectId> cur = from;
  while (cur && (limit == 0 || out.size() < limit)) {
    LFS_ASSIGN(auto c, GetCommit(*cur));
    cur.reset();
    if (!c.parents.empty()) cur = c.parents[0];
    out.push_back(std::move(c));
  }
  return out;
}

Result<std::vector<CommitInfo>> Store::LogAll(const ObjectId& from, size_t limit) {
  return LogAll(std::vector<ObjectId>{from}, limit);
}

Result<std::vector<CommitInfo>> Store::LogAll(const std::vector<ObjectId>& from, size_t limit) {
  // Topological order: a commit is shown once every child of it that is reachable has been, the
  // newest ready one first (Git's --topo-order for the common shapes).
  std::unordered_map<ObjectId, CommitInfo, ObjectIdHash> info;
  std::unordered_map<ObjectId, size_t, ObjectIdHash> children;
  std::vector<ObjectId> stack = from;
  while (!stack.empty()) {
    ObjectId id = stack.back();
    stack.pop_back();
    if (info.count(id)) continue;
    LFS_ASSIGN(auto c, GetCommit(id));
    for (const auto& p : c.parents) {
      children[p]++;
      stack.push_back(p);
    }
    info.emplace(id, std::move(c));
  }
  auto newer = [&](const ObjectId& a, const ObjectId& b) {
    const auto &x = info[a], &y = info[b];
    return std::tie(x.time_sec, x.time_nsec, x.id) < std::tie(y.time_sec, y.time_nsec, y.id);
  };
  std::vector<ObjectId> ready;  // the starting Commits no other one reaches, each once
  for (const auto& id : from)
    if (!children.count(id) && std::find(ready.begin(), ready.end(), id) == ready.end()) ready.push_back(id);
  std::vector<CommitInfo> out;
  while (!ready.empty() && (limit == 0 || out.size() < limit)) {
    auto it = std::max_element(ready.begin(), ready.end(), newer);
    ObjectId id = *it;
    ready.erase(it);
    const CommitInfo& c = info[id];
    for (const auto& p : c.parents)
      if (--children[p] == 0) ready.push_back(p);
    out.push_back(c);
  }
  return out;
}

Result<std::vector<TreeEntry>> Store::ReadTree(const ObjectId& tree, objects::Txn* txn) {
  LFS_ASSIGN(std::string data, objects_->Get(Kind::kTree, tree, txn));
  return objects::DecodeTree(data);
}

Result<TreeEntry> Store::Lookup(const ObjectId& commit, std::string_view path) {
  LFS_ASSIGN(auto c, GetCommit(commit));
  TreeEntry cur;
  cur.type = EntryType::kDir;
  cur.mode = 0755;
  cur.id = c.root;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    auto name = path.substr(pos, end - pos);
    pos = end + 1;
    if (name.empty() || name == ".") continue;
    if (cur.type != EntryType::kDir) return Status::Error(ENOTDIR, fmt::format("{}: not a directory", path));
    LFS_ASSIGN(auto entries, ReadTree(cur.id));
    auto it = std::lower_bound(entries.begin(), entries.end(), name,
                               [](const TreeEntry& e, std::string_view n) { return e.name < n; });
    if (it == entries.end() || it->name != name)
      return Status::NotFound(fmt::format("{}: no such path in commit {}", path, commit.Hex().substr(0, 12)));
    cur = std::move(*it);
  }
  return cur;
}

Result<std::string> Store::ReadFile(const TreeEntry& file) {
  if (file.type != EntryType::kFile) return Status::Invalid("not a regular file");
  LFS_ASSIGN(std::string data, history::ReadContent(*objects_, file.id, file.chunked));
  if (data.size() != file.size) return Status::Corrupt(fmt::format("{}: size does not match its entry", file.name));
  return data;
}

}  // namespace layerfs
