// ObjectSource: where an ObjectStore turns when a record is missing locally.
//
// A lazy Store (one with a promisor remote, docs/design.md "Lazy Stores") holds only the objects
// read so far; src/remote implements this interface and ObjectStore consults it on a local miss,
// so the objects layer knows nothing of remotes. Fetch must leave the record of (kind, id) and
// every record of its delta chain in the Store's Kv, each verified by hash before it is written,
// or fail (ENOENT: the source does not have it either; EIO: the source's copy is damaged;
// network errors as the transport reports them) having written nothing of that chain.
//
// LocalOnly: a scope in which the calling thread's reads never consult a source (gc, verify,
// stats, and the source's own verification of what it fetched).
//
// Implementations are thread-safe: Fetch is called from any thread that reads, FUSE threads
// included.
#pragma once

#include "layerfs/ids.h"
#include "layerfs/status.h"

namespace layerfs::objects {

enum class Kind : uint8_t;

class ObjectSource {
 public:
  virtual ~ObjectSource() = default;
  virtual Status Fetch(Kind kind, const ObjectId& id) = 0;
};

// While alive, reads on this thread see only local records. Nests.
class LocalOnly {
 public:
  LocalOnly();
  ~LocalOnly();
  LocalOnly(const LocalOnly&) = delete;
  LocalOnly& operator=(const LocalOnly&) = delete;
  static bool active();
};

}  // namespace layerfs::objects
