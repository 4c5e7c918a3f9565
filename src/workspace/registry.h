// WorkspaceRegistry: the one live Workspace object per Branch in a process. A Workspace keeps
// in-memory state (its inode counter, its lock), so two objects for one Branch must never
// coexist; every user in a process (mounts, commit, status, reset) gets the shared one here.
// Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "workspace/workspace.h"

namespace layerfs::workspace {

class WorkspaceRegistry {
 public:
  explicit WorkspaceRegistry(Store& store) : store_(store) {}
  // Releases every Workspace nobody else holds (see Release).
  ~WorkspaceRegistry();
  // The Branch's Workspace, opened on first use.
  Result<std::shared_ptr<Workspace>> Get(const std::string& branch);
  // Forgets the Branch's Workspace (after the branch was deleted or moved by import); the next
  // Get reopens it from the database.
  void Drop(const std::string& branch);
  // When nobody else holds the Branch's Workspace and nothing was changed in it since it was
  // created, forgets it and deletes its state: a fork that was only mounted and read costs no
  // space once unmounted, and the next mount rebuilds the same inode numbers.
  void Release(const std::string& branch);

 private:
  void ReleaseLocked(const std::string& branch);

  Store& store_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Workspace>> live_;
};

}  // namespace layerfs::workspace
