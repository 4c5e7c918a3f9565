// Private implementation of Workspace, shared by workspace.cc (inode operations) and
// workspace_commit.cc (commit, changes, reset).
#pragma once

#include <array>
#include <initializer_list>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>

#include "history/file_content.h"
#include "kv/data_log.h"
#include "kv/kv.h"
#include "objects/object_store.h"
#include "workspace/inode.h"

namespace layerfs::workspace {

class Workspace::Impl {
 public:
  // `scratch` (a Store opened read-only): the Kv the Workspace reads and writes, over the Store's.
  Impl(Store& store, uint64_t wsid, bool ephemeral, std::unique_ptr<kv::Kv> scratch = nullptr)
      : store_(store), scratch_(std::move(scratch)), kv_(scratch_ ? *scratch_ : store.kv()),
        log_(store.data_log()), keys_(wsid), ephemeral_(ephemeral) {}

  // All REQUIRE mu_ held (shared is enough for the ones that only read) unless noted.
  Result<Inode> Load(Ino ino, const kv::Snapshot* snap = nullptr);
  void Put(kv::Batch* b, const Inode& n) { b->Put(kv::Cf::kWorkspace, keys_.Inode(n.ino), EncodeInode(n)); }
  // Records in memory that `ino` changed (a new generation), and in `b` a Dirty record unless
  // the Kv already holds one (marked_). The batch must be written by Write (or SettleMarks
  // called) before this thread marks anything else.
  void MarkDirty(kv::Batch* b, Ino ino);
  void PutState(kv::Batch* b) { PutState(b, base_); }
  void PutState(kv::Batch* b, const ObjectId& base);
  // Writes a change's batch; the Dirty records MarkDirty put into it count as in the Kv
  // (marked_) once it is written.
  Status Write(const kv::Batch& b) {
    Status s = kv_.Write(b, false);
    SettleMarks(s.ok());
    return s;
  }
  // After a batch holding MarkDirty's records was written (or failed), for writers that do not
  // go through Write. REQUIRES: called by the thread that called MarkDirty.
  void SettleMarks(bool written);
  // A batch deletes `ino`'s Dirty record: its next change writes one again.
  void Unmark(Ino ino) {
    std::lock_guard leaf(leaf_mu_);
    marked_.erase(ino);
    std::erase(tl_marks(), ino);
  }
  static std::vector<Ino>& tl_marks();
  // The stripes of up to four inodes, locked ascending, each once. REQUIRES: mu_ shared.
  class InodeLocks {
   public:
    InodeLocks(Impl& im, std::initializer_list<Ino> inos);
    ~InodeLocks();
    InodeLocks(const InodeLocks&) = delete;
    InodeLocks& operator=(const InodeLocks&) = delete;
   private:
    std::array<std::mutex*, 4> held_{};
    size_t n_ = 0;
  };
  Result<Inode> LoadDir(Ino ino);  // loads and materialises; ENOTDIR for non-dirs. REQUIRES: mu_ exclusive
  // LoadDir for a reader holding `l`, a shared lock on mu_: an unmaterialised directory is
  // materialised under the exclusive lock, and `l` is held again on return (error or not).
  Result<Inode> LoadDirShared(Ino ino, std::shared_lock<std::shared_mutex>& l);
  Status Materialize(Inode* dir);
  // Materialises every directory of the base tree `root_tree` that holds a hard link.
  Status MaterializeLinkDirs(const ObjectId& root_tree);
  Result<std::optional<std::pair<Ino, EntryType>>> GetEntry(Ino dir, std::string_view name,
                                                            const kv::Snapshot* snap = nullptr);
  Result<std::vector<std::pair<std::string, std::pair<Ino, EntryType>>>> ListEntries(
      Ino dir, const kv::Snapshot* snap = nullptr);
  // With a snapshot (taken under mu_ together with `n`), safe without mu_.
  Result<std::string> ReadRange(const Inode& n, uint64_t off, uint64_t len, const kv::Snapshot* snap = nullptr);
  Result<std::string> ReadOrigin(const Inode& n, uint64_t off, uint64_t len);
  // Read and ReadPieces: the inode and a snapshot, under mu_ (taken here); false: nothing to read.
  Result<bool> StartRead(Ino ino, uint64_t off, size_t size, Inode* n, std::shared_ptr<const kv::Snapshot>* snap);
  Status Truncate(kv::Batch* b, Inode* n, uint64_t size);
  // Drops one link of `child` from `dir` (entry already removed by the caller).
  Status DropLink(kv::Batch* b, Inode* child, Ino dir);
  void DeleteInode(kv::Batch* b, const Inode& n);
  // Deletes n's blocks [first, end of a file of `size` bytes): B records, and R and Q records
  // where n has them.
  void DeleteBlocks(kv::Batch* b, const Inode& n, uint64_t first, uint64_t size);
  // An R record's block bytes: the data-log bytes with the record's patches applied.
  // REQUIRES: a data-log pin held since the record was read.
  Status MaterializeRef(std::string_view rec, std::string* out);
  // A Q record's block bytes: n's committed bytes of block `blk` (origin below valid_len) with
  // the record's patches applied.
  Status MaterializeOverlay(const Inode& n, uint64_t blk, std::string_view rec, std::string* out);
  // Frees data-log segments nobody refers to, if a segment filled or files in the log went.
  // REQUIRES: neither mu_ nor a data-log pin held.
  void CollectIfWanted();
  // Workspace::Write under a pin and mu_ (taken here).
  Status WriteLocked(Ino ino, uint64_t off, std::string_view data,
                     const std::optional<Caller>& kill_suidgid = std::nullopt, bool* killed = nullptr);
  // CopyRange's clone: in's size if `out` took in's committed content whole, else 0.
  Result<uint64_t> CloneContent(Ino in, Ino out, uint64_t len);
  // CopyRange's sharing: the bytes shared (whole blocks, possibly 0) from off_in to off_out,
  // both block-aligned. Clears *may_share when in holds no data-log block at all (or either is
  // not a regular file): no later piece of the copy need try again.
  Result<uint64_t> ShareBlocks(Ino in, uint64_t off_in, Ino out, uint64_t off_out, uint64_t len,
                               bool* may_share);
  // A fresh inode number; under mu_ shared, numbers come from a reserved range whose end is
  // written (state record) before any number of it is used. REQUIRES: mu_ (either way).
  Result<Inode> NewInode(EntryType type, uint32_t perm, const Caller& c, const Inode& parent);
  // Before a change made under mu_ shared: a pristine Workspace's state is rewritten as changed,
  // in its own write ahead of the change's (see pristine_). REQUIRES: mu_ shared or exclusive.
  Status Unpristine();
  Status InitFresh(const ObjectId& commit);  // REQUIRES: no state; writes state and root
  Status MigrateLegacyBlocks();               // blocks of older builds to their current keys

