// The context the verbs (verb.h) run in, shared by the `layerfs` CLI and the `layerfsd` daemon.
//
// The CLI runs a verb itself when no daemon holds the Store, or sends it to the daemon, which
// runs the same verb against its open Store and live Workspaces (docs/design.md, "Daemon and
// control"). A Context belongs to one request; not thread-safe. What it points to (Store,
// registry, mount service) is thread-safe and outlives it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/verb.h"
#include "front/front.h"
#include "layerfs/progress.h"
#include "layerfs/store.h"
#include "merge/renames.h"
#include "workspace/registry.h"

namespace layerfs::cli {

// One live mount, as `mount` and `mounts` report it.
struct MountInfo {
  std::string mountpoint;
  std::string ref;     // as the mount was asked for
  std::string branch;  // empty for a read-only view
  ObjectId commit;     // the Commit shown (a branch: its Workspace's base)
  bool read_only = false;
  std::string transport;  // "io_uring" or "/dev/fuse"
  std::vector<std::pair<std::string, uint64_t>> requests;  // FUSE requests served, per operation
};
json MountJson(const MountInfo& m);

// What only a running daemon can do: serve mounts.
class MountService {
 public:
  virtual ~MountService() = default;
  struct Request {
    std::string ref, mountpoint;
    bool read_only = false, allow_other = false, multithreaded = true, no_follow_cpu = false;
  };
  virtual Result<MountInfo> Mount(const Request& r) = 0;
  virtual Status Unmount(const std::string& mountpoint) = 0;
  // The branch mounted writable at `mountpoint`, if any.
  virtual std::optional<std::string> BranchAt(const std::string& mountpoint) = 0;
  virtual std::optional<std::string> MountpointOf(const std::string& branch) = 0;
  // Runs fn with the branch's mount (if any) detached, then mounts it again.
  virtual Status WithBranchUnmounted(const std::string& branch, const std::function<Status()>& fn) = 0;
  virtual std::vector<MountInfo> List() = 0;
  // Every write the kernel still holds for the mount at `mountpoint` reaches its Workspace
  // (fuse::Mount::SettleWrites); ENOENT when this daemon serves no mount there.
  virtual Status SettleWrites(const std::string& mountpoint) = 0;
};

struct Context {
  std::string store_path;  // --store or LAYERFS_STORE (the CLI resolves it before running)
  std::string cwd;         // the client's working directory: relative paths are against it
  uint32_t uid = 0, gid = 0;  // the client: owner of files a verb creates in a Workspace
  Store* store = nullptr;  // the daemon's Store, or one this Context opened
  std::unique_ptr<Store> owned_store;
  workspace::WorkspaceRegistry* workspaces = nullptr;
  std::unique_ptr<workspace::WorkspaceRegistry> owned_registry;
  MountService* mounts = nullptr;  // set only in the daemon
  ProgressFn progress;             // where long work reports; may be empty

  // The Store: the daemon's, or opened here. `read_only_ok` (the verbs that only read: log,
  // show, diff, cat, export, verify, stats, branch and remote listing, and status, read-file,
  // list-dir, whose Workspace then writes nothing): if the normal open fails for lack
  // of space or permission, or on a read-only filesystem, the Store is opened read-only
  // instead (a note on stderr says so), so history stays readable on a full disk.
  Result<Store*> GetStore(bool read_only_ok = false);
  Result<workspace::WorkspaceRegistry*> Workspaces();
  std::string Abs(const std::string& path) const;
  // The branch a verb's TARGET names: a mountpoint (or a path inside one) of this daemon, or a
  // branch name; empty TARGET means the working directory's mount.
  Result<std::string> BranchOfTarget(const std::string& target, std::string* mountpoint);
  // What HEAD names, as in Git the Commit one works on: the branch mounted writable at the
  // working directory, the Commit of a read-only mount there, else main (the default of every
  // verb that takes a branch). Only a daemon knows its mounts; elsewhere main.
  std::string Head();
  // `spec` with a leading HEAD (HEAD, HEAD~N, HEAD^N, HEAD:PATH, either side of A...B)
  // replaced by Head(); a branch cannot be named HEAD.
  std::string ExpandHead(const std::string& spec);
  // PATH arguments (log/diff/show/status -- PATH...) as paths in a Commit's tree, as Git reads
  // pathspecs: relative to the working directory's place in its mount (from the tree's root
  // elsewhere), an absolute path inside a mount from that mount's root; `.` and `..` resolved,
  // "" being the root. EINVAL for a path that climbs above the root.
  Result<std::vector<std::string>> TreePaths(const std::vector<std::string>& paths);
};

// Whether `path` (a change's) is one of `under` or below one of them.
bool PathSelected(const std::string& path, const std::vector<std::string>& under);

// The `paths` argument of log, diff, show and status (CLI: --path P, or -- PATH... after the
// rest); KeepPaths drops the changes outside them (Context::TreePaths), if given.
extern const ArgSpec kPaths;
Status KeepPaths(Context& ctx, const Args& a, std::vector<DiffEntry>* changes);

// The `renames` argument of diff, show, log and status (CLI: -M, --find-renames, as Git's):
// FindRenamesIf turns a removed and an added file that are one file moved into one change 'R'
// (merge::DetectRenames), reading contents with `read`, when the argument is given.
extern const ArgSpec kRenames;
Status FindRenamesIf(const Args& a, std::vector<DiffEntry>* changes, const merge::ChangeContent& read);

std::string FormatTime(int64_t sec);

// syncfs of the mount at `mp`: starts the writeback of what the kernel holds for it, without
// waiting for the daemon to be served (SettleMount does, for this daemon's own mounts).
Status SyncMount(const std::string& mp);
// Before a verb reads `branch`'s Workspace (commit, status, merge, push): what the kernel holds
// for its mount, `mp` or (empty) the one the daemon serves for the branch, reaches it, dirty
// pages of shared mmaps included. Without a mount, nothing to do.
Status SettleMount(Context& ctx, const std::string& branch, const std::string& mp);

// The Store of the layerfs mount at or above `path`, from /proc/self/mountinfo; empty if none.
inline std::string StoreOfMount(const std::string& path, std::string* mountpoint = nullptr) {
  return front::StoreOfMount(path, mountpoint);
}

}  // namespace layerfs::cli
