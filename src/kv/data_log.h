// DataLog: append-only segment files beside the database for large, short-lived values (the
// Workspace's whole file blocks), referenced from records in the Kv by DataRef.
//
// Why (docs/design.md, "Workspace data log"): a 64 KiB block written through RocksDB is copied
// into the WAL (with a software crc32c on this build), the memtable, a flushed table and again
// by compaction; a sequential write was CPU-bound on those copies. Appended here it is one
// pwrite into the page cache, and read back with one pread.
//
// Durability: an append is in the page cache when Append returns (it survives the process);
// Sync() makes every append so far durable, and must precede syncing the records that point at
// them. Space: segments (64 MiB) are only ever deleted whole, by Collect(), when no record
// refers to them. Pins (shared) are held by whoever appends until its records are written and
// by whoever reads from a database snapshot until it is done; Collect runs only when it can
// take the pin lock exclusively, so it never frees a segment a reader or writer still needs.
// Knows nothing of Workspaces: the caller says which segments are live.
//
// Integrity (format 6): a DataRef carries the XXH3-64 of the bytes it points at; every read of
// such a ref reads the whole ref and checks it, so a flipped byte or a segment cut short is EIO
// naming the segment file, never wrong bytes. Refs of formats 3 to 5 carry none and are read as they
// are. Space: appends are admitted by the SpaceGuard first (ENOSPC before a byte is written); an
// append that fails midway leaves bytes no record points at, reclaimed with the segment.
//
// Crash safety (docs/reliability.md, "Power loss"): a segment's name is made durable (a sync of
// data/, and of the Store directory when data/ is new) before Append returns its first ref, so a
// record that a sync made durable never points at a segment a power cut could take away.
// Every call that changes a file goes through a kv::FileIo (kv/file_io.h), so a test can cut the
// power under it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>

#include "kv/file_io.h"
#include "layerfs/status.h"

namespace layerfs::kv {

class SpaceGuard;

struct DataRef {
  uint32_t segment = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
  bool has_hash = false;
  uint64_t hash = 0;  // XXH3-64 of the `length` bytes (when has_hash)

  DataRef() = default;
  DataRef(uint32_t seg, uint64_t off, uint32_t len) : segment(seg), offset(off), length(len) {}
  // A ref to `bytes`, as appended at seg/off, with their checksum.
  static DataRef Of(uint32_t seg, uint64_t off, std::string_view bytes);

  // FORMAT: u32 LE segment, u64 LE offset, u32 LE length; if bit 31 of the length word is set
  // (format 6), a u64 LE XXH3-64 of the bytes follows (24 bytes in all; 16 without).
  static constexpr uint32_t kHashFlag = 0x80000000u;
  size_t EncodedSize() const { return has_hash ? 24 : 16; }
  void EncodeTo(std::string* dst) const;
  // Decodes a ref at the start of `src`; *used: its encoded size. False if malformed, which
  // includes a ref reaching past DataLog::kSegmentBytes (no segment is larger).
  static bool DecodePrefix(std::string_view src, DataRef* out, size_t* used);
  // Decodes `src` holding exactly one ref.
  static bool Decode(std::string_view src, DataRef* out);
};

struct DataLogOptions {
  SpaceGuard* space = nullptr;  // admits appends; may be null (no limit)
  bool read_only = false;       // segments opened read-only; no append, no collection
  std::shared_ptr<FileIo> io;   // the calls that change files (kv/file_io.h); null: FileIo::Posix()
};

class DataLog {
 public:
  static constexpr uint64_t kSegmentBytes = 64 << 20;

  // `dir` empty: an in-memory log (tests over MemKv). Otherwise segment files NNNNNNNN.seg in
  // `dir`, created on first append.
  static Result<std::unique_ptr<DataLog>> Open(const std::string& dir, const DataLogOptions& opts = {});
  ~DataLog();

  using Pin = std::shared_lock<std::shared_mutex>;
  Pin PinSegments() { return Pin(pins_); }

