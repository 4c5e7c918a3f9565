// The verbs the `layerfs` program runs as a client of the daemon rather than through the verb
// table's `run`: exec (exec.cc) and mcp (mcp.cc). Each returns the program's exit status.
#pragma once

#include <string>

#include "cli/command_line.h"

namespace layerfs::client {

// `layerfs exec REF [--commit [-m MSG]] [--isolate [--no-network]] [--mountpoint DIR] [--json]
// -- CMD [ARGS...]`: CMD's exit status (128+N when killed by signal N); 125 when exec itself
// failed before or after running it.
int RunExec(const std::string& store, const std::string& cwd, const cli::CommandLine& cl);

// `layerfs mcp`: serves MCP over stdin/stdout until stdin ends; 0, or 1 when it cannot start.
int RunMcp(const std::string& store, const std::string& cwd);

}  // namespace layerfs::client
