// Store: one directory holding a RocksDB database of every Commit, Branch and object.
//
// The public face of the core library: create or open a Store, import directories as Commits,
// fork Branches, read history (log, show, diff, cat, export), and maintain it (stats, verify,
// gc). One process opens a Store at a time (a second Open fails with EBUSY). A Store object is
// thread-safe; every mutating call is one atomic step, durable when it returns.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "layerfs/ids.h"
#include "layerfs/progress.h"
#include "layerfs/status.h"

namespace layerfs {

namespace kv {
class Kv;
class FileIo;
class DataLog;
class Batch;
class SpaceGuard;
}  // namespace kv
namespace objects {
class ObjectStore;
class Txn;
}  // namespace objects

// Caps on delta chains: whole-file, chunk, metadata (tree) deltas. "16/8/8" by default.
struct Policy {
  uint32_t whole = 16, chunk = 8, meta = 8;
  static Result<Policy> Parse(std::string_view s);
  std::string ToString() const;
};

// FORMAT: persisted entry types; never renumber.
enum class EntryType : uint8_t { kFile = 1, kDir = 2, kSymlink = 3, kChar = 4, kBlock = 5, kFifo = 6, kSocket = 7 };
const char* EntryTypeName(EntryType t);

// One directory entry of a committed tree.
struct TreeEntry {
  std::string name;
  EntryType type = EntryType::kFile;
  uint32_t mode = 0644;  // permission bits (07777)
  uint32_t uid = 0, gid = 0;
  uint64_t size = 0;          // files: bytes; symlinks: target length; dirs: file bytes below
  uint64_t subtree_entries = 0;  // dirs: entries below (all depths)
  // dirs, when `summary` (trees written by format 7 on): the subtree's own subdirectories (its
  // nlink is 2 + subdirs) and whether any hard link lies anywhere below, so neither needs the
  // subtree read (a lazy mount fetches nothing for them). Without it (older trees), readers
  // read the subtree.
  bool summary = false;
  uint64_t subdirs = 0;
  bool links_below = false;
  int64_t mtime_sec = 0;
  uint32_t mtime_nsec = 0;
  uint64_t rdev = 0;
  uint64_t link_group = 0;  // nonzero: entries of a Commit sharing it are hard links
  bool chunked = false;     // file content is a chunk list
  ObjectId id;              // file content or subtree; zero for an empty file
  std::string target;       // symlink target
  std::vector<std::pair<std::string, std::string>> xattrs;  // user.* only, sorted
};

struct CommitInfo {
  ObjectId id;
  ObjectId root;
  std::vector<ObjectId> parents;
  std::string message;
  int64_t time_sec = 0;
  uint32_t time_nsec = 0;
  uint64_t logical_bytes = 0;  // sum of file sizes in the tree
  uint64_t files = 0;          // entries in the tree (all types)
};

struct DiffEntry {
  std::string path;
  // 'A' added, 'D' removed, 'M' content modified, 'T' type changed, 'P' mode changed; 'R' only
  // where renames were asked for (merge::DetectRenames): the file at from_path moved to path.
  char change;
  std::optional<TreeEntry> before, after;
  std::string from_path;  // 'R': the old path
  int similarity = 0;     // 'R': percent similar, 100 for identical content
};

struct ImportOptions {
  std::string branch = "main";
  std::string message;
  bool use_stat_cache = true;
  ProgressFn progress;  // phase "import": objects = files read, bytes = their bytes (no totals)
  unsigned threads = 0;  // workers reading and encoding files; 0: one per core
};
struct ImportStats {
  uint64_t files = 0, dirs = 0, hashed = 0, stat_hits = 0, objects_added = 0, bytes_added = 0;
};

struct StoreStats {
  uint64_t allocated_bytes = 0, payload_bytes = 0, metadata_bytes = 0, other_bytes = 0;
  uint64_t logical_bytes = 0, commits = 0, branches = 0;
  std::map<std::string, uint64_t> objects;                           // by kind
  std::map<std::string, std::map<uint32_t, uint64_t>> depth_histogram;  // kind -> depth -> count
  std::map<std::string, uint32_t> max_chain_depth;                   // whole, chunk, metadata
  std::map<std::string, uint64_t> cf_bytes;                          // table bytes per family
  std::string policy;
  // Objects committed but not yet encoded (docs/design.md, "Commits in the background"): Stats
  // waits for the encoder first, so these are what arrived meanwhile.
  uint64_t pending_objects = 0, pending_bytes = 0;
};

struct VerifyReport {
  uint64_t commits = 0, objects = 0, bytes = 0;
  uint64_t pending = 0;  // objects still queued for background encoding (verified all the same)
  uint64_t missing = 0;  // lazy Store: reachable objects not fetched (not problems)
  std::vector<std::string> problems;  // one line each: object, kind, path, what is wrong
  bool ok() const { return problems.empty(); }
};

struct GcReport {
  uint64_t objects_deleted = 0, bytes_before = 0, bytes_after = 0;
  uint64_t missing = 0;  // lazy Store: reachable objects not fetched, skipped
};

struct CreateOptions {
  std::optional<uint64_t> seed;  // the id key; default: a fresh random one (clone: the origin's)
  bool empty = false;            // no first Commit and no branch (clone creates the branches)
};

struct StoreOpenOptions {
  // Read-only: for reading a Store whose normal open fails (a full disk, a read-only
  // filesystem). Writes nothing at all: the WAL is replayed in memory only, no file is created or
  // deleted (no reserve, no data-log collection, no format upgrade), and a writer cannot open the
  // Store meanwhile. Every mutating call is EROFS.
  bool read_only = false;
  // If the database cannot open for lack of space, release the Store's reserve (kv/space_guard.h)
  // and try again. The daemon does: it is what serves the mounts through which files are
  // deleted to make room. CLI verbs do not, so they cannot use up the reserve on a full disk.
  bool release_reserve = false;
  // Every call that changes the Store's files (database and data log) goes through `io`
  // (kv/file_io.h; tests: a power-loss layer, kv/power_loss.h). Null: the plain system calls.
  std::shared_ptr<kv::FileIo> io;
};

class Store {
 public:
  ~Store();
  // Creates a Store at `path` (which must not exist or be an empty directory) with branch main
  // at an empty first Commit.
  static Result<std::unique_ptr<Store>> Create(const std::string& path, const Policy& policy,
                                               const CreateOptions& opts = {});
  // ENOSPC if there is no room to open it (after releasing the reserve): StoreOpenOptions::
  // read_only still reads it.
  static Result<std::unique_ptr<Store>> Open(const std::string& path, const StoreOpenOptions& opts = {});
  // Opens over an existing Kv (tests: MemKv, FaultKv); creates the Store in it if empty.
  static Result<std::unique_ptr<Store>> OpenOnKv(kv::Kv* kv, const Policy& policy, const CreateOptions& create = {});

