// The remotes a Store knows (meta `remote/NAME`), and the config blob a remote holds (its layout
// version, its random id, the id key and policy of the history it holds). docs/format.md has both
// encodings. Stateless functions over a Store; thread-safe as the Store is.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "layerfs/store.h"
#include "remote/transport.h"

namespace layerfs::remote {

struct RemoteInfo {
  std::string name, url;
  bool lazy = false;      // a promisor: fetch takes refs and indexes, objects come on first read
  std::string remote_id;  // the `id` of the remote's config, once contacted ("" before)
};

// [A-Za-z0-9._-], 1..64 bytes, not starting with '-' or '.'.
bool ValidRemoteName(std::string_view name);

// EEXIST if the name is taken; EINVAL for a bad name or URL.
Status AddRemote(Store& store, const RemoteInfo& info);
// Forgets the remote with its remote-tracking refs and its catalog. ENOENT if unknown.
Status RemoveRemote(Store& store, const std::string& name);
Result<std::vector<RemoteInfo>> ListRemotes(Store& store);
Result<RemoteInfo> GetRemote(Store& store, const std::string& name);
// Rewrites the remote's entry (its id once known).
Status PutRemote(Store& store, const RemoteInfo& info, kv::Batch* batch);

constexpr uint32_t kRemoteLayoutVersion = 1;

struct RemoteConfig {
  uint32_t version = kRemoteLayoutVersion;
  std::string id;  // 32 hex digits, random per remote
  uint64_t seed = 0;
  Policy policy;
  int64_t created = 0;
};
std::string EncodeRemoteConfig(const RemoteConfig& c);
// EPROTO for a layout version this build does not know; EIO for anything malformed.
Result<RemoteConfig> DecodeRemoteConfig(std::string_view data);
// 32 random hex digits.
std::string RandomHex(size_t digits);

// Opens the transport of a URL; tests may substitute their own (nullptr restores the default).
using TransportOpener = std::function<Result<std::shared_ptr<Transport>>(std::string_view url)>;
void SetTransportOpenerForTesting(TransportOpener opener);
// `existing`: as OpenTransport's (a missing file:// directory is ENOENT, not made).
Result<std::shared_ptr<Transport>> Connect(std::string_view url, bool existing = false);

}  // namespace layerfs::remote
