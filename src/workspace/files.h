// Files of a Workspace by path, for agents that have no shell: the control protocol's
// read_file, write_file, list_dir and remove_path (docs/protocol.md).
//
// Each call resolves its path from the Workspace's root through Workspace::Lookup and works
// through the Workspace's own inode operations, so it is the same Workspace a mount serves: a
// file written here is in the next commit and in the mount. Paths are relative to the root ("",
// "." and "/" are the root; a leading "/" is allowed); ".." is refused, and so is a symbolic link
// on the way or at the end (ELOOP): a link's target may name the host's tree, which these calls
// do not reach. A call reports in `changed` what it changed under a mount's kernel caches, for
// the caller to pass on (Workspace::Notify). Thread-safe as the Workspace is; a call is a
// sequence of Workspace operations, not one atomic step (a reader of the mount may see a file
// truncated before it is rewritten, as with any writer).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "workspace/workspace.h"

namespace layerfs::workspace {

// What a call changed, for the kernel caches of a mount.
struct Changed {
  std::vector<Ino> inodes;                           // content or attributes
  std::vector<std::pair<Ino, std::string>> entries;  // (directory, name) added or removed
};

struct FileEntry {
  std::string name;
  uint32_t mode = 0;  // S_IFMT type bits | permission bits
  uint64_t size = 0;
  std::string target;  // symbolic links
};

// Bytes [offset, offset + length) of the file at `path` (to its end when length is unset), and
// its size. EISDIR for a directory, ELOOP for a link, EINVAL for another kind of file.
Result<std::string> ReadPath(Workspace& ws, std::string_view path, uint64_t offset, std::optional<uint64_t> length,
                             uint64_t* size);

struct WriteOptions {
  std::optional<uint32_t> mode;  // permission bits: of a new file (default 0644), or set on an old one
  bool append = false;           // add to the end instead of replacing the content
  Caller owner;                  // owner of what is created
};
// Writes `data` as the file at `path` (created, with missing parent directories, mode 0755);
// returns the file's size after. EISDIR when it is a directory.
Result<uint64_t> WritePath(Workspace& ws, std::string_view path, std::string_view data, const WriteOptions& o,
                           Changed* changed);

// The directory's entries, sorted by name. ENOTDIR for another kind of file.
Result<std::vector<FileEntry>> ListPath(Workspace& ws, std::string_view path);

// Removes the file, link or empty directory at `path`; with `recursive`, a directory and all
// below it. The root cannot be removed (EINVAL). `forget`: free the inodes' data at once (no
// kernel holds them: the Workspace is not mounted); else the mount's kernel forgets them.
Status RemovePath(Workspace& ws, std::string_view path, bool recursive, bool forget, Changed* changed);

}  // namespace layerfs::workspace
