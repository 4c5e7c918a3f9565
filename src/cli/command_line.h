// The CLI's command line, built from the verb table (verb.h): `layerfs [--store S] VERB ARGS`
// parsed into a verb and its arguments, and a verb's outcome printed as the CLI prints it (text,
// or the protocol's result with --json). Used by `layerfs` and by `layerfsd --then`.
// Stateless functions; thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cli/verb.h"
#include "layerfs/progress.h"

namespace layerfs::cli {

struct CommandLine {
  const Verb* verb = nullptr;  // the verb to run (after the subcommand's from_cli)
  Args args;                   // its protocol arguments
  Args all;                    // the same and the CLI-only ones (what the text is shaped by)
  bool as_json = false;        // --json
  std::string store;           // --store, as given
  int exit = -1;               // >= 0: nothing to run (help printed, or a usage error): exit so
  // Set instead of running the verb's from_cli when that would read standard input and the
  // parser was told it may not (the daemon parsing for the front); nothing is printed.
  bool needs_stdin = false;
};

// Parses argv (argv[0] is the program). --help and usage errors are printed on `o` and set exit
// (0, or 2 with "layerfs: ..." on stderr). With `stdin_ok` false, a verb whose from_cli reads
// standard input (Verb::cli_reads_stdin) is not converted: needs_stdin is set instead.
CommandLine ParseCommandLine(const std::vector<std::string>& argv, Output& o, bool stdin_ok = true);

// How RunCommandLine reaches a verb: the full CLI's Session (the daemon, or this process), or the
// daemon's own context when it runs a command line for the front.
using CallFn = std::function<Status(const Verb& v, const Args& args, json* result, const ProgressFn& progress)>;

// Runs a parsed command line's verb through `call` and prints its outcome on `o` as the CLI does
// (PrintOutcome); returns the exit status. `cat` and `read-file` without --json print the file in
// windows of 16 MiB, so a large file never has to fit in one result. `progress` (may be empty)
// gets the verb's progress.
int RunCommandLine(const CommandLine& cl, const CallFn& call, const ProgressFn& progress, Output& o);

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
