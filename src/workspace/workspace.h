// Workspace: the live, writable state of one Branch, as POSIX-shaped operations on inodes.
//
// A Workspace is copy-on-write over the Commit it is based on: a fresh fork holds one root inode
// whose directory is its committed tree; a directory is materialised (its entries given inode
// numbers and records) on first access; a file reads committed content until it is written, and
// then only the 64 KiB blocks written are stored. Everything lives in the kWorkspace column
// family (docs/format.md), one WriteBatch per operation, so it survives the process.
// Every change marks its inode dirty with a generation number; Commit() builds trees from a
// database snapshot for the dirty inodes and their ancestors only, while writers go on.
//
// The core knows nothing of FUSE: callers pass a Caller (uid, gid) and get errno-style Status.
// Permission checks are the kernel's (default_permissions); this layer enforces the POSIX rules
// that a filesystem itself must (ENOTEMPTY, EEXIST, ENOTDIR, EISDIR, ENAMETOOLONG, ...).
// Thread-safe: a reader-writer lock per Workspace; operations that only read (lookup, getattr,
// readdir, read, xattr reads) share it, and so do changes of named inodes (write, setattr,
// create, link, unlink, xattrs), which also lock those inodes' stripes; materialising, rmdir,
// rename, reset and merges take it alone; Commit takes it only to snapshot and to publish.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/data_log.h"
#include "layerfs/store.h"

namespace layerfs::objects { class Txn; }
namespace layerfs::kv { class Snapshot; }

