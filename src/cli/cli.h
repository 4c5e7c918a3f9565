// The layerfs CLI: shared context for the verb groups. Each group registers its subcommands on
// the CLI11 app; a verb's callback returns a Status, and main() prints a failed one as a single
// line "layerfs: message" and exits non-zero.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

#include "layerfs/store.h"

namespace layerfs::cli {

struct Context {
  std::string store_path;  // --store or LAYERFS_STORE
  std::function<Status()> run;  // set by the chosen verb
  Result<std::unique_ptr<Store>> OpenStore();
};

void AddStoreVerbs(CLI::App& app, Context& ctx);
void AddHistoryVerbs(CLI::App& app, Context& ctx);

std::string FormatTime(int64_t sec);

}  // namespace layerfs::cli
