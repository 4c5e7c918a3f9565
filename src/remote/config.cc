#include "remote/config.h"

#include <fcntl.h>
#include <unistd.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "base/coding.h"
#include "history/keys.h"
#include "kv/kv.h"
#include "remote/catalog_keys.h"

namespace layerfs::remote {

namespace {

std::string RemoteKey(std::string_view name) { return std::string(history::kRemotePrefix) + std::string(name); }

std::string EncodeInfo(const RemoteInfo& r) {
  std::string s;
  base::PutU8(&s, 1);
  base::PutBytes(&s, r.url);
  base::PutU8(&s, r.lazy ? 1 : 0);
  base::PutBytes(&s, r.remote_id);
  return s;
}

Result<RemoteInfo> DecodeInfo(std::string_view name, std::string_view v) {
  base::Reader r(v);
  uint8_t version, flags;
  std::string_view url, id;
  if (!r.U8(&version) || version != 1 || !r.Bytes(&url) || !r.U8(&flags) || !r.Bytes(&id))
    return Status::Corrupt(fmt::format("remote '{}': damaged entry", name));
  return RemoteInfo{std::string(name), std::string(url), (flags & 1) != 0, std::string(id)};
}

// The `lazy` key is present exactly while some remote is lazy (gc and verify read it).
Status UpdateLazyFlag(Store& store, const std::vector<RemoteInfo>& remotes, kv::Batch* b) {
  bool any = false;
  for (const auto& r : remotes) any |= r.lazy;
  if (any) b->Put(kv::Cf::kMeta, history::kLazyKey, "");
  else b->Delete(kv::Cf::kMeta, history::kLazyKey);
  return Status::Ok();
}

std::mutex g_opener_mu;
TransportOpener g_opener;

}  // namespace

bool ValidRemoteName(std::string_view n) {
  if (n.empty() || n.size() > 64 || n[0] == '-' || n[0] == '.') return false;
  for (char c : n)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

Status AddRemote(Store& store, const RemoteInfo& info) {
  if (!ValidRemoteName(info.name))
    return Status::Invalid(fmt::format("invalid remote name '{}': use [A-Za-z0-9._-], at most 64", info.name));
  LFS_TRY(RemoteUrl::Parse(info.url).status());
  LFS_ASSIGN(auto remotes, ListRemotes(store));
  for (const auto& r : remotes)
    if (r.name == info.name) return Status::Exists(fmt::format("remote '{}' already exists", info.name));
  remotes.push_back(info);
  kv::Batch b;
  b.Put(kv::Cf::kMeta, RemoteKey(info.name), EncodeInfo(info));
  LFS_TRY(UpdateLazyFlag(store, remotes, &b));
  return store.kv().Write(b, true);
}

Status PutRemote(Store& store, const RemoteInfo& info, kv::Batch* b) {
  b->Put(kv::Cf::kMeta, RemoteKey(info.name), EncodeInfo(info));
  return Status::Ok();
}

Status RemoveRemote(Store& store, const std::string& name) {
  LFS_ASSIGN(auto remotes, ListRemotes(store));
  auto it = std::find_if(remotes.begin(), remotes.end(), [&](const RemoteInfo& r) { return r.name == name; });
  if (it == remotes.end()) return Status::NotFound(fmt::format("no remote '{}'", name));
  remotes.erase(it);
  kv::Batch b;
  b.Delete(kv::Cf::kMeta, RemoteKey(name));
  std::string rrefs = history::RemoteRefKey(name, "");
  b.DeleteRange(kv::Cf::kMeta, rrefs, history::PrefixEnd(rrefs));
  for (const std::string& p : CatalogPrefixes(name)) b.DeleteRange(kv::Cf::kIndex, p, history::PrefixEnd(p));
  LFS_TRY(UpdateLazyFlag(store, remotes, &b));
  return store.kv().Write(b, true);
}

Result<std::vector<RemoteInfo>> ListRemotes(Store& store) {
  std::vector<RemoteInfo> out;
  std::string begin(history::kRemotePrefix);
  Status inner;
  LFS_TRY(store.kv().Scan(kv::Cf::kMeta, begin, history::PrefixEnd(begin), [&](auto k, auto v) {
    auto r = DecodeInfo(k.substr(begin.size()), v);
    if (!r.ok()) {
      inner = r.status();
      return false;
    }
    out.push_back(std::move(*r));
    return true;
  }));
  LFS_TRY(inner);
  return out;
}

Result<RemoteInfo> GetRemote(Store& store, const std::string& name) {
  if (!ValidRemoteName(name)) return Status::NotFound(fmt::format("no remote '{}'", name));
  LFS_ASSIGN(auto v, store.kv().Get(kv::Cf::kMeta, RemoteKey(name)));
  if (!v) return Status::NotFound(fmt::format("no remote '{}' (see layerfs remote add)", name));
  return DecodeInfo(name, *v);
}

std::string RandomHex(size_t digits) {
  std::string out;
  unsigned char buf[64];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  size_t n = (digits + 1) / 2;
  bool got = fd >= 0 && n <= sizeof buf && read(fd, buf, n) == static_cast<ssize_t>(n);
  if (fd >= 0) close(fd);
  if (!got) {
    std::random_device rd;
    for (size_t i = 0; i < n && i < sizeof buf; i++) buf[i] = static_cast<unsigned char>(rd());
  }
  for (size_t i = 0; i < n; i++) out += fmt::format("{:02x}", buf[i]);
  out.resize(digits);
  return out;
}

std::string EncodeRemoteConfig(const RemoteConfig& c) {
  nlohmann::json j = {{"layerfs_remote", c.version},
                      {"id", c.id},
                      {"seed", fmt::format("{:016x}", c.seed)},
                      {"policy", c.policy.ToString()},
                      {"created", c.created}};
  return j.dump() + "\n";
}

Result<RemoteConfig> DecodeRemoteConfig(std::string_view data) {
  RemoteConfig c;
  std::string seed, policy;
  try {
    auto j = nlohmann::json::parse(data);
    c.version = j.at("layerfs_remote").get<uint32_t>();
    if (c.version != kRemoteLayoutVersion)
      return Status::Errorf(EPROTO, "remote layout version {} is not supported (this build reads {})", c.version,
                            kRemoteLayoutVersion);
    c.id = j.at("id").get<std::string>();
    seed = j.at("seed").get<std::string>();
    policy = j.at("policy").get<std::string>();
    c.created = j.value("created", int64_t{0});
  } catch (const std::exception& e) {
    return Status::Corrupt(fmt::format("remote config is damaged: {}", e.what()));
  }
  if (c.id.size() != 32 || c.id.find_first_not_of("0123456789abcdef") != std::string::npos ||
      seed.size() != 16 || seed.find_first_not_of("0123456789abcdef") != std::string::npos)
    return Status::Corrupt("remote config is damaged: bad id or seed");
  c.seed = std::stoull(seed, nullptr, 16);
  auto p = Policy::Parse(policy);
  if (!p.ok()) return Status::Corrupt(fmt::format("remote config is damaged: {}", p.status().message()));
  c.policy = *p;
  return c;
}

void SetTransportOpenerForTesting(TransportOpener opener) {
  std::lock_guard l(g_opener_mu);
  g_opener = std::move(opener);
}

Result<std::shared_ptr<Transport>> Connect(std::string_view url, bool existing) {
  {
    std::lock_guard l(g_opener_mu);
    if (g_opener) return g_opener(url);
  }
  LFS_ASSIGN(auto t, OpenTransport(url, existing));
  return std::shared_ptr<Transport>(std::move(t));
}

}  // namespace layerfs::remote
