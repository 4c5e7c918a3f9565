// SyncOrderedFileSystem: RocksDB's file system with a callback run before every sync of a
// database file (a WAL, a table, a manifest), so what the database is about to make durable
// never points at bytes elsewhere that are not durable yet.
//
// Why (docs/design.md, "Power loss"): a Workspace record in RocksDB points at bytes in the data
// log. The record can become durable by many roads besides a client's fsync: a commit's or a
// fork's synced write syncs the whole WAL with every unsynced record written before it, a flush
// writes and syncs tables of them, a compaction rewrites them. Each road ends in a Sync or Fsync
// of one of the database's files, and that is where this wrapper runs the callback (the data
// log's Sync) first. Found by the power-loss test: a fork after an unsynced whole-block write
// left the write's records durable and its blocks lost, reading as zeros.
//
// A failing callback fails the sync (the database then treats it as an I/O error). Thread-safe
// as the wrapped file system is; the callback must be.
#pragma once

#include <functional>
#include <memory>

#include <rocksdb/file_system.h>

#include "layerfs/status.h"

namespace layerfs::kv {

std::shared_ptr<rocksdb::FileSystem> SyncOrderedFileSystem(std::shared_ptr<rocksdb::FileSystem> base,
                                                           std::function<Status()> before_sync);

}  // namespace layerfs::kv
