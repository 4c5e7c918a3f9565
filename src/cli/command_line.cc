#include "cli/command_line.h"

#include <CLI/CLI.hpp>

#include "cli/json_shapes.h"
#include "control/protocol.h"
#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <optional>
#include <sstream>

namespace layerfs::cli {

void StdOutput::Out(std::string_view s) { fwrite(s.data(), 1, s.size(), stdout); }
void StdOutput::Err(std::string_view s) {
  fflush(stdout);
  fwrite(s.data(), 1, s.size(), stderr);
}

namespace {

// Where CLI11 puts one subcommand's values, by argument name; deques keep addresses stable.
struct Slots {
  std::deque<std::string> strs;
  std::deque<int64_t> ints;
  std::deque<bool> bools;
  std::deque<std::vector<std::string>> lists;
  std::vector<std::pair<const ArgSpec*, CLI::Option*>> opts;
  bool as_json = false;
};

void AddArgs(CLI::App* c, const Verb& v, Slots* s) {
  for (const auto& a : v.args) {
    if (a.cli.empty()) continue;
    CLI::Option* o = nullptr;
    switch (a.type) {
      case ArgType::kString: o = c->add_option(a.cli, s->strs.emplace_back(), a.help); break;
      case ArgType::kInt: o = c->add_option(a.cli, s->ints.emplace_back(), a.help); break;
      case ArgType::kBool: o = c->add_flag(a.cli, s->bools.emplace_back(false), a.help); break;
      case ArgType::kStrings: o = c->add_option(a.cli, s->lists.emplace_back(), a.help); break;
    }
    if (a.required) o->required();
    s->opts.emplace_back(&a, o);
  }
}

json ValueOf(const ArgSpec& a, CLI::Option* o) {
  switch (a.type) {
    case ArgType::kString: return o->as<std::string>();
    case ArgType::kInt: return o->as<int64_t>();
    case ArgType::kBool: return true;
    case ArgType::kStrings: return o->as<std::vector<std::string>>();
  }
  return nullptr;
}

// Where the verb's word is in argv (0: none): the first word that is not an option, after
// `--store DIR`.
size_t VerbAt(const std::vector<std::string>& argv) {
  for (size_t i = 1; i < argv.size(); i++) {
    if (argv[i] == "--store") {
      i++;
      continue;
    }
    if (!argv[i].empty() && argv[i][0] != '-') return i;
  }
  return 0;
}

// A word that is no verb gets one line naming it (CLI11 would say "A subcommand is required");
// Git's verbs that have no counterpart here say what to do instead.
std::optional<std::string> UnknownVerb(const std::vector<std::string>& argv) {
  const size_t at = VerbAt(argv);
  if (at == 0) return std::nullopt;
  const std::string& word = argv[at];
  for (const auto& v : Verbs())
    if (!v.cli.empty() && v.cli.substr(0, v.cli.find(' ')) == word) return std::nullopt;
  static const std::map<std::string, std::string> kGitHabits = {
      {"add", "there is no staging area: `layerfs commit` records every change of the Workspace"},
      {"stage", "there is no staging area: `layerfs commit` records every change of the Workspace"},
      {"checkout", "a branch is worked on where it is mounted (`layerfs mount BRANCH DIR`); a new one is `layerfs fork NEW FROM`"},
      {"switch", "a branch is worked on where it is mounted (`layerfs mount BRANCH DIR`); a new one is `layerfs fork NEW FROM`"},
      {"stash", "fork a branch and commit there (`layerfs fork NEW`), or discard with `layerfs reset`"},
      {"tag", "a branch names a Commit: `layerfs fork NAME COMMIT`"},
      {"rebase", "`layerfs cherry-pick` applies a Commit's change onto a branch"},
      {"rm", "remove files in the mount with rm, or with `layerfs remove-path`"},
      {"mv", "move files in the mount with mv"},
      {"unmount", "unmount with `layerfs umount MOUNTPOINT`"},
      {"fsck", "`layerfs verify` reads back every object and checks its hash"},
  };
  auto it = kGitHabits.find(word);
  if (it != kGitHabits.end()) return fmt::format("layerfs: '{}' is not a layerfs command: {}\n", word, it->second);
  return fmt::format("layerfs: '{}' is not a layerfs command (`layerfs --help` lists them)\n", word);
}

// Git's `VERB ... -- PATH...` for the verbs with a `paths` argument (log, diff, show, status):
// the words after `--` become `--path WORD` (CLI11 would give them to the positionals in order,
// so `log -- f` would read f as the REF). Other verbs keep `--` (exec's command follows it).
std::vector<std::string> PathsAfterDashes(const std::vector<std::string>& argv_in) {
  const size_t verb_at = VerbAt(argv_in);
  if (verb_at == 0) return argv_in;
  const Verb* v = nullptr;
  for (const auto& cand : Verbs())
    if (cand.cli == argv_in[verb_at]) v = &cand;
  if (!v || std::none_of(v->args.begin(), v->args.end(), [](const ArgSpec& a) { return a.name == "paths"; }))
    return argv_in;
  std::vector<std::string> argv = argv_in;
  if (v->name == "log") {
    // Git's `log -N`: at most N Commits (`-n N`), before any `--`.
    argv.clear();
    bool paths = false;
    for (size_t i = 0; i < argv_in.size(); i++) {
      const std::string& w = argv_in[i];
      paths = paths || w == "--";
      if (!paths && i > verb_at && w.size() > 1 && w[0] == '-' && w.find_first_not_of("0123456789", 1) == std::string::npos) {
        argv.push_back("-n");
        argv.push_back(w.substr(1));
      } else {
        argv.push_back(w);
      }
    }
  }
  auto dashes = std::find(argv.begin() + static_cast<long>(verb_at), argv.end(), "--");
  if (dashes == argv.end()) return argv;
  std::vector<std::string> out(argv.begin(), dashes);
  for (auto it = dashes + 1; it != argv.end(); ++it) {
    out.push_back("--path");
    out.push_back(*it);
  }
  return out;
}

}  // namespace

CommandLine ParseCommandLine(const std::vector<std::string>& argv_in, Output& out, bool stdin_ok) {
  CommandLine cl;
  if (auto refusal = UnknownVerb(argv_in)) {
    out.Err(*refusal);
    cl.exit = 2;
    return cl;
  }
  const std::vector<std::string> argv = PathsAfterDashes(argv_in);
  CLI::App app{"layerfs: a versioned filesystem for agent workspaces", "layerfs"};
  app.require_subcommand(1);
  app.add_option("--store", cl.store, "Store directory (default: $LAYERFS_STORE)");
  // Taken before the parse (front::ChangeDirs), listed here for --help.
  std::string listed_only;
  app.add_option("-C", listed_only, "Run as if started in DIR (as git -C); before the verb")->type_name("DIR");
  std::deque<Slots> slots;
  std::vector<std::pair<CLI::App*, const Verb*>> subs;
  std::map<std::string, CLI::App*> by_cli;
  for (const auto& v : Verbs()) {
    if (v.cli.empty()) continue;
    // "remote add": subcommand `add` of the verb whose CLI name is "remote" (listed before it).
    CLI::App* parent = &app;
    std::string name = v.cli;
    if (size_t sp = v.cli.rfind(' '); sp != std::string::npos) {
      auto it = by_cli.find(v.cli.substr(0, sp));
      if (it == by_cli.end()) continue;  // the table lists a parent first (verb_test checks it)
      parent = it->second;
      parent->require_subcommand(0, 1);
      name = v.cli.substr(sp + 1);
    }
    auto* c = parent->add_subcommand(name, v.help);
    by_cli[v.cli] = c;
    Slots& s = slots.emplace_back();
    AddArgs(c, v, &s);
    if (v.text) c->add_flag("--json", s.as_json, "Print the result as JSON (the control protocol's result)");
    subs.emplace_back(c, &v);
  }
  std::vector<std::string> args(argv.rbegin(), argv.rend() - 1);  // CLI11 wants them reversed, without argv[0]
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    std::ostringstream o, er;
    cl.exit = app.exit(e, o, er);
    out.Out(o.str());
    if (e.get_exit_code() != 0) {
      out.Err(fmt::format("layerfs: {}\n", e.what()));
      cl.exit = 2;
    } else {
      out.Err(er.str());
    }
    return cl;
  }
  // The innermost parsed subcommand is the verb ("remote add" parses "remote" too); children
  // come after their parent in `subs`.
  for (size_t i = subs.size(); i-- > 0;) {
    if (!subs[i].first->parsed()) continue;
    const Verb* v = subs[i].second;
    if (v->cli_reads_stdin && !stdin_ok) {
      cl.needs_stdin = true;
      return cl;
    }
    Slots& s = slots[i];
    for (size_t k = 0; k < subs.size(); k++)  // --json given to "remote" counts for "remote add"
      if (subs[k].first->parsed() && slots[k].as_json) cl.as_json = true;
    json all = json::object();
    for (auto& [spec, opt] : s.opts)
      if (opt->count() > 0) all[spec->name] = ValueOf(*spec, opt);
    Args a(all);
    std::string name = v->name;
    if (v->from_cli) {
      Status st = v->from_cli(&name, &a);
      if (!st.ok()) {
        out.Err(fmt::format("layerfs: {}\n", st.message()));
        cl.exit = 2;
        return cl;
      }
    }
    cl.verb = FindVerb(name);
    cl.all = a;
    json proto = json::object();
    for (const auto& [k, val] : a.raw().items()) {
      bool cli_only = false;
      for (const auto* verb : {v, cl.verb})
        for (const auto& spec : verb->args)
          if (spec.name == k && spec.cli_only) cli_only = true;
      if (!cli_only) proto[k] = val;
    }
    cl.args = Args(proto);
    return cl;
  }
  cl.exit = 2;
  return cl;
}

