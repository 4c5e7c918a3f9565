// The CLI's command line, built from the verb table (verb.h): `layerfs [--store S] VERB ARGS`
// parsed into a verb and its arguments, and a verb's outcome printed as the CLI prints it (text,
// or the protocol's result with --json). Used by `layerfs` and by `layerfsd --then`.
// Stateless functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/verb.h"

namespace layerfs::cli {

struct CommandLine {
  const Verb* verb = nullptr;  // the verb to run (after the subcommand's from_cli)
  Args args;                   // its protocol arguments
  Args all;                    // the same and the CLI-only ones (what the text is shaped by)
  bool as_json = false;        // --json
  std::string store;           // --store, as given
  int exit = -1;               // >= 0: nothing to run (help printed, or a usage error): exit so
};

// Parses argv (argv[0] is the program). --help and usage errors are printed on `o` and set exit
// (0, or 2 with "layerfs: ..." on stderr).
CommandLine ParseCommandLine(const std::vector<std::string>& argv, Output& o);

// Prints a verb's outcome as the CLI does and returns the exit status: the result (JSON with
// --json, else the verb's text), then a failure as one line on stderr with exit 1: "layerfs: ...",
// or with --json the protocol's error object, {"error": {"code", "errno", "message"}}.
int PrintOutcome(const CommandLine& cl, const Status& s, const json& result, Output& o);

// Output straight to this process's stdout and stderr.
class StdOutput : public Output {
 public:
  void Out(std::string_view s) override;
  void Err(std::string_view s) override;
};

}  // namespace layerfs::cli