  // Appends `data` (at most one segment) and returns where it is (a ref without checksum: the
  // caller makes one per block with DataRef::Of). Caller holds a Pin until the record pointing
  // here is written. ENOSPC if the SpaceGuard refuses or the disk is full (nothing is pointed at
  // what a failed append wrote); EROFS on a read-only log.
  Result<DataRef> Append(std::string_view data);
  // Reads the ref's ref.length bytes into out, checked against its checksum if it has one. EIO
  // naming the segment file if they differ, if the segment is shorter than the ref, or if it is
  // missing.
  Status Read(const DataRef& ref, char* out);
  // Bytes [from, from + len) of the block `ref`: the whole block is read (and checked), the part
  // copied out.
  Status ReadPart(const DataRef& ref, uint64_t from, uint64_t len, char* out);
  // Checks `bytes` (ref.length of them, read from the ref's segment) against the ref's checksum.
  Status Check(const DataRef& ref, std::string_view bytes) const;
  // STORE/data/NNNNNNNN.seg of a segment ("data segment N" for an in-memory log).
  std::string SegmentPath(uint32_t seg) const;
  // Every append so far durable.
  Status Sync();
  // Segment numbers up to `seg` may be named by records in the database's logs (written by an
  // earlier process, the segments since collected): new segments are numbered above it. A
  // reused number would make a replayed record of the old segment look cut short in the new one
  // (kv/rocks_replay_filter.h), stopping the replay at a batch that was whole.
  void NumberAbove(uint32_t seg);
  // The open file holding `ref`, for a caller that splices from it instead of reading; the
  // handle keeps it open (and its bytes in place) even if the segment is collected meanwhile.
  // Nothing for an in-memory log, or if the file is shorter than the ref (a crash cut it).
  struct FileRange {
    int fd = -1;
    uint64_t size = 0;  // the file's size now: later refs within it need no new check
    std::shared_ptr<const void> handle;
  };
  std::optional<FileRange> File(const DataRef& ref);
  // A caller reading a segment file in order (a File's fd) has just read or spliced
  // [off, off + len): drops the host's cached copy of the range behind it. The host caches
  // segments in folios of up to 2 MiB, naturally aligned, and fadvise drops only folios wholly
  // inside its range, so this drops the aligned 2 MiB window one behind the one the read
  // enters, once, as the read crosses into it (another thread may still be reading the window
  // just left). docs/design.md, "Reads drop what they read".
  static void DropReadBehind(int fd, uint64_t off, uint64_t len);

  // Frees every segment not in live_segments(), which the caller computes from its records.
  // Runs only if no pin is held (with `wait`, retrying for up to 100 ms); returns false if it
  // did not run. live_segments() runs with pins held off (no append, read or record write in
  // flight) and must make the records it read durable before it returns (the caller's WAL sync:
  // what made the segments dead must survive a crash); the dead segments are then unlinked with
  // pins allowed again.
  Result<bool> Collect(const std::function<Result<std::set<uint32_t>>()>& live_segments, bool wait = true);
  // A segment filled up (or the caller asked): Collect is worth running.
  bool collect_wanted() const { return collect_wanted_.load(std::memory_order_relaxed); }
  void RequestCollect() { collect_wanted_.store(true, std::memory_order_relaxed); }
  // A background collector (workspace/collector.h) runs Collect when woken; `wake` must only
  // signal it (it is called with the caller's locks held). Null removes it.
  void SetCollectorWake(std::function<void()> wake);
  // Wakes the background collector if one is set (true), else does nothing (false): the caller
  // collects itself.
  bool WakeCollector();
  bool empty();

  struct Segment;

 private:
  DataLog() = default;
  Result<std::shared_ptr<Segment>> Get(uint32_t seg);
  Status StartSegment();

  std::string dir_;
  DataLogOptions opts_;
  std::shared_ptr<FileIo> io_;  // opts_.io, or FileIo::Posix()
  std::shared_mutex pins_;
  std::mutex sync_mu_;  // serialises Sync
  std::mutex mu_;  // segments_, active_, tail_, unsynced_
  std::map<uint32_t, std::shared_ptr<Segment>> segments_;
  uint32_t active_ = 0;  // 0: none yet
  uint32_t next_ = 1;
  uint64_t tail_ = 0;
  // Appends start the writeback of each kWritebackBytes of the active segment once the next
  // append begins past it (sync_file_range): measured on a 2 GiB dd conv=fsync, the fsync no
  // longer writes everything after the copies are done.
  static constexpr uint64_t kWritebackBytes = 8 << 20;
  uint64_t kicked_ = 0;  // the active segment's bytes before this have been handed to writeback
  std::pair<uint64_t, uint64_t> prev_kick_{0, 0};  // the range kicked last: dropped at the next kick
  std::set<uint32_t> unsynced_;
  std::atomic<bool> collect_wanted_{false};
  std::mutex wake_mu_;
  std::function<void()> wake_;
};

}  // namespace layerfs::kv
