// PowerLoss: a kv::FileIo (kv/file_io.h) that records which bytes and names of a Store's files
// were made durable, and at a chosen point cuts the power; Apply() then leaves the files as the
// disk could hold them after the cut. Modelled on RocksDB's FaultInjectionTestFS; a test tool, never
// in a running daemon (docs/reliability.md, "Power loss").
//
// What it records, for every file and directory under `root` that is created, written, renamed
// or removed through it (files already there when it starts count as durable):
//  - bytes: a file's size, and the size at its last sync (fsync/fdatasync of the file; a
//    sync_file_range or a close is no sync). Files are only appended to (RocksDB's files, the
//    data log), so a size says which bytes are durable.
//  - names: every creation, rename, link and removal, in order, with the directory whose fsync
//    makes it durable (the new name's directory for a rename, as RocksDB syncs it). An operation
//    becomes durable when that directory is fsync'ed after it.
// What Apply(kDropAll) leaves: every file cut to its synced size, and the names of the durable
// operations only (a file created and never made durable by a directory fsync is gone; a file
// renamed or removed without one is back under its old name, with its synced bytes). What
// Apply(kRandom) leaves, as a disk whose writeback ran for a while before the cut: each file keeps
// a random part of its unsynced tail (at least its synced bytes), and the names of the durable
// operations plus a random prefix of the others. Either is a state a POSIX file system may leave.
//
// How: every file created through it gets a hard link in `shadow` (a directory on the same file
// system, outside root), so a removed or renamed file can be brought back; Apply truncates those
// inodes and rebuilds the names under root from the model. Reads are not routed (file_io.h): the
// real files hold everything written until Apply.
//
// Thread-safe (one mutex). Apply must run after every user of the files has closed them.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/file_io.h"
#include "layerfs/status.h"

namespace layerfs::kv {

class PowerLoss : public FileIo, public std::enable_shared_from_this<PowerLoss> {
 public:
  // Starts recording under `root` (existing files and directories are durable as they are).
  // `shadow` must be an empty directory on root's file system.
  static Result<std::shared_ptr<PowerLoss>> Start(const std::string& root, const std::string& shadow);
  ~PowerLoss() override;

  // The power goes off at the n-th call from now that changes a file (1: the next one: it does
  // not reach the disk); 0: not before Cut().
  void CutAt(uint64_t n);
  // The power goes off now.
  void Cut();
  bool cut() const { return cut_.load(); }
  // Calls that changed a file so far (those after the cut not counted).
  uint64_t operations() const { return ops_.load(); }

  enum class Mode { kDropAll, kRandom };
  struct Loss {
    uint64_t files = 0;            // files under root that the model knows
    uint64_t files_cut = 0;        // files that lost bytes
    uint64_t bytes_dropped = 0;    // unsynced bytes dropped
    uint64_t bytes_kept = 0;       // unsynced bytes kept (kRandom)
    uint64_t names_undone = 0;     // creations, renames and removals not kept
    uint64_t names_kept = 0;       // of those not made durable, kept (kRandom)
  };
  // Cuts the power if it is still on, then makes the files under root what the disk holds after
  // the cut (above). `seed` drives kRandom's choices. Once only.
  Result<Loss> Apply(Mode mode, uint64_t seed);

  // FileIo: the data log's calls.
  int Open(const std::string& path, int flags, mode_t mode) override;
  int Close(int fd) override;
  ssize_t Pwrite(int fd, const void* buf, size_t n, off_t off) override;
  int Fdatasync(int fd) override;
  int SyncDir(const std::string& dir) override;
  int Mkdir(const std::string& path, mode_t mode) override;
  int Rmdir(const std::string& path) override;
  int Unlink(const std::string& path) override;
  // FileIo: RocksDB's files, through a FileSystem wrapper reporting here.
  std::shared_ptr<rocksdb::FileSystem> RocksFileSystem(std::shared_ptr<rocksdb::FileSystem> base) override;

  // For the wrapper (power_loss.cc). Step counts a call that changes a file and says whether the
  // power is still on; the others record, and ignore what comes after the cut.
  struct Node;
  bool Step();
  std::shared_ptr<Node> Created(const std::string& path);       // after a file was created
  std::shared_ptr<Node> Existing(const std::string& path);      // a file opened to write more
  void Appended(Node* n, uint64_t end);                         // bytes up to `end` written
  void Truncated(Node* n, uint64_t size);
  void Synced(Node* n);
  void Renamed(const std::string& from, const std::string& to);  // after the rename
  void Linked(const std::string& from, const std::string& to);
  void Removed(const std::string& path);                         // file or directory
  void DirCreated(const std::string& path);
  void DirSynced(const std::string& dir);
  static std::string Normal(const std::string& path);

 private:
  PowerLoss() = default;
  struct NsOp;
  void AddOp(std::vector<std::pair<std::string, std::shared_ptr<Node>>> steps, const std::string& dir);
  std::shared_ptr<Node> NewNode(bool dir, uint64_t size, uint64_t synced);

  std::string root_, shadow_;
  std::atomic<bool> cut_{false};
  std::atomic<uint64_t> ops_{0};
  std::atomic<uint64_t> cut_at_{0};
  std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<std::string, std::shared_ptr<Node>> initial_;  // names when recording started
  std::map<std::string, std::shared_ptr<Node>> names_;    // names now
  std::vector<NsOp> ops_log_;
  std::unordered_map<int, std::shared_ptr<Node>> fds_;   // the data log's open files
  bool applied_ = false;
};

}  // namespace layerfs::kv