  // Commits DIR's tree as the next Commit of opts.branch. Returns the new Commit's id.
  Result<ObjectId> Import(const std::string& dir, const ImportOptions& opts, ImportStats* stats = nullptr);

  // Resolves a branch name, a remote-tracking ref REMOTE/BRANCH, a commit id or unique prefix
  // (>= 4 hex digits), followed by any number of ~N (N-th first-parent ancestor; ~ alone is ~1)
  // and ^N (N-th parent; ^ alone is ^1, ^0 the commit itself), as Git reads them: main~2^2~1.
  Result<ObjectId> Resolve(std::string_view spec);
  Status Fork(const std::string& name, std::string_view from);
  Result<std::vector<std::pair<std::string, ObjectId>>> Branches();
  Status DeleteBranch(const std::string& name);
  // Moves an existing branch (or creates it) to `commit`.
  Status SetBranch(const std::string& name, const ObjectId& commit);
  Result<std::optional<ObjectId>> BranchHead(const std::string& name);
  // Moves (or creates, or with `to` nullopt deletes) a branch only if its head is still
  // `expected` (nullopt: absent); EAGAIN otherwise. `extra` is written in the same batch.
  Status CasBranch(const std::string& name, const std::optional<ObjectId>& expected,
                   const std::optional<ObjectId>& to, kv::Batch* extra = nullptr);
  // Remote-tracking refs as "REMOTE/BRANCH" -> commit id, sorted.
  Result<std::vector<std::pair<std::string, ObjectId>>> RemoteRefs();
  // True while some remote is lazy: objects reachable from refs may be missing locally.
  Result<bool> IsLazy();
  // Held (shared) by whoever writes objects that no ref reaches yet (fetch); gc takes it
  // exclusively, so it never frees them in between.
  std::shared_mutex& gc_mutex();

  Result<CommitInfo> GetCommit(const ObjectId& id);
  // Newest first along first parents; limit 0 = all.
  Result<std::vector<CommitInfo>> Log(const ObjectId& from, size_t limit = 0);
  // Every Commit reachable from `from` through all parents, each after all of its children
  // (newest commit time first among those ready); limit 0 = all.
  Result<std::vector<CommitInfo>> LogAll(const ObjectId& from, size_t limit = 0);
  // As LogAll, from several Commits at once (`log --all`: every branch head); each Commit once.
  Result<std::vector<CommitInfo>> LogAll(const std::vector<ObjectId>& from, size_t limit = 0);
  Result<std::vector<TreeEntry>> ReadTree(const ObjectId& tree, objects::Txn* txn = nullptr);
  // The entry at `path` in `commit` ("" is the root, returned as a directory entry).
  Result<TreeEntry> Lookup(const ObjectId& commit, std::string_view path);
  Result<std::string> ReadFile(const TreeEntry& file);
  Result<std::vector<DiffEntry>> Diff(const ObjectId& a, const ObjectId& b);
  // The change Commit `c` made: against its first parent, or, for a root Commit, every path of
  // its tree as added (what Git's show and log --stat list for a root Commit).
  Result<std::vector<DiffEntry>> DiffParent(const CommitInfo& c);
  // Writes `commit`'s tree into `dir` (absent or empty). Never writes outside `dir`. Reports
  // phase "export": objects = entries written of the Commit's `files`, bytes of `logical_bytes`.
  Status Export(const ObjectId& commit, const std::string& dir, const ProgressFn& progress = nullptr);

