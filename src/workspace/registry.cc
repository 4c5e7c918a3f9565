#include "workspace/registry.h"

#include <vector>

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

WorkspaceRegistry::~WorkspaceRegistry() {
  std::lock_guard l(mu_);
  std::vector<std::string> names;
  for (const auto& [name, ws] : live_) names.push_back(name);
  for (const auto& name : names) ReleaseLocked(name);
}

void WorkspaceRegistry::Release(const std::string& branch) {
  std::lock_guard l(mu_);
  ReleaseLocked(branch);
}

void WorkspaceRegistry::ReleaseLocked(const std::string& branch) {
  auto it = live_.find(branch);
  if (it == live_.end() || it->second.use_count() != 1 || !it->second->pristine()) return;
  live_.erase(it);
  (void)DropWorkspaceState(store_, branch);  // on failure the state stays, still valid
}

void WorkspaceRegistry::Drop(const std::string& branch) {
  std::lock_guard l(mu_);
  live_.erase(branch);
}

}  // namespace layerfs::workspace
