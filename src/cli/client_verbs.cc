// Verbs the `layerfs` program runs itself, as a client of the daemon: exec (which spawns a
// command) and mcp (an MCP server over stdio). Only their command lines are here, so that the
// verb table parses them and `layerfs --help` lists them; src/client/ runs them.
#include "cli/cli.h"

namespace layerfs::cli {

void AddClientVerbs(std::vector<Verb>* out) {
  Verb exec;
  exec.name = exec.cli = "exec";
  exec.help = "Run CMD in REF's Workspace (mounted for the run if it is not), optionally committing what it left";
  exec.protocol = exec.mcp = false;
  exec.args = {{"ref", ArgType::kString, "REF", "Branch (a commit is forked first under a printed name)", true},
               {"commit", ArgType::kBool, "--commit", "Commit what CMD left (whatever its exit status)"},
               {"message", ArgType::kString, "-m,--message", "Message of that Commit (default: exec: CMD ARGS)"},
               {"isolate", ArgType::kBool, "--isolate", "Run CMD in a bubblewrap sandbox: the Workspace at /workspace, the system read-only"},
               {"no_network", ArgType::kBool, "--no-network", "With --isolate: no network but a private loopback"},
               {"mountpoint", ArgType::kString, "--mountpoint", "Mount here for the run (default: a temporary directory)"},
               {"json", ArgType::kBool, "--json", "After CMD, print what was run as one JSON line on stdout"},
               {"command", ArgType::kStrings, "CMD", "The command and its arguments (after --)", true}};
  out->push_back(exec);

  Verb mcp;
  mcp.name = mcp.cli = "mcp";
  mcp.help = "Serve the Store's verbs as MCP tools over stdio (JSON-RPC 2.0, MCP 2025-06-18)";
  mcp.protocol = mcp.mcp = false;
  out->push_back(mcp);
}

}  // namespace layerfs::cli
