// Pieces of RocksKv shared by its files (rocks_kv.cc, rocks_options.cc, rocks_faults.cc):
// the tuning of the column families, the mapping of RocksDB statuses to errno, and the
// fault-injecting file system of the tests. Private to src/kv.
#pragma once

#include <memory>
#include <string_view>

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/file_system.h>

#include "kv/file_faults.h"
#include "kv/kv.h"

namespace layerfs::kv::rocks {

// The errno of a RocksDB status: ENOSPC (no space, also as "Incomplete" write stalls after a
// space error), EROFS, EACCES, EDQUOT, EBUSY (the lock), ENOENT, EINVAL; EIO otherwise
// (corruption included: the message names the file).
Status FromRocks(const rocksdb::Status& s, std::string_view what);

// In the merged layout, cf == kMeta stands for the shared family.
rocksdb::ColumnFamilyOptions CfOptions(Cf cf, const std::shared_ptr<rocksdb::Cache>& cache);
rocksdb::DBOptions DbOptions();

// `base` with `faults` applied to its writable files.
std::shared_ptr<rocksdb::FileSystem> FaultFileSystem(std::shared_ptr<rocksdb::FileSystem> base,
                                                     std::shared_ptr<FileFaults> faults);

}  // namespace layerfs::kv::rocks