namespace layerfs::workspace {

using Ino = uint64_t;
constexpr Ino kRootIno = 1;
constexpr uint64_t kBlockSize = 64 << 10;

struct Attr {
  Ino ino = 0;
  uint32_t mode = 0;  // S_IFMT type bits | permission bits
  uint32_t nlink = 1, uid = 0, gid = 0;
  uint64_t size = 0, rdev = 0;
  timespec atime{}, mtime{}, ctime{};
  // A file that never had a byte written nor committed content: all hole (`truncate -s 1G f`),
  // so 0 blocks as on ext4, and `du`, `cp --sparse` and `tar --sparse` see it sparse. Other
  // files count their size (which blocks hold data is not tracked per inode).
  bool holes_only = false;
  uint64_t blocks() const { return holes_only ? 0 : (size + 511) / 512; }
};

struct DirEntry {
  std::string name;
  Ino ino;
  uint32_t mode;  // S_IFMT bits
};

struct Caller {
  uint32_t uid = 0, gid = 0;
};

// What SetAttr changes; times already resolved (UTIME_NOW -> now) by the caller.
struct AttrChange {
  std::optional<uint32_t> mode;  // permission bits
  std::optional<uint32_t> uid, gid;
  std::optional<uint64_t> size;
  std::optional<timespec> atime, mtime;
  std::optional<timespec> ctime;  // else now (the kernel sends its own under writeback cache)
  // Set: clear setuid/setgid as a change by this caller without CAP_FSETID does (the kernel
  // asks for it under FUSE_HANDLE_KILLPRIV_V2; KillSuidgid).
  std::optional<Caller> kill_suidgid;
};

// What a change by `c`, lacking CAP_FSETID, leaves of permission bits `perm` of a file of group
// `gid`, as the kernel decides for ext4 (setattr_should_drop_suidgid): setuid goes; setgid goes
// with group execute on, and without it (a mandatory-locking mark) only if the caller is not of
// the file's group (its primary group: supplementary groups are not known here).
uint32_t KillSuidgid(uint32_t perm, uint32_t gid, const Caller& c);

// A read answered in pieces, in order: bytes in memory, or a range of an open data-log segment
// (whole blocks in the data log) that Workspace::FillRead reads block by block, checking each
// block's checksum, into the caller's reply buffer: one copy, and never an unchecked byte.
struct ReadPiece {
  std::string bytes;  // when fd < 0
  int fd = -1;
  uint64_t offset = 0, length = 0;  // the bytes of segment `fd` the piece delivers
  std::vector<kv::DataRef> blocks;  // the data-log blocks holding them, in order
};
struct ReadReply {
  std::vector<ReadPiece> pieces;
  uint64_t size = 0;                              // the pieces' total
  std::vector<std::shared_ptr<const void>> hold;  // keeps the files open until dropped
};

// Told what changed under the users of a Workspace when the change did not come through them
// (a merge applied in place), so a kernel's caches can be dropped. The FUSE adapter implements
// it; the core never includes FUSE. Called with no Workspace lock held.
class InvalidationSink {
 public:
  virtual ~InvalidationSink() = default;
  // The inode's content or attributes changed.
  virtual void InodeChanged(Ino ino) = 0;
  // The entry `name` of directory `parent` was added, removed or now names another inode.
  virtual void EntryChanged(Ino parent, std::string_view name) = 0;
};

// A change to bring a Workspace from its base Commit's tree to a target tree at the paths a
// merge touched (docs/design.md, "Merge"): `diff` is Store::DiffTrees(base tree, target tree).
struct ApplyRequest {
  std::vector<DiffEntry> diff;
  // The Commit the Workspace must still be based on (the merge's ours); EAGAIN otherwise.
  ObjectId expected_base;
  // Without force, every path must still be as in the base Commit (no uncommitted change there),
  // else nothing changes and the call fails with EBUSY naming the path. With force (an abort),
  // whatever is at each path is replaced by the target's entry.
  bool force = false;
  // Set: the target is this committed Commit (a clean merge or fast-forward); the Workspace's
  // base becomes it and the applied paths are committed state, not uncommitted changes; the
  // uncommitted changes it had stay uncommitted. Unset: the paths become uncommitted changes.
  std::optional<ObjectId> new_base;
  // Writes the batch the apply built (the Workspace's records) atomically with the caller's own
  // records (staged objects, the branch move); called with the Workspace locked. Unset: the
  // Workspace writes it alone.
  std::function<Status(kv::Batch*)> publish;
  // Set: the merge record to keep with the Workspace (empty string: delete it).
  std::optional<std::string> merge_record;
  // The Commit the entries come from, whose directory a forced path puts back whole where the
  // user removed one on the way (default: new_base, else the base); Restore from another Commit.
  std::optional<ObjectId> source;
};

struct WorkspaceOptions {
  bool read_only = false;   // a Commit mounted read-only: every change is EROFS
  std::string branch;       // the Branch; empty for a read-only Commit view
  ObjectId commit;          // for read_only: the Commit shown
};

class Workspace {
 public:
  // Opens the Workspace of `opts.branch` (creating it at the branch head if it has none), or a
  // read-only view of `opts.commit`.
  static Result<std::unique_ptr<Workspace>> Open(Store& store, const WorkspaceOptions& opts);
  ~Workspace();

  Result<Attr> Lookup(Ino parent, std::string_view name);
  Result<Attr> GetAttr(Ino ino);
  Result<Attr> SetAttr(Ino ino, const AttrChange& change);
  // Creates a regular file, device node, FIFO or socket (`mode` carries the type).
  Result<Attr> Mknod(Ino parent, std::string_view name, uint32_t mode, uint64_t rdev, const Caller& c);
  Result<Attr> Mkdir(Ino parent, std::string_view name, uint32_t mode, const Caller& c);
  Result<Attr> Symlink(Ino parent, std::string_view name, std::string_view target, const Caller& c);
  Result<Attr> Link(Ino ino, Ino new_parent, std::string_view new_name);
  // Unlink and Rmdir drop the entry; an inode with no links stays until Forget (open files).
  Status Unlink(Ino parent, std::string_view name);
  Status Rmdir(Ino parent, std::string_view name);
  // flags: RENAME_NOREPLACE, RENAME_EXCHANGE (from <linux/fs.h>), or 0.
  Status Rename(Ino parent, std::string_view name, Ino new_parent, std::string_view new_name, unsigned flags);
  Result<std::string> Readlink(Ino ino);
  Result<std::vector<DirEntry>> ReadDir(Ino ino);