  // Commit machinery (workspace_commit.cc).
  struct Built {
    ObjectId root;
    uint64_t bytes = 0, entries = 0;
    std::map<Ino, std::pair<ObjectId, bool>> new_origins;  // ino -> (id, chunked)
    std::map<Ino, uint64_t> dirty;                         // as of the snapshot
  };
  // `dirty`: the Dirty marks as of `snap` (a copy of dirty_ taken with it).
  Result<Built> BuildTrees(const kv::Snapshot* snap, const std::map<Ino, uint64_t>& dirty, objects::Txn* txn);
  // Reads and stores the content of `files` (as of `snap`) into `txn`, encoding on one worker
  // per CPU when there is enough of it; returns each inode's (content id, chunked).
  static constexpr uint64_t kParallelContentBytes = 256 << 10;
  Result<std::map<Ino, std::pair<ObjectId, bool>>> StoreContents(std::vector<Inode> files,
                                                                 const kv::Snapshot* snap, objects::Txn* txn);
  // The files of StoreContents without a previous version of their own (new paths, replaced
  // inodes), one by one in path order, each against a look-alike (history::SimilarFiles).
  Status StoreFreshContents(std::vector<Inode> files, const kv::Snapshot* snap, objects::Txn* txn,
                            std::map<Ino, std::pair<ObjectId, bool>>* out);

