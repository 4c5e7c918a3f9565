// ReplayFilter: a RocksDB WAL filter that stops the replay of the write-ahead log at the first
// write batch holding a Workspace record the caller's check refuses, so a database reopened
// after a power cut comes back as of the last write whose data outside the database survived.
//
// Why (docs/design.md, "Power loss"): a Workspace write of whole blocks appends them to the data
// log, then writes the records pointing at them in one batch. Unsynced, both sit in the page
// cache, and the disk's writeback may save the WAL's tail and not the data log's: the records
// would come back pointing past the end of a segment (the block read as zeros). Each operation
// is one batch and the log is only appended to, so once one batch's data is missing, every
// later batch that wrote data is missing some too; stopping the replay there leaves the
// Workspace as it was after the last operation whose data is all on disk. A synced write, a
// flush or a compaction syncs the data log first (kv/rocks_sync_order.h), so nothing durable
// by a sync is ever dropped this way. Found by the power-loss test's random-writeback mode.
//
// Used only while the database opens (single-threaded). Each open replays every log not yet
// flushed (avoid_flush_during_recovery), so a stop is final only once the opener has flushed.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include <rocksdb/wal_filter.h>

namespace layerfs::kv {

// `workspace_put_ok(key, value)` sees every Put to the kWorkspace family in the replayed log.
std::unique_ptr<rocksdb::WalFilter> NewReplayFilter(
    std::function<bool(std::string_view key, std::string_view value)> workspace_put_ok);

// Whether `filter` (made by NewReplayFilter) stopped a replay. The batches it stopped at stay in
// the logs: the opener must flush every family before writing, or the next open stops there
// again and drops everything written since.
bool ReplayStopped(const rocksdb::WalFilter& filter);

}  // namespace layerfs::kv