  Result<std::string> Read(Ino ino, uint64_t off, size_t size);
  // As Read; a range held whole by unpatched blocks of the data log comes back as file ranges,
  // to be copied out with FillRead.
  Result<ReadReply> ReadPieces(Ino ino, uint64_t off, size_t size);
  // Copies a ReadPieces reply (r.size bytes) into dst, checking every data-log block it reads:
  // EIO naming the segment file if one is damaged (nothing is returned of a damaged block).
  Status FillRead(const ReadReply& r, char* dst);
  // The path of `ino` in the Workspace ("/dir/name"; "inode N" if it has no entry), for logs.
  std::string PathOf(Ino ino);
  // kill_suidgid: as AttrChange::kill_suidgid, with the write; *killed (if given) says whether
  // a bit was cleared.
  Result<size_t> Write(Ino ino, uint64_t off, std::string_view data,
                       const std::optional<Caller>& kill_suidgid = std::nullopt, bool* killed = nullptr);
  Status Fallocate(Ino ino, int mode, uint64_t off, uint64_t len);
  // copy_file_range(2) inside the Workspace: up to `len` bytes of `in` from off_in written into
  // `out` at off_out; returns how many (0 at or past in's end; at most kMaxCopy per call, as a
  // FUSE reply counts in 32 bits). A whole file whose bytes are all committed content, copied
  // into an empty file, is cloned: `out` takes in's content id, with no byte read or written.
  // At block-aligned offsets, whole blocks `in` holds unpatched in the data log are shared:
  // `out` gets records naming the same log bytes. Other bytes go through Read and Write in
  // pieces of kCopyPiece. Not atomic, as on ext4: a failure after some pieces returns what was
  // copied. The caller checks permissions and that same-file ranges do not overlap (the
  // kernel does).
  static constexpr uint64_t kMaxCopy = 1ull << 30;
  static constexpr uint64_t kCopyPiece = 4ull << 20;
  Result<uint64_t> CopyRange(Ino in, uint64_t off_in, Ino out, uint64_t off_out, uint64_t len);
  Result<uint64_t> Lseek(Ino ino, uint64_t off, int whence);  // SEEK_DATA / SEEK_HOLE
  Status Fsync(Ino ino, bool datasync);

  Status SetXattr(Ino ino, std::string_view name, std::string_view value, int flags);
  Result<std::string> GetXattr(Ino ino, std::string_view name);
  Result<std::vector<std::string>> ListXattr(Ino ino);
  Status RemoveXattr(Ino ino, std::string_view name);
  Result<struct statvfs> Statfs();

  // The kernel forgot the inode (lookup count 0): an unlinked inode's data is freed now.
  void Forget(Ino ino);