  Store& store_;
  // On a read-only Store, the Workspace's records live in memory over the Store's (kv.h,
  // NewScratchKv): opening and reading it (status, read-file, list-dir on a full disk) writes
  // nothing; changes still fail, as the Store's own writes (commit) are EROFS.
  std::unique_ptr<kv::Kv> scratch_;
  kv::Kv& kv_;
  // Set by DeleteBlocks when it dropped data-log records, on the thread that will write the batch;
  // AskAgainForDroppedRefs (run after the batch is written: CollectIfWanted, Commit) renews the
  // collection request then.
  static thread_local bool tl_refs_dropped;
  void AskAgainForDroppedRefs();
  kv::DataLog& log_;  // lock order: a pin before mu_
  Keys keys_;
  bool ephemeral_;
  // Shared for operations that only read the Workspace (lookup, getattr, readdir, reads, xattr
  // reads) and for changes of named inodes (write, setattr, create, link, unlink, xattrs,
  // forget), which also lock the stripes of the inodes they change (InodeLocks); exclusive for
  // what changes many inodes or walks the tree (materialising, rmdir, rename, commit's snapshot
  // and publish, reset, merges). Lock order: commit_mu_, mu_, stripes ascending, leaf_mu_, the
  // Store's internal locks. A stripe holder never waits for mu_ (LoadDirShared comes first).
  mutable std::shared_mutex mu_;
  static constexpr size_t kStripes = 256;
  std::array<std::mutex, kStripes> stripes_;
  // Guards next_ino_, ino_high_, next_gen_, dirty_ and pristine_ for holders of mu_ shared
  // (exclusive holders need not take it).
  mutable std::mutex leaf_mu_;
  ObjectId base_;
  uint64_t next_ino_ = 2;
  // The inode number the state record promises is unused (next_ino_ <= ino_high_ unless an
  // exclusive path numbered past it, writing next_ino_ itself); 0: none reserved.
  uint64_t ino_high_ = 0;
  static constexpr uint64_t kInoReserve = 4096;
  uint64_t next_gen_ = 1;
  // The Dirty marks (inode -> generation) in memory, so a commit does not scan a key range that
  // every earlier commit filled with deletions (11 ms per commit after 150 commits). Read from the
  // Kv at open, added by MarkDirty, removed when a commit's deletion of the mark is written. It
  // may also hold marks deleted with their inode (unlink, rmdir): those no longer load and are
  // skipped, and dropped at the next commit.
  std::map<Ino, uint64_t> dirty_;
  // Inodes whose Dirty record is in the Kv: a record only says "changed since the base" (the
  // generations that matter are dirty_'s), so a later change of the inode writes none. Added once
  // the batch carrying the record is written, removed wherever a record may be deleted (commit,
  // inode deletion, reset); a missing entry only costs one more record.
  std::set<Ino> marked_;
  // State version 2: the entries of the base Commit are numbered in depth-first order (the root
  // is 1, a directory's subtree follows it), so materialising is deterministic; version 1 (older
  // Workspaces) numbered entries in the order they were first seen, from next_ino_.
  bool numbered_ = true;
  // Nothing changed since InitFresh: the state is exactly what the base Commit and the numbering
  // rule would rebuild, so it may be dropped (WorkspaceRegistry::Release) without any visible
  // difference, inode numbers included.
  bool pristine_ = false;
  std::mutex commit_mu_;  // one commit at a time; taken before mu_
  // Guards sink_; never held with mu_ (a notification may wait for the kernel, which may be
  // waiting for a request that needs mu_).
  std::mutex sink_mu_;
  InvalidationSink* sink_ = nullptr;
};

timespec Now();

}  // namespace layerfs::workspace
