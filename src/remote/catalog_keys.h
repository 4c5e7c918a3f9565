// Keys of a remote's local catalog in the index family (docs/format.md). FORMAT: never change.
#pragma once

#include <string>
#include <vector>

#include "base/coding.h"
#include "kv/kv.h"
#include "layerfs/ids.h"

namespace layerfs::remote {

// rpack/NAME/PACK -> varint number, varint fetched (0 no, else gc epoch + 1)
inline std::string PackKey(std::string_view remote, std::string_view pack) {
  return "rpack/" + std::string(remote) + "/" + std::string(pack);
}
// rnum/NAME/ + BE32 number -> bytes pack name, then the pack's index as the remote holds it
inline std::string PackNumberKey(std::string_view remote, uint32_t n) {
  std::string k = "rnum/" + std::string(remote) + "/";
  base::PutBigEndian32(&k, n);
  return k;
}
// rloc/NAME/ + u8 family + id -> location
inline std::string LocationKey(std::string_view remote, kv::Cf cf, const ObjectId& id) {
  std::string k = "rloc/" + std::string(remote) + "/";
  k.push_back(static_cast<char>(cf));
  k.append(id.AsKey());
  return k;
}
inline std::vector<std::string> CatalogPrefixes(std::string_view remote) {
  std::string r(remote);
  return {"rpack/" + r + "/", "rnum/" + r + "/", "rloc/" + r + "/"};
}

}  // namespace layerfs::remote
