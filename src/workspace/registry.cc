#include "workspace/registry.h"

namespace layerfs::workspace {

Result<std::shared_ptr<Workspace>> WorkspaceRegistry::Get(const std::string& branch) {
  std::lock_guard l(mu_);
  auto it = live_.find(branch);
  if (it != live_.end()) return it->second;
  LFS_ASSIGN(auto ws, Workspace::Open(store_, {.read_only = false, .branch = branch, .commit = {}}));
  std::shared_ptr<Workspace> shared = std::move(ws);
  live_[branch] = shared;
  return shared;
}

void WorkspaceRegistry::Drop(const std::string& branch) {
  std::lock_guard l(mu_);
  live_.erase(branch);
}

}  // namespace layerfs::workspace
