// PrivateFileSystem: RocksDB's file system with every file it creates set to one mode.
//
// RocksDB creates its files 0644 (less the umask) and offers no knob for them (its Env's
// SetAllowNonOwnerAccess reaches only the info log): a Store's tables, logs and manifests would
// be readable by anyone who can enter the Store. This wrapper chmods each file it creates or
// reopens for writing, and each directory it makes, to the Store's modes (base/store_files.h).
// Thread-safe as the wrapped file system is.
#pragma once

#include <sys/types.h>

#include <memory>

#include <rocksdb/file_system.h>

namespace layerfs::kv {

std::shared_ptr<rocksdb::FileSystem> PrivateFileSystem(std::shared_ptr<rocksdb::FileSystem> base, mode_t file_mode);

}  // namespace layerfs::kv
