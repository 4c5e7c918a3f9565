// Key schema of the meta and index column families (docs/format.md). FORMAT: prefixes are
// persisted; never change one.
#pragma once

#include <string>
#include <string_view>

namespace layerfs::history {

// 2: Workspace blocks under their own tag (docs/format.md). A version-1 Store opens and is
// upgraded in place (its Workspaces move their blocks when they first open); older builds refuse
// a version-2 Store instead of misreading it.
// 3: whole file blocks of Workspaces may live in the data log (STORE/data), referenced by
// prefix|R records; a version-2 Store has none and opens as is.
// 4: pending object records (encoding 3, committed but not yet encoded) and the encoding queue
// (index `enc/` keys); a version-3 Store has neither and opens as is.
// 5: remotes (remote/, rref/, lazy, gc-epoch meta keys; rpack/, rnum/, rloc/ index keys); a lazy
// Store may lack objects. An older Store opens and is upgraded by rewriting its config; older
// builds refuse a version-5 Store (their gc would drop what only remote-tracking refs reach).
// 6: R records carry the XXH3-64 of their block (flagged in the length word), checked on every
// read; the records of a version-3 to -5 Store are read as they are (unchecked) until they are
// rewritten or committed, and the Store is upgraded by rewriting its config. Older builds refuse
// a version-6 Store (they would take the flag for part of the length).
// 7: a directory's tree entry may carry a summary (its subdirectories and whether hard links
// lie below: flags 2 and 4, then a varint), so mounts need not read subtrees for nlink or hard
// links. Older trees have none and are read as they are; the Store is upgraded by rewriting its
// config. Older builds refuse a version-7 Store (they would misread the new entries).
// 8: a Store created at version 8 keeps chunk records in a RocksDB column family of their own,
// "chunks" (kv::Cf::kChunks, zstd level 1 only; docs/design.md, "Storage engine"); one made before
// keeps them in blobs (the family is never added to it: kv::Kv::Aliased) and is upgraded by
// rewriting its config. Readers look for a blob or chunk in the other content family when it is
// not in its own. Older builds cannot open a database that has the chunks family (RocksDB names
// it) and refuse a version-8 Store.
// 9: a Workspace's partial write into a block of committed bytes is a Q record, the patch over
// those bytes, instead of a copy of the block read out of history (docs/format.md, "Workspace
// records"). Stores are upgraded by rewriting their config; older builds refuse a version-9
// Store (they would read the committed bytes without the patches).
constexpr uint32_t kFormatVersion = 9;
constexpr uint32_t kOldestFormatVersion = 1;
inline constexpr std::string_view kConfigKey = "config";
inline constexpr std::string_view kRefPrefix = "ref/";     // + branch name -> 16-byte commit id
inline constexpr std::string_view kStatPrefix = "stat/";   // + branch + '\0' + path -> stat entry
// Remotes (src/remote owns their values; gc and Resolve read the refs and flags).
inline constexpr std::string_view kRemotePrefix = "remote/";  // + name -> remote config
inline constexpr std::string_view kRemoteRefPrefix = "rref/";  // + name + '/' + branch -> commit id
inline constexpr std::string_view kLazyKey = "lazy";           // present while a remote is lazy
inline constexpr std::string_view kGcEpochKey = "gc-epoch";    // fixed64, bumped by every gc

inline std::string RemoteRefKey(std::string_view remote, std::string_view branch) {
  return std::string(kRemoteRefPrefix) + std::string(remote) + "/" + std::string(branch);
}

inline std::string RefKey(std::string_view branch) { return std::string(kRefPrefix) + std::string(branch); }
inline std::string StatBranchPrefix(std::string_view branch) {
  return std::string(kStatPrefix) + std::string(branch) + '\0';
}
// The smallest key greater than every key that starts with `prefix`.
inline std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) != 0xff) {
      prefix.back() = static_cast<char>(prefix.back() + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return prefix;
}

}  // namespace layerfs::history