  Result<StoreStats> Stats();
  // Reads back every object reachable from `commits` (all branches' and remote-tracking refs'
  // history when empty). In a lazy Store, objects not fetched are counted as missing, not as
  // problems, unless `fetch` (then they are fetched, verified, and checked). Reports phase
  // "verify": objects and bytes read so far (no totals).
  Result<VerifyReport> Verify(const std::vector<ObjectId>& commits, const ProgressFn& progress = nullptr,
                              bool fetch = false);
  // Deletes objects no branch or remote-tracking ref reaches; `extra_roots` are Commits kept too
  // (merges in progress). Reports phase "gc-mark" (objects marked live), then "gc-sweep" (records
  // scanned).
  Result<GcReport> Gc(const std::vector<ObjectId>& extra_roots = {}, const ProgressFn& progress = nullptr);

  // Stores a new Commit of `root` on `branch` (whose head must still be `expected_head`) in one
  // synced batch with the pending objects and `extra`. Its parents are the head, then
  // `more_parents` (a merge). Used by Import and the Workspace. EAGAIN if the branch moved.
  Result<ObjectId> CommitTree(const std::string& branch, const ObjectId& root,
                              const std::optional<ObjectId>& expected_head, const std::string& message,
                              uint64_t logical_bytes, uint64_t files, kv::Batch* extra = nullptr,
                              objects::Txn* txn = nullptr, const std::vector<ObjectId>& more_parents = {});
  // Stages a Commit of `root` with `parents` in `txn` (nothing is written yet); returns its id.
  Result<ObjectId> StageCommit(const ObjectId& root, const std::vector<ObjectId>& parents,
                               const std::string& message, uint64_t logical_bytes, uint64_t files,
                               objects::Txn* txn);
  // Moves `branch` from `expected_head` to the Commit `to` in one synced batch with `txn`'s staged
  // objects and `extra` (a merge, a fast-forward). EAGAIN if the branch moved.
  Status UpdateBranch(const std::string& branch, const std::optional<ObjectId>& expected_head,
                      const ObjectId& to, kv::Batch* extra = nullptr, objects::Txn* txn = nullptr);
  // Diff of two trees (`a` nullopt: the empty tree, every path of b added); reads see `txn`'s
  // staged objects.
  Result<std::vector<DiffEntry>> DiffTrees(const std::optional<ObjectId>& a, const ObjectId& b,
                                           objects::Txn* txn = nullptr);

  // Deferred encoding (docs/design.md, "Commits in the background"). Starts the background
  // encoder: from now on Workspace commits store raw content and return; it is encoded on the
  // encoder's thread. The daemon starts it; a Store closing stops it after the record in hand,
  // leaving the rest pending for the next encoder (or a stats or gc, which encode it first).
  void StartBackgroundEncoding();
  // Returns once nothing is left to encode (encoding on this thread if no encoder runs).
  Status DrainEncoding();
  // Pending objects queued for encoding (including the one being encoded).
  uint64_t PendingEncodings();

  const Policy& policy() const;
  uint64_t seed() const;
  const std::string& path() const { return path_; }
  objects::ObjectStore& objects() { return *objects_; }
  kv::Kv& kv() { return *kv_; }
  // Whole file blocks of live Workspaces, beside the database (STORE/data; in memory over a
  // caller's Kv).
  kv::DataLog& data_log() { return *data_log_; }
  // The free space the Store's writers may take and the reserve (kv/space_guard.h).
  kv::SpaceGuard& space() { return *space_; }
  bool read_only() const;

  struct Impl;  // private state (history/store_impl.h)

 private:
  Store() = default;
  static Result<std::unique_ptr<Store>> Init(kv::Kv* kv, std::unique_ptr<kv::Kv> owned,
                                             const Policy* create_policy, std::string path,
                                             const CreateOptions& create,
                                             std::unique_ptr<kv::SpaceGuard> space,
                                             std::unique_ptr<kv::DataLog> data_log);
  std::string path_;
  std::unique_ptr<kv::SpaceGuard> space_;  // outlives the Kv and the data log, which use it
  std::unique_ptr<kv::DataLog> data_log_;  // outlives the Kv, which syncs it before its own syncs
  std::unique_ptr<kv::Kv> owned_kv_;
  kv::Kv* kv_ = nullptr;
  std::unique_ptr<objects::ObjectStore> objects_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace layerfs