int PrintOutcome(const CommandLine& cl, const Status& s, const json& result, Output& o) {
  if (!result.is_null()) {
    if (cl.as_json) o.Out(control::Dump(result, 2) + "\n");
    else if (cl.verb->text) cl.verb->text(cl.all, result, o);
  }
  Status st = s;
  if (st.ok() && cl.verb->cli_status && !result.is_null()) st = cl.verb->cli_status(result);
  if (st.ok()) return 0;
  // With --json the caller is a program: the failure is the protocol's error object, so its
  // code survives (`layerfs init`, which no daemon runs, has no other way to give one).
  if (cl.as_json) o.Err(control::Dump(json{{"error", control::ErrorJson(st)}}) + "\n");
  else o.Err(fmt::format("layerfs: {}\n", st.message()));
  return 1;
}

namespace {

// `cat` and `read-file` print file content in windows, so a large file never has to fit in one
// protocol message (or in memory).
int Cat(const CommandLine& cl, const CallFn& call, Output& o) {
  constexpr int64_t kWindow = 16 << 20;
  // The caller's own offset and length (read-file --offset/--length) bound the windows.
  const json& user = cl.args.raw();
  int64_t off = 0;
  std::optional<int64_t> left;
  for (const char* name : {"offset", "length"}) {
    if (!user.contains(name) || !user[name].is_number_integer()) continue;
    const int64_t v = user[name].get<int64_t>();
    if (v < 0)
      return PrintOutcome(cl, Status::Invalid(fmt::format("{}: argument '{}' must not be negative", cl.verb->name, name)),
                          nullptr, o);
    if (name == std::string_view("offset")) off = v;
    else left = v;
  }
  for (;;) {
    const int64_t want = left ? std::min(*left, kWindow) : kWindow;
    json a = user;
    a["offset"] = off;
    a["length"] = want;
    json result;
    Status s = call(*cl.verb, Args(a), &result, nullptr);
    if (!s.ok()) return PrintOutcome(cl, s, nullptr, o);
    auto data = Base64Decode(result["content_base64"].get<std::string>());
    if (!data.ok()) return PrintOutcome(cl, data.status(), nullptr, o);
    o.Out(*data);
    const auto got = static_cast<int64_t>(data->size());
    off += got;
    if (left) *left -= got;
    if ((left && *left <= 0) || got < want || off >= result["size"].get<int64_t>()) return 0;
  }
}

}  // namespace

int RunCommandLine(const CommandLine& cl, const CallFn& call, const ProgressFn& progress, Output& o) {
  if ((cl.verb->name == "cat" || cl.verb->name == "read_file") && !cl.as_json) return Cat(cl, call, o);
  json result;
  Status s = call(*cl.verb, cl.args, &result, progress);
  return PrintOutcome(cl, s, result, o);
}

}  // namespace layerfs::cli
