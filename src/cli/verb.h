// The verb table: every LayerFS verb once, with its typed arguments, the code that runs it to a
// typed result, and the text the CLI prints for that result.
//
// One table serves every way in: the CLI parses argv into a verb's arguments (CliParse, built
// from the table), the daemon's control protocol takes the same arguments by name
// (docs/protocol.md), and `layerfs mcp` publishes them as tool schemas. All of them end in the
// verb's `run`, in the daemon when one holds the Store and in the CLI's own process otherwise, so
// a verb's result is the same whichever way it was asked for; `layerfs VERB --json` prints
// exactly the protocol's `result`.
//
// A result is JSON (nlohmann::json), the protocol's form. That costs a little over plain structs
// (a `branches` call builds a small array), and buys one definition of every verb's output
// instead of a struct, a renderer and a serializer per verb that could drift apart.
//
// The table is built once and is immutable afterwards; it is safe to read from any thread. A
// Context (cli.h) belongs to one request.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "layerfs/status.h"

namespace layerfs::cli {

using nlohmann::json;
struct Context;

enum class ArgType { kString, kInt, kBool, kStrings };
const char* ArgTypeName(ArgType t);  // "a string", "an integer", "a boolean", "an array of strings"

struct ArgSpec {
  std::string name;  // the protocol's and MCP's name: "max_count"
  ArgType type = ArgType::kString;
  // How the CLI spells it: "REF" (a positional), "-n,--max-count" (an option; a flag for kBool).
  // Empty: the protocol's only (the CLI reaches it some other way, see Verb::from_cli).
  std::string cli;
  std::string help;
  bool required = false;
  bool cli_only = false;  // shapes the CLI's text only (--stat, -v): not a protocol argument
};

// Where the CLI's text goes; the CLI writes it straight to stdout and stderr.
class Output {
 public:
  virtual ~Output() = default;
  virtual void Out(std::string_view s) = 0;
  virtual void Err(std::string_view s) = 0;
  template <typename... A>
  void Outf(fmt::format_string<A...> f, A&&... a) { Out(fmt::format(f, std::forward<A>(a)...)); }
  template <typename... A>
  void Errf(fmt::format_string<A...> f, A&&... a) { Err(fmt::format(f, std::forward<A>(a)...)); }
};

// A verb's arguments by protocol name, checked against its ArgSpecs (CheckArgs) before `run`
// sees them: every value has its declared type and no name is unknown.
class Args {
 public:
  Args() : j_(json::object()) {}
  explicit Args(json j) : j_(std::move(j)) {}
  bool Has(const std::string& name) const { return j_.contains(name) && !j_[name].is_null(); }
  std::string Str(const std::string& name, const std::string& fallback = "") const;
  int64_t Int(const std::string& name, int64_t fallback = 0) const;
  bool Bool(const std::string& name) const;
  std::vector<std::string> Strings(const std::string& name) const;
  const json& raw() const { return j_; }
  json& raw() { return j_; }

 private:
  json j_;
};

struct Verb {
  std::string name;  // the protocol's and MCP's name: "branch_delete"
  // The CLI subcommand ("branch"); empty: reached from another subcommand (from_cli) or the
  // protocol's only.
  std::string cli;
  std::string help;
  std::vector<ArgSpec> args;
  bool read_only = false;    // changes nothing (MCP's readOnlyHint)
  bool destructive = false;  // may discard data: uncommitted changes, a branch, a file (destructiveHint)
  bool progress = false;   // reports progress for long work
  bool protocol = true;    // served by the daemon (false: init, which has no Store to be held)
  bool mcp = true;         // published as an MCP tool
  // The CLI's from_cli reads the client's standard input (write-file): only the CLI's own
  // process can parse its command line, so the daemon leaves it to the full CLI (front/front.h).
  bool cli_reads_stdin = false;
  // Runs the verb. On failure returns the Status; `*result` may still be set when the failure
  // has one (a merge stopped on conflicts lists them).
  // Arguments that name Commits (REF, COMMIT, A, B...): RunVerb expands HEAD in them
  // (Context::ExpandHead) before `run` sees them.
  std::vector<std::string> ref_args;
  std::function<Status(Context&, const Args&, json* result)> run;
  // The CLI's text for a result (also called beside a failure that has a result).
  std::function<void(const Args&, const json& result, Output&)> text;
  // The CLI's arguments to the protocol's: may rename the verb (`branch -d X` is branch_delete)
  // or split one CLI argument into several (`cat COMMIT:PATH`). Cli-only arguments stay.
  std::function<Status(std::string* verb, Args* args)> from_cli;
  // A failure the CLI reports after printing a successful result (verify's damaged objects are a
  // result to the protocol, an exit status of 1 to a shell).
  std::function<Status(const json& result)> cli_status;
};

// Every verb, in the order `layerfs --help` lists them.
const std::vector<Verb>& Verbs();
const Verb* FindVerb(std::string_view name);
// The verb the CLI subcommand `cli` parses into (its own, before from_cli).
const Verb* FindCliVerb(std::string_view cli);

// Checks `args` (a JSON object) against the verb's ArgSpecs: EINVAL naming the argument when a
// name is unknown (or CLI-only), a value has the wrong type, or a required one is missing.
Status CheckArgs(const Verb& v, const json& args);
// The JSON Schema of the verb's protocol arguments (an "object" schema, for MCP's inputSchema).
json ArgsSchema(const Verb& v);

// Runs a verb on `ctx`: checks the arguments, then `run`. Never throws.
Status RunVerb(Context& ctx, const Verb& v, const Args& args, json* result);

// The verbs of each group, added to the table by Verbs().
void AddStoreVerbs(std::vector<Verb>* out);
void AddHistoryVerbs(std::vector<Verb>* out);
void AddWorkspaceVerbs(std::vector<Verb>* out);
void AddMergeVerbs(std::vector<Verb>* out);
void AddFileVerbs(std::vector<Verb>* out);
void AddRemoteVerbs(std::vector<Verb>* out);
void AddClientVerbs(std::vector<Verb>* out);

}  // namespace layerfs::cli
