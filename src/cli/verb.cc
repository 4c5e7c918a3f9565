#include "cli/verb.h"

#include <optional>

#include "cli/cli.h"

namespace layerfs::cli {

const char* ArgTypeName(ArgType t) {
  switch (t) {
    case ArgType::kString: return "a string";
    case ArgType::kInt: return "an integer";
    case ArgType::kBool: return "a boolean";
    case ArgType::kStrings: return "an array of strings";
  }
  return "?";
}

std::string Args::Str(const std::string& name, const std::string& fallback) const {
  return Has(name) ? j_[name].get<std::string>() : fallback;
}

int64_t Args::Int(const std::string& name, int64_t fallback) const {
  return Has(name) ? j_[name].get<int64_t>() : fallback;
}

bool Args::Bool(const std::string& name) const { return Has(name) && j_[name].get<bool>(); }

std::vector<std::string> Args::Strings(const std::string& name) const {
  return Has(name) ? j_[name].get<std::vector<std::string>>() : std::vector<std::string>{};
}

const std::vector<Verb>& Verbs() {
  static const std::vector<Verb> table = [] {
    std::vector<Verb> t;
    AddStoreVerbs(&t);
    AddHistoryVerbs(&t);
    AddWorkspaceVerbs(&t);
    AddFileVerbs(&t);
    AddMergeVerbs(&t);
    AddRemoteVerbs(&t);
    AddClientVerbs(&t);
    return t;
  }();
  return table;
}

const Verb* FindVerb(std::string_view name) {
  for (const auto& v : Verbs())
    if (v.name == name) return &v;
  return nullptr;
}

const Verb* FindCliVerb(std::string_view cli) {
  for (const auto& v : Verbs())
    if (v.cli == cli) return &v;
  return nullptr;
}

namespace {

bool TypeMatches(ArgType t, const json& v) {
  switch (t) {
    case ArgType::kString: return v.is_string();
    case ArgType::kInt: return v.is_number_integer();
    case ArgType::kBool: return v.is_boolean();
    case ArgType::kStrings:
      if (!v.is_array()) return false;
      for (const auto& e : v)
        if (!e.is_string()) return false;
      return true;
  }
  return false;
}

}  // namespace

Status CheckArgs(const Verb& v, const json& args) {
  if (!args.is_object()) return Status::Invalid(fmt::format("{}: args must be a JSON object", v.name));
  for (const auto& [name, value] : args.items()) {
    const ArgSpec* spec = nullptr;
    for (const auto& a : v.args)
      if (a.name == name && !a.cli_only) spec = &a;
    if (!spec) return Status::Invalid(fmt::format("{}: unknown argument '{}'", v.name, name));
    if (value.is_null()) continue;  // absent
    if (!TypeMatches(spec->type, value))
      return Status::Invalid(fmt::format("{}: argument '{}' must be {}, got {}", v.name, name,
                                         ArgTypeName(spec->type), value.type_name()));
    if (spec->type == ArgType::kInt && value.get<int64_t>() < 0)
      return Status::Invalid(fmt::format("{}: argument '{}' must not be negative", v.name, name));
  }
  for (const auto& a : v.args)
    if (a.required && !a.cli_only && (!args.contains(a.name) || args[a.name].is_null()))
      return Status::Invalid(fmt::format("{}: missing argument '{}'", v.name, a.name));
  return Status::Ok();
}

json ArgsSchema(const Verb& v) {
  json props = json::object();
  json required = json::array();
  for (const auto& a : v.args) {
    if (a.cli_only) continue;
    json p;
    switch (a.type) {
      case ArgType::kString: p["type"] = "string"; break;
      case ArgType::kInt: p = {{"type", "integer"}, {"minimum", 0}}; break;
      case ArgType::kBool: p["type"] = "boolean"; break;
      case ArgType::kStrings: p = {{"type", "array"}, {"items", {{"type", "string"}}}}; break;
    }
    p["description"] = a.help;
    props[a.name] = p;
    if (a.required) required.push_back(a.name);
  }
  json s = {{"type", "object"}, {"properties", props}, {"additionalProperties", false}};
  if (!required.empty()) s["required"] = required;
  return s;
}

Status RunVerb(Context& ctx, const Verb& v, const Args& args, json* result) {
  LFS_TRY(CheckArgs(v, args.raw()));
  if (!v.run) return Status::Invalid(fmt::format("{} runs in the client, not in the daemon", v.name));
  try {
    std::optional<Args> expanded;  // a copy only for a verb with Commit arguments
    for (const auto& name : v.ref_args) {
      if (!args.Has(name)) continue;
      if (!expanded) expanded = args;
      json& val = expanded->raw()[name];
      if (val.is_string()) {
        val = ctx.ExpandHead(val.get<std::string>());
      } else {
        for (auto& s : val) s = ctx.ExpandHead(s.get<std::string>());  // kStrings (CheckArgs)
      }
    }
    return v.run(ctx, expanded ? *expanded : args, result);
  } catch (const std::exception& e) {  // json type errors and allocation failures stop here
    return Status::Errorf(EIO, "{}: {}", v.name, e.what());
  }
}

}  // namespace layerfs::cli
