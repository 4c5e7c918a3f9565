// The daemon's MountService: the live mounts of one Store, each a fuse::Mount over a Workspace.
// A branch is mounted writable at most once; commits are mounted read-only on a view of their
// own. Thread-safe: mu_ guards the table; no FUSE call is made while holding it except Start.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "cli/cli.h"
#include "fuse/mount.h"

namespace layerfs::daemon {

class MountTable : public cli::MountService {
 public:
  MountTable(Store& store, workspace::WorkspaceRegistry& reg) : store_(store), reg_(reg) {}
  ~MountTable() override;

  Result<cli::MountInfo> Mount(const Request& r) override;
  Status Unmount(const std::string& mountpoint) override;
  std::optional<std::string> BranchAt(const std::string& mountpoint) override;
  std::optional<std::string> MountpointOf(const std::string& branch) override;
  Status WithBranchUnmounted(const std::string& branch, const std::function<Status()>& fn) override;
  std::vector<cli::MountInfo> List() override;
  Status SettleWrites(const std::string& mountpoint) override;

  // Drops mounts the kernel ended (fusermount3 -u); returns how many remain.
  size_t Reap();
  void UnmountAll();
  size_t size();

 private:
  struct Entry {
    Request req;
    std::string branch;  // empty for a read-only commit view
    std::shared_ptr<workspace::Workspace> ws;
    std::unique_ptr<fuse::Mount> mount;
  };
  Status StartLocked(Entry& e);
  static cli::MountInfo Info(const std::string& mp, const Entry& e);
  // Stops the mount's session, then lets its Workspace go (released if pristine).
  Status Finish(Entry& e);

  Store& store_;
  workspace::WorkspaceRegistry& reg_;
  std::mutex mu_;
  std::map<std::string, Entry> mounts_;  // by mountpoint
};

}  // namespace layerfs::daemon
