// SimilarFiles: a delta base for content that has no previous version of its own.
//
// A file written at a new path, or a file a tool replaced by a new inode (an editor's save by
// rename, `git checkout`, `cp` over it, rm and create), would otherwise be stored whole. Most
// such files have a look-alike: the version the path held before the replacement, a file of
// the same name elsewhere (another package's package.json, a moved or copied file), or a
// sibling of the same kind (a new rule file among rule files). Measured on 157 releases of npm
// eslint (docs/design.md, "Delta bases for files without a version of their own"): such files
// were about two thirds of the Store's payload, and one base chosen this way, from the
// directory's previous listing and the files stored before it in the same Commit, made their
// records 13% smaller.
//
// Candidates are added as they become known (a directory's previous listing, then each file
// the operation stores), each under a handle of the caller's (an index into its own table);
// Find picks, in order: the same name in the same directory (the path's previous version);
// the nearest in size among files of the same name anywhere; the nearest in size among files
// of the same directory with the same extension. Files of other names never pair when their
// sizes are more than 4x apart (plus 4 KiB). A chunked file pairs only with a chunked file of
// the same path, a small one only with small ones. Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "layerfs/ids.h"
#include "layerfs/store.h"

namespace layerfs::history {

class SimilarFiles {
 public:
  // A file `name` of `size` bytes in the directory `dir` (any stable key: an inode number, a
  // walk's directory count; 0 for "anywhere": found by name only). Empty files are ignored.
  void Add(uint64_t dir, std::string_view name, uint64_t size, bool chunked, uint64_t handle);
  // The handle of the delta base for a file `name` of `size` bytes (chunked when `chunked`) in
  // `dir`, or nullopt.
  std::optional<uint64_t> Find(uint64_t dir, std::string_view name, uint64_t size, bool chunked) const;

  // Whether sizes a and b are close enough for one to be the other's delta base.
  static bool Comparable(uint64_t a, uint64_t b);

 private:
  struct Known {
    uint64_t size;
    bool chunked;
    uint64_t handle;
  };
  using BySize = std::multimap<uint64_t, Known>;
  static std::string_view Extension(std::string_view name);
  static std::optional<uint64_t> Nearest(const BySize& among, uint64_t size);

  std::map<std::pair<uint64_t, std::string>, Known> at_;       // (dir, name)
  std::map<std::string, BySize, std::less<>> by_name_;         // small files by name
  std::map<std::pair<uint64_t, std::string>, BySize> by_ext_;  // small files by (dir, extension)
};

// SimilarTrees: a delta base for a directory listing that has no previous version of its own
// (a new directory, or one a tool removed and made again): the listing stored last before it
// in the same operation with the same entry names and types. Package trees repeat whole
// directories under different parents (node_modules nests copies of one package), and copies
// written at different times differ only in their mtimes; Git's trees, which hold no times,
// are then one object, ours one listing each, stored whole. Measured on 157 npm eslint
// releases (docs/design.md, "Delta bases for directories without a version of their own").
// Add records what each listing was stored against, so that chains of such hints (each a
// pending record encoded before the next) stay at most kMaxHops long. Not thread-safe.
class SimilarTrees {
 public:
  static constexpr uint32_t kMaxHops = 64;
  // The id of the look-alike of a listing of `entries`, or nullopt.
  std::optional<ObjectId> Find(const std::vector<TreeEntry>& entries) const;
  // A listing of `entries` stored as `id`, with `base` as its delta base (or none).
  void Add(const std::vector<TreeEntry>& entries, const ObjectId& id, const std::optional<ObjectId>& base);

 private:
  static uint64_t Shape(const std::vector<TreeEntry>& entries);
  struct Last {
    ObjectId id;
    uint32_t hops;  // look-alike hints from this listing back to one stored without
  };
  std::unordered_map<uint64_t, Last> by_shape_;
  std::unordered_map<ObjectId, uint32_t, ObjectIdHash> hops_;
};

}  // namespace layerfs::history
