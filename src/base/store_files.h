// Files a Store keeps beside its database: the LAYERFS marker, and while a daemon runs its pid
// file and log (docs/format.md, "A Store is a directory").
//
// Written without ever following a symlink: a Store handed over by someone else (a tarball, a
// shared disk) may hold a symlink where one of these files goes, and following it would let the
// Store's author make the daemon (perhaps root's) write anywhere. And private: a new file is
// 0600 unless the Store directory itself grants group or others access, which is how its owner
// asks for a shared Store (docs/design.md, "Multi-user"). Stateless; thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "layerfs/status.h"

namespace layerfs::base {

// Permission bits for a new file in `store_dir`: 0600, with read for group and others where
// the directory grants them search (x) permission.
mode_t StoreFileMode(const std::string& store_dir);

// Replaces `path` with a regular file holding `content` (mode `mode`): a symlink or anything
// else in its place is removed, never followed.
Status WriteStoreFile(const std::string& path, std::string_view content, mode_t mode);
// Makes `path` a regular file (creating it empty, mode `mode`, or keeping a regular one), for a
// logger that then opens it by name to append: a symlink in its place is removed first.
Status PrepareStoreFile(const std::string& path, mode_t mode);
// ELOOP naming `what` if `path` is a symlink (a Store's db/ and data/ must be in the Store).
Status RefuseSymlink(const std::string& path, std::string_view what);

}  // namespace layerfs::base