  // Makes a Commit of everything written so far and returns its id. Writers may go on; each
  // write lands in this Commit or the next. `more_parents` (concluding a merge) follow the base
  // as parents; with them or `end_merge` the merge record is deleted in the same batch.
  Result<ObjectId> Commit(const std::string& message, const std::vector<ObjectId>& more_parents = {},
                          bool end_merge = false);
  // Git's `commit --amend`: the same, but the new Commit takes the place of the head: it has the
  // head's parents (none for a root), and the branch moves from the head to it.
  Result<ObjectId> Amend(const std::string& message);
  // Applies a merge's changes in place (ApplyRequest); tells the sink what changed.
  Status Apply(const ApplyRequest& req);
  // The merge record kept with the Workspace (a merge stopped on conflicts), if any.
  Result<std::optional<std::string>> MergeRecord();
  // Resolves a path from the root ("" is the root) to its inode, materialising on the way.
  Result<Attr> LookupPath(std::string_view path);
  // Set (or clear, with nullptr) who is told of changes made by Apply. The sink must stay valid
  // until cleared; clearing waits for a notification in progress.
  void SetInvalidationSink(InvalidationSink* sink);
  // Tells the sink (if any) what changed when the change did not come through the sink's own
  // users (the file verbs: workspace/files.h). Call with no Workspace lock held.
  void Notify(const std::vector<Ino>& inodes, const std::vector<std::pair<Ino, std::string>>& entries);
  // Uncommitted changes against the head Commit, or with `from` the Workspace's tree against
  // that Commit's (Git's `diff A`): nothing is stored.
  Result<std::vector<DiffEntry>> Changes(const std::optional<ObjectId>& from = std::nullopt);
  // Discards uncommitted changes; with `to`, also moves the branch there. Only while no file is
  // open (the caller checks).
  Status Reset(const std::optional<ObjectId>& to);
  // The same, in place, for a Workspace a mount serves: every path that differs from the target
  // (the base, or `to`) is given the target's entry through Apply (forced; files updated in
  // place keep their inode, open ones read the target's bytes), the merge in progress if any
  // ends, and the branch moves with it in one batch. The mount stays: processes keep their open
  // files and working directories (a remount left those on a detached mount). The kernel is told
  // through the invalidation sink.
  Status ResetInPlace(const std::optional<ObjectId>& to);
  // Git's `restore [--source REF] PATH...`: every path at or below one of `under` ("" is the root)
  // that differs from Commit `source` gets source's entry through Apply (forced; in place, as
  // ResetInPlace), whether the change was written or committed since; paths source does not have
  // (new files) are kept, as Git keeps untracked ones. From the head (`source` the base) the
  // restored paths are committed state again; from another Commit they become uncommitted
  // changes. ENOENT if one of `under` is not in source. Returns what was restored (before: the
  // Workspace's entry, after: source's).
  Result<std::vector<DiffEntry>> Restore(const ObjectId& source, const std::vector<std::string>& under);

  const std::string& branch() const { return opts_.branch; }
  bool read_only() const { return opts_.read_only; }
  ObjectId base_commit() const;
  // Nothing was changed since the Workspace was created at its base Commit: dropping its state
  // loses nothing, and reopening it rebuilds the same inode numbers.
  bool pristine() const;

  class Impl;  // workspace_impl.h

 private:
  explicit Workspace(std::unique_ptr<Impl> impl, WorkspaceOptions opts);
  // Commit and Amend: the Commit under commit_mu_ (CommitLocked), then the data log's collection.
  Result<ObjectId> Record(const std::string& message, const std::vector<ObjectId>& more_parents, bool end_merge,
                          bool amend);
  Result<ObjectId> CommitLocked(const std::string& message, const std::vector<ObjectId>& more_parents, bool end_merge,
                                bool amend);
  std::unique_ptr<Impl> impl_;
  WorkspaceOptions opts_;
};

struct WorkspaceVerifyReport {
  uint64_t workspaces = 0, blocks = 0, bytes = 0;  // data-log blocks read back and checked
  std::vector<std::string> problems;               // "workspace of branch B: /path: ..."
};
// Reads back every record of every Workspace and every data-log block they point at (checked
// against its checksum); each problem names the branch and the file's path.
Result<WorkspaceVerifyReport> VerifyWorkspaces(Store& store);

// Deletes the persistent Workspace state of `branch` (after its branch is deleted or reset).
Status DropWorkspaceState(Store& store, const std::string& branch);
// True if `branch` has a Workspace (it was mounted, committed through, or given one).
Result<bool> HasWorkspace(Store& store, const std::string& branch);

// The Commits that merges in progress (stopped on conflicts) in any Workspace of `store` refer
// to: gc keeps them (their trees hold the conflict files the Workspaces read).
Result<std::vector<ObjectId>> MergeRoots(Store& store);

// Deletes the data-log segments no Workspace record refers to (whole blocks written since the
// last commit live there). Skipped, with Ok, while a reader or writer holds a pin (`wait`: for
// up to 100 ms).
Status CollectDataLog(Store& store, bool wait = true);

}  // namespace layerfs::workspace
