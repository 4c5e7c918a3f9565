// The layerfs verbs, shared by the `layerfs` CLI and the `layerfsd` daemon.
//
// Each group of verbs registers its subcommands on a CLI11 app; a verb's callback sets
// Context::run, which returns a Status and writes its output into Context::out/err. The CLI
// runs verbs itself when no daemon holds the Store, or forwards its argv to the daemon, which
// runs the same verbs against its open Store and live Workspaces (docs/design.md, "Control").
// A Context belongs to one request; not thread-safe.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "layerfs/store.h"
#include "workspace/registry.h"

namespace layerfs::cli {

// What only a running daemon can do: serve mounts.
class MountService {
 public:
  virtual ~MountService() = default;
  struct Request {
    std::string ref, mountpoint;
    bool read_only = false, allow_other = false, multithreaded = true, no_follow_cpu = false;
  };
  virtual Status Mount(const Request& r, std::string* out) = 0;
  virtual Status Unmount(const std::string& mountpoint) = 0;
  // The branch mounted writable at `mountpoint`, if any.
  virtual std::optional<std::string> BranchAt(const std::string& mountpoint) = 0;
  virtual std::optional<std::string> MountpointOf(const std::string& branch) = 0;
  // Runs fn with the branch's mount (if any) detached, then mounts it again.
  virtual Status WithBranchUnmounted(const std::string& branch, const std::function<Status()>& fn) = 0;
  virtual std::vector<std::pair<std::string, std::string>> List() = 0;  // mountpoint, what
  struct MountInfo {
    std::string mountpoint, ref, transport;
    bool read_only = false;
    std::vector<std::pair<std::string, uint64_t>> requests;  // FUSE requests served, per operation
  };
  virtual std::vector<MountInfo> Describe() = 0;
};

struct Context {
  std::string store_path;  // --store or LAYERFS_STORE (the CLI resolves it before running)
  std::string cwd;         // the client's working directory: relative paths are against it
  Store* store = nullptr;  // the daemon's Store, or one this Context opened
  std::unique_ptr<Store> owned_store;
  workspace::WorkspaceRegistry* workspaces = nullptr;
  std::unique_ptr<workspace::WorkspaceRegistry> owned_registry;
  MountService* mounts = nullptr;  // set only in the daemon
  std::string out, err;
  std::function<Status()> run;  // set by the chosen verb

  Result<Store*> GetStore();
  Result<workspace::WorkspaceRegistry*> Workspaces();
  std::string Abs(const std::string& path) const;
  void Printf(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void Eprintf(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  // The branch a verb's TARGET names: a mountpoint (or a path inside one) of this daemon, or a
  // branch name; empty TARGET means the working directory's mount.
  Result<std::string> BranchOfTarget(const std::string& target, std::string* mountpoint);
};

// Builds the app with every verb on `ctx`.
void AddAllVerbs(CLI::App& app, Context& ctx);
void AddStoreVerbs(CLI::App& app, Context& ctx);
void AddHistoryVerbs(CLI::App& app, Context& ctx);
void AddWorkspaceVerbs(CLI::App& app, Context& ctx);
void AddMergeVerbs(CLI::App& app, Context& ctx);

// Runs argv (argv[0] is the program name) on ctx: parse, then the verb. Returns the exit code
// and leaves output in ctx.out/err (errors as one "layerfs: ..." line).
int RunVerbs(Context& ctx, const std::vector<std::string>& argv);

std::string FormatTime(int64_t sec);

// The Store of the layerfs mount at or above `path`, from /proc/self/mountinfo; empty if none.
std::string StoreOfMount(const std::string& path, std::string* mountpoint = nullptr);

}  // namespace layerfs::cli
