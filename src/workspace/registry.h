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
  // The Branch's Workspace, opened on first use.
  Result<std::shared_ptr<Workspace>> Get(const std::string& branch);
  // Forgets the Branch's Workspace (after the branch was deleted or moved by import); the next
  // Get reopens it from the database.
  void Drop(const std::string& branch);

 private:
  Store& store_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Workspace>> live_;
};

}  // namespace layerfs::workspace
