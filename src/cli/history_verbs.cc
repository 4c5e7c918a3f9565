// Verbs that read history: log, show, diff, cat, export.
#include <dirent.h>
#include <regex.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <unordered_set>

#include "cli/cli.h"
#include "cli/json_shapes.h"
#include "history/file_content.h"
#include "merge/merge.h"
#include "merge/patch.h"

namespace layerfs::cli {

namespace {

// Git-style lanes, one column per line of history being followed: '*' the commit, '|' the
// others, then "|\\" where a merge opens a lane for its other parent and "|/" where two lanes
// reach the same commit and join. `line` renders a Commit's text after its lanes.
void PrintGraph(const json& log, const std::function<std::string(const json&)>& line, Output& o) {
  std::vector<std::string> lanes;
  auto row = [&](size_t n, size_t star) {
    std::string r;
    for (size_t i = 0; i < n; i++) r += i == star ? "* " : "| ";
    return r;
  };
  for (const auto& c : log) {
    const std::string id = c["id"].get<std::string>();
    auto it = std::find(lanes.begin(), lanes.end(), id);
    size_t col = it - lanes.begin();
    if (it == lanes.end()) lanes.push_back(id);
    // Lanes that were also waiting for this commit join it.
    for (size_t j = lanes.size(); j-- > col + 1;) {
      if (lanes[j] != id) continue;
      std::string r;
      for (size_t i = 0; i < lanes.size(); i++) {
        if (i + 1 < j) r += "| ";
        else if (i + 1 == j) r += "|/";
        else if (i > j) r += " /";
      }
      lanes.erase(lanes.begin() + j);
      o.Outf("{}\n", r.substr(0, r.find_last_not_of(' ') + 1));
    }
    o.Outf("{}{}\n", row(lanes.size(), col), line(c));
    const json& parents = c["parents"];
    if (parents.empty()) {
      lanes.erase(lanes.begin() + col);
      continue;
    }
    lanes[col] = parents[0].get<std::string>();
    for (size_t p = 1; p < parents.size(); p++) {
      const std::string pid = parents[p].get<std::string>();
      if (std::find(lanes.begin(), lanes.end(), pid) != lanes.end()) continue;
      lanes.insert(lanes.begin() + col + p, pid);
      std::string r;
      for (size_t i = 0; i + 1 < lanes.size(); i++) r += i == col ? "|\\" : i < col ? "| " : " \\";
      o.Outf("{}\n", r);
    }
  }
}

// Git's relative dates ("3 hours ago") for %cr.
std::string RelativeTime(int64_t sec, int64_t now) {
  const int64_t d = now - sec;
  if (d < 0) return "in the future";
  auto ago = [](int64_t n, const char* unit) { return fmt::format("{} {}{} ago", n, unit, n == 1 ? "" : "s"); };
  if (d < 90) return ago(d, "second");
  if (d < 90 * 60) return ago((d + 30) / 60, "minute");
  if (d < 36 * 3600) return ago((d + 1800) / 3600, "hour");
  if (d < 14 * 86400) return ago((d + 43200) / 86400, "day");
  if (d < 70 * 86400) return ago((d + 3 * 86400) / (7 * 86400), "week");
  if (d < 365 * 86400) return ago((d + 15 * 86400) / (30 * 86400), "month");
  return ago(d / (365 * 86400), "year");
}

// A Commit in the placeholders of Git's `--format` (`--pretty=format:`) that have a meaning
// here: %H %h (ids), %T %t (root tree), %P %p (parents), %s (subject: the first line), %b (the
// rest), %B (the whole message), %ct %cd %ci %cI %cr (time as seconds, date, ISO 8601, strict
// ISO 8601, relative; %a* the same: a Commit has one time), %n, %%. Commits record no author:
// %an %ae %cn %ce are empty. Other placeholders stay as written, as Git leaves unknown ones.
std::string FormatCommit(std::string_view f, const json& c) {
  const std::string id = c["id"].get<std::string>(), root = c["root"].get<std::string>();
  const std::string msg = c["message"].get<std::string>();
  const int64_t t = c["time"].get<int64_t>();
  const size_t nl = msg.find('\n');
  const std::string subject = msg.substr(0, nl);
  std::string body;
  if (nl != std::string::npos) {
    body = msg.substr(nl + 1);
    body.erase(0, body.find_first_not_of('\n') == std::string::npos ? body.size() : body.find_first_not_of('\n'));
  }
  auto parents = [&](size_t len) {
    std::string r;
    for (const auto& p : c["parents"]) r += (r.empty() ? "" : " ") + p.get<std::string>().substr(0, len);
    return r;
  };
  auto date = [&](char k) -> std::optional<std::string> {
    time_t tt = t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    char buf[64];
    switch (k) {
      case 't': return std::to_string(t);
      case 'd': strftime(buf, sizeof buf, "%a %b %-d %H:%M:%S %Y +0000", &tm); return std::string(buf);
      case 'i': strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S +0000", &tm); return std::string(buf);
      case 'I': strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S+00:00", &tm); return std::string(buf);
      case 'r': return RelativeTime(t, static_cast<int64_t>(::time(nullptr)));
      case 'n': case 'e': return std::string();  // name, email: not recorded
      default: return std::nullopt;
    }
  };
  std::string out;
  for (size_t i = 0; i < f.size(); i++) {
    if (f[i] != '%' || i + 1 == f.size()) {
      out += f[i];
      continue;
    }
    const char k = f[i + 1];
    std::optional<std::string> v;
    size_t used = 2;
    switch (k) {
      case 'H': v = id; break;
      case 'h': v = id.substr(0, 12); break;
      case 'T': v = root; break;
      case 't': v = root.substr(0, 12); break;
      case 'P': v = parents(64); break;
      case 'p': v = parents(12); break;
      case 's': v = subject; break;
      case 'b': v = body; break;
      case 'B': v = msg; break;
      case 'n': v = "\n"; break;
      case '%': v = "%"; break;
      case 'c': case 'a':
        if (i + 2 < f.size() && (v = date(f[i + 2]))) used = 3;
        break;
      default: break;
    }
    if (!v) {
      out += f[i];
      continue;
    }
    out += *v;
    i += used - 1;
  }
  return out;
}

// A date as Git's --since/--until read them: @SECONDS, YYYY-MM-DD[(T| )HH:MM[:SS]][Z] (UTC),
// "N second(s)|minute(s)|hour(s)|day(s)|week(s)|month(s)|year(s) ago" (dots for spaces too),
// now, today (midnight UTC), yesterday (a day ago).
Result<int64_t> ParseDate(const std::string& text, int64_t now) {
  std::string s = text;
  std::replace(s.begin(), s.end(), '.', ' ');
  auto bad = [&] {
    return Status::Invalid(fmt::format("cannot read the date '{}': use YYYY-MM-DD[ HH:MM[:SS]], @SECONDS, "
                                       "'N hours ago' (seconds ... years), now, today or yesterday", text));
  };
  if (s == "now") return now;
  if (s == "today") return now - now % 86400;
  if (s == "yesterday") return now - 86400;
  if (s.size() > 1 && s[0] == '@') {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data() + 1, s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) return bad();
    return v;
  }
  {
    long long n = 0;
    char unit[16] = {}, ago[8] = {};
    int used = 0;
    if (sscanf(s.c_str(), "%lld %15[a-z] %7[a-z]%n", &n, unit, ago, &used) == 3 && used == static_cast<int>(s.size()) &&
        std::string(ago) == "ago" && n >= 0) {
      std::string u = unit;
      if (u.size() > 1 && u.back() == 's') u.pop_back();
      static const std::pair<const char*, int64_t> kUnits[] = {{"second", 1},     {"minute", 60},      {"hour", 3600},
                                                               {"day", 86400},    {"week", 7 * 86400}, {"month", 30 * 86400},
                                                               {"year", 365 * 86400}};
      for (const auto& [name, secs] : kUnits)
        if (u == name) return now - static_cast<int64_t>(n) * secs;
      return bad();
    }
  }
  struct tm tm = {};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, used = 0;
  const char* c = s.c_str();
  if (sscanf(c, "%4d-%2d-%2d%n", &y, &mo, &d, &used) != 3 || used != 10) return bad();
  std::string rest = s.substr(10);
  if (!rest.empty() && rest.back() == 'Z') rest.pop_back();
  if (rest.size() >= 6 && rest.compare(rest.size() - 6, 6, "+00:00") == 0) rest.resize(rest.size() - 6);
  if (!rest.empty()) {
    if (rest[0] != ' ' && rest[0] != 'T') return bad();
    int n2 = 0;
    if (sscanf(rest.c_str() + 1, "%2d:%2d%n", &h, &mi, &n2) != 2) return bad();
    int more = 0;
    if (rest[1 + n2] == ':' && sscanf(rest.c_str() + 2 + n2, "%2d%n", &sec, &more) == 1) n2 += 1 + more;
    if (static_cast<size_t>(1 + n2) != rest.size()) return bad();
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return bad();
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  return static_cast<int64_t>(timegm(&tm));
}

// Git's named formats that read as one line; the others (medium, full...) print as show does.
std::optional<std::string> NamedFormat(const std::string& name) {
  if (name == "oneline") return "%H %s";
  if (name == "reference") return "%h (%s, %cd)";
  return std::nullopt;
}

// Whether the entries at `paths` differ between Commits a (nullopt: none, a root Commit's parent)
// and b: type, content, mode or target; a path absent on one side differs.
Result<bool> PathsChanged(Store& st, const std::optional<ObjectId>& a, const ObjectId& b,
                          const std::vector<std::string>& paths) {
  auto at = [&](const ObjectId& c, const std::string& p) -> Result<std::optional<TreeEntry>> {
    auto e = st.Lookup(c, p);
    if (e.ok()) return std::optional<TreeEntry>(std::move(*e));
    if (e.status().code() == ENOENT || e.status().code() == ENOTDIR) return std::optional<TreeEntry>();
    return e.status();
  };
  for (const auto& p : paths) {
    LFS_ASSIGN(auto eb, at(b, p));
    std::optional<TreeEntry> ea;
    if (a) {
      LFS_ASSIGN(ea, at(*a, p));
    }
    if (ea.has_value() != eb.has_value()) return true;
    if (ea && (ea->type != eb->type || ea->id != eb->id || ea->mode != eb->mode || ea->target != eb->target))
      return true;
  }
  return false;
}

const ArgSpec kPatch = {"patch", ArgType::kBool, "-p,--patch",
                        "Each change as Git's unified diff (\"patch\" in each change's JSON)"};

// show's header for one Commit: id, parents, tree, date, size, message.
void PrintCommitHeader(const json& c, Output& o) {
  o.Outf("commit {}\n", c["id"].get<std::string>());
  if (c["parents"].size() > 1) {
    // A merge: the paths are those it changed against its first parent, as `git show
    // --first-parent` lists them.
    std::string m = "merge ";
    for (const auto& p : c["parents"]) m += " " + p.get<std::string>().substr(0, 12);
    o.Outf("{}\n", m);
  }
  for (const auto& p : c["parents"]) o.Outf("parent {}\n", p.get<std::string>());
  // The message indented by four, every line of it, as Git shows one.
  std::string msg = c["message"].get<std::string>(), indented;
  for (size_t at = 0; at <= msg.size();) {
    size_t nl = msg.find('\n', at);
    if (nl == std::string::npos) nl = msg.size();
    indented += "    " + msg.substr(at, nl - at) + "\n";
    at = nl + 1;
  }
  o.Outf("tree   {}\ndate   {}\nfiles  {}, {} bytes\n\n{}\n", c["root"].get<std::string>(),
         FormatTime(c["time"].get<int64_t>()), c["files"].get<uint64_t>(), c["logical_bytes"].get<uint64_t>(),
         indented);
}

// log's --format/--pretty: a named format or format:/tformat:/text with placeholders, as the
// format string FormatCommit takes, with whether each Commit's text ends in a newline (tformat,
// Git's default for a string with %) or separates (format:). Empty: show's header (medium, full
// and the other multi-line names).
struct LogFormat {
  std::string text;
  bool terminator = true;
  bool one_line = false;  // oneline, reference: changes follow without a blank line, as in Git
};
Result<LogFormat> ParseLogFormat(const std::string& f) {
  if (f.rfind("format:", 0) == 0) return LogFormat{f.substr(7), false};
  if (f.rfind("tformat:", 0) == 0) return LogFormat{f.substr(8), true};
  if (auto named = NamedFormat(f)) return LogFormat{*named, true, true};
  for (const char* n : {"short", "medium", "full", "fuller", "raw"})
    if (f == n) return LogFormat{};
  if (f.find('%') != std::string::npos) return LogFormat{f, true};
  return Status::Invalid(fmt::format("invalid --format '{}': oneline, reference, short, medium, full, fuller, raw, "
                                     "or format:TEXT with placeholders (%H %h %s %b %B %cd %ct ...)", f));
}

Verb Log() {
  Verb v;
  v.name = v.cli = "log";
  v.ref_args = {"ref"};
  v.help = "Commits newest first along first parents (--graph, --all: through all parents)";
  v.read_only = true;
  v.args = {{"ref", ArgType::kString, "REF",
             "Where to start (default HEAD: the branch mounted here, else main); A..B: what B reaches and A does not; "
             "A...B: what one of them reaches and not both"},
            {"max_count", ArgType::kInt, "-n,--max-count", "At most N commits"},
            {"graph", ArgType::kBool, "--graph", "Every commit reachable through all parents, children first, with lanes"},
            {"all", ArgType::kBool, "--all",
             "From every branch and remote-tracking ref (and REF, if given), through all parents, children first"},
            {"reverse", ArgType::kBool, "--reverse", "Oldest first (after -n has chosen the newest)"},
            {"changes", ArgType::kBool, "--name-status",
             "Each Commit's changed paths against its first parent (\"changes\"; a root Commit's: all added)"},
            {"stat", ArgType::kBool, "--stat", "Each Commit's changed paths with sizes and a summary", false, true},
            {"name_only", ArgType::kBool, "--name-only", "Each Commit's changed paths, one per line", false, true},
            {"oneline", ArgType::kBool, "--oneline", "A short id and the message's first line per Commit", false, true},
            {"format", ArgType::kString, "--format,--pretty",
             "Git's named formats (oneline, reference, medium...) or format:TEXT with %H %h %s %b %B %P %T %cd "
             "%ct %ci %cI %cr %n",
             false, true},
            {"grep", ArgType::kString, "--grep", "Only Commits whose message matches this extended regular expression"},
            {"ignore_case", ArgType::kBool, "-i,--regexp-ignore-case", "--grep ignoring case"},
            {"since", ArgType::kString, "--since,--after",
             "Only Commits made at or after this date: YYYY-MM-DD[ HH:MM[:SS]] (UTC), @SECONDS, 'N hours ago'..."},
            {"until", ArgType::kString, "--until,--before", "Only Commits made at or before this date (as --since)"},
            kRenames, kPaths, kPatch};
  v.from_cli = [](std::string*, Args* a) -> Status {
    if (a->Bool("stat") || a->Bool("name_only")) a->raw()["changes"] = true;
    if (a->Has("format")) LFS_TRY(ParseLogFormat(a->Str("format")).status());
    return Status::Ok();
  };
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore(/*read_only_ok=*/true));
    std::vector<ObjectId> starts;
    // Git's ranges: A..B, the Commits B reaches and A does not; A...B, those one of them reaches
    // and not both. Either walks all parents.
    std::unordered_set<ObjectId, ObjectIdHash> excluded;
    bool range = false;
    const std::string ref = a.Str("ref");
    if (const size_t dots = ref.find(".."); dots != std::string::npos) {
      const bool three = ref.compare(dots, 3, "...") == 0;
      const std::string l = ref.substr(0, dots), r = ref.substr(dots + (three ? 3 : 2));
      if (l.empty() || r.empty() || r.find("..") != std::string::npos)
        return Status::Invalid(fmt::format("'{}' is not A..B or A...B", ref));
      LFS_ASSIGN(ObjectId left, st->Resolve(l));
      LFS_ASSIGN(ObjectId right, st->Resolve(r));
      LFS_ASSIGN(auto from_left, st->LogAll(left));
      for (const auto& c : from_left) excluded.insert(c.id);
      if (three) {
        LFS_ASSIGN(auto from_right, st->LogAll(right));
        std::unordered_set<ObjectId, ObjectIdHash> both;
        for (const auto& c : from_right)
          if (excluded.count(c.id)) both.insert(c.id);
        excluded = std::move(both);
        starts.push_back(left);
      }
      starts.push_back(right);
      range = true;
    } else if (!a.Bool("all") || a.Has("ref")) {
      LFS_ASSIGN(ObjectId id, st->Resolve(a.Has("ref") ? ref : ctx.Head()));
      starts.push_back(id);
    }
    if (a.Bool("all")) {
      LFS_ASSIGN(auto branches, st->Branches());
      LFS_ASSIGN(auto remote, st->RemoteRefs());
      for (const auto& [name, id] : branches) starts.push_back(id);
      for (const auto& [name, id] : remote) starts.push_back(id);
    }
    const size_t limit = static_cast<size_t>(a.Int("max_count", 0));
    if (a.Int("max_count", 0) < 0) return Status::Invalid("log: -n takes a count of 0 or more");
    const bool all_parents = a.Bool("graph") || a.Bool("all") || range;
    // Filters: paths, the message, the time. Git applies -n to what they let through.
    std::vector<std::string> paths;  // resolved once (Context::TreePaths reads the mount table)
    if (a.Has("paths")) {
      LFS_ASSIGN(paths, ctx.TreePaths(a.Strings("paths")));
    }
    std::optional<regex_t> re;
    std::unique_ptr<regex_t, void (*)(regex_t*)> re_hold(nullptr, regfree);
    if (a.Has("grep")) {
      re.emplace();
      const int rc = regcomp(&*re, a.Str("grep").c_str(), REG_EXTENDED | REG_NOSUB | (a.Bool("ignore_case") ? REG_ICASE : 0));
      if (rc != 0) {
        char why[256];
        regerror(rc, &*re, why, sizeof why);
        return Status::Invalid(fmt::format("--grep '{}': {}", a.Str("grep"), why));
      }
      re_hold.reset(&*re);
    }
    const int64_t now = static_cast<int64_t>(::time(nullptr));
    std::optional<int64_t> since, until;
    if (a.Has("since")) {
      LFS_ASSIGN(since, ParseDate(a.Str("since"), now));
    }
    if (a.Has("until")) {
      LFS_ASSIGN(until, ParseDate(a.Str("until"), now));
    }
    const bool filtered = a.Has("paths") || re || since || until || range;
    if (a.Bool("graph") && filtered)
      return Status::Invalid("log --graph does not take paths, --grep, --since, --until or a range");
    auto keep = [&](const CommitInfo& c) -> Result<bool> {
      if (excluded.count(c.id)) return false;
      if (re && regexec(&*re, c.message.c_str(), 0, nullptr, 0) != 0) return false;
      if (since && c.time_sec < *since) return false;
      if (until && c.time_sec > *until) return false;
      if (!a.Has("paths")) return true;
      // Changed one of the paths against its first parent.
      std::optional<ObjectId> parent;
      if (!c.parents.empty()) parent = c.parents[0];
      return PathsChanged(*st, parent, c.id, paths);
    };
    std::vector<CommitInfo> log;
    if (!filtered) {
      if (all_parents) {
        LFS_ASSIGN(log, st->LogAll(starts, limit));
      } else {
        LFS_ASSIGN(log, st->Log(starts[0], limit));
      }
    } else if (all_parents) {
      LFS_ASSIGN(auto every, st->LogAll(starts));
      for (auto& c : every) {
        if (limit != 0 && log.size() >= limit) break;
        LFS_ASSIGN(bool kept, keep(c));
        if (kept) log.push_back(std::move(c));
      }
    } else {
      // Along first parents, reading one Commit at a time (stops at the limit).
      std::optional<ObjectId> cur = starts[0];
      while (cur && (limit == 0 || log.size() < limit)) {
        LFS_ASSIGN(auto c, st->GetCommit(*cur));
        cur.reset();
        if (!c.parents.empty()) cur = c.parents[0];
        LFS_ASSIGN(bool kept, keep(c));
        if (kept) log.push_back(std::move(c));
      }
    }
    if (a.Bool("reverse")) {
      if (a.Bool("graph")) return Status::Invalid("log --graph does not take --reverse");
      std::reverse(log.begin(), log.end());
    }
    const bool patch = a.Bool("patch");
    if (patch && a.Bool("graph")) return Status::Invalid("log --graph does not take -p");
    if (a.Bool("changes") && a.Bool("graph")) return Status::Invalid("log --graph does not list changes");
    if (a.Bool("renames") && !a.Bool("changes") && !patch)
      return Status::Invalid("log -M needs a listing of changes: --name-status, --stat, --name-only or -p");
    json arr = json::array();
    uint64_t patch_bytes = 0;
    for (const auto& e : log) {
      json j = CommitJson(e);
      if (patch || a.Bool("changes")) {
        // Each Commit's change against its first parent (a root Commit's: its tree, added), as
        // show gives it.
        LFS_ASSIGN(auto changes, st->DiffParent(e));
        if (a.Has("paths"))
          std::erase_if(changes, [&](const DiffEntry& d) { return !PathSelected(d.path, paths); });
        LFS_TRY(FindRenamesIf(a, &changes, HistoryReader(*st)));
        j["changes"] = ChangesJson(changes);
        if (patch) LFS_TRY(AddPatches(changes, HistoryReader(*st), &j["changes"], &patch_bytes));
      }
      arr.push_back(std::move(j));
    }
    *result = std::move(arr);
    return Status::Ok();
  };
  v.text = [](const Args& a, const json& r, Output& o) {
    std::optional<LogFormat> format;
    if (a.Bool("oneline")) format = LogFormat{"%h %s", true, true};
    if (a.Has("format")) {
      auto f = ParseLogFormat(a.Str("format"));  // checked by from_cli
      if (f.ok()) format = *f;
    }
    if (format && format->text.empty()) format.reset();  // medium, full...: show's header
    if (a.Bool("graph")) {
      return PrintGraph(r, [&](const json& c) {
        if (format) return FormatCommit(format->text, c);
        return fmt::format("{} {} {}", c["id"].get<std::string>().substr(0, 12),
                           FormatTime(c["time"].get<int64_t>()), c["message"].get<std::string>());
      }, o);
    }
    const bool listed = a.Bool("patch") || a.Bool("stat") || a.Bool("name_only") || a.Bool("changes");
    const bool headers = listed || (a.Has("format") && !format);
    for (size_t i = 0; i < r.size(); i++) {
      const json& c = r[i];
      const bool last = i + 1 == r.size();
      if (format) {
        o.Outf("{}{}", FormatCommit(format->text, c), format->terminator || !last ? "\n" : "");
        if (listed && !c["changes"].empty() && !format->one_line) o.Out("\n");
      } else if (headers) {
        PrintCommitHeader(c, o);
      } else {
        o.Outf("{} {} {}\n", c["id"].get<std::string>(), FormatTime(c["time"].get<int64_t>()),
               c["message"].get<std::string>());
        continue;
      }
      if (!listed) continue;
      if (a.Bool("name_only")) {
        for (const auto& e : c["changes"]) o.Outf("{}\n", merge::GitQuote(e["path"].get<std::string>()));
      } else if (a.Bool("stat") || a.Bool("changes")) {
        PrintChanges(c["changes"], a.Bool("stat"), o);
      }
      if (a.Bool("patch")) PrintPatches(c["changes"], o);
      // Git's blank line between one Commit's header and changes and the next Commit.
      if (!format && !last) o.Out("\n");
    }
  };
  return v;
}

// Git's `rev-parse REF`: the Commit id a REF names (scripts: `id=$(layerfs rev-parse HEAD)`).
Verb RevParse() {
  Verb v;
  v.name = "rev_parse";
  v.cli = "rev-parse";
  v.ref_args = {"ref"};
  v.help = "Print the Commit id REF names (a branch, REMOTE/BRANCH, id prefix, HEAD, REF~N, REF^N)";
  v.read_only = true;
  v.args = {{"ref", ArgType::kString, "REF", "What to resolve", true}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore(/*read_only_ok=*/true));
    LFS_ASSIGN(ObjectId id, st->Resolve(a.Str("ref")));
    *result = {{"ref", a.Str("ref")}, {"commit", id.Hex()}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json& r, Output& o) { o.Outf("{}\n", r["commit"].get<std::string>()); };
  return v;
}

Verb Show() {
  Verb v;
  v.name = v.cli = "show";
  v.ref_args = {"commit"};
  v.help = "A Commit's metadata and the paths it changed (REF:PATH: the file, as cat)";
  v.read_only = true;
  v.args = {{"commit", ArgType::kString, "COMMIT", "Commit (default HEAD)"}, kPatch, kRenames, kPaths,
            {"stat", ArgType::kBool, "--stat", "The changed paths with sizes and a summary", false, true},
            {"name_only", ArgType::kBool, "--name-only", "Only the changed paths, one per line", false, true},
            {"name_status", ArgType::kBool, "--name-status", "The change and the path of each (the default)", false, true},
            {"no_patch", ArgType::kBool, "-s,--no-patch", "The Commit alone, without its changes", false, true},
            {"format", ArgType::kString, "--format,--pretty", "The Commit's line as log --format gives it", false, true}};
  v.from_cli = [](std::string* name, Args* a) -> Status {
    // Git's `show REF:PATH` prints the file: that is cat's.
    const std::string spec = a->Str("commit");
    const size_t colon = spec.find(':');
    if (a->Has("format")) LFS_TRY(ParseLogFormat(a->Str("format")).status());
    if (colon == std::string::npos) return Status::Ok();
    if (a->Bool("patch") || a->Has("paths") || a->Bool("renames"))
      return Status::Invalid("show REF:PATH takes neither -p, -M nor paths");
    *name = "cat";
    a->raw() = {{"commit", spec.substr(0, colon)}, {"path", spec.substr(colon + 1)}};
    return Status::Ok();
  };
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore(/*read_only_ok=*/true));
    LFS_ASSIGN(ObjectId id, st->Resolve(a.Has("commit") ? a.Str("commit") : ctx.Head()));
    LFS_ASSIGN(auto c, st->GetCommit(id));
    LFS_ASSIGN(auto changes, st->DiffParent(c));  // a root Commit: its tree, added
    LFS_TRY(KeepPaths(ctx, a, &changes));
    LFS_TRY(FindRenamesIf(a, &changes, HistoryReader(*st)));
    json j = CommitJson(c);
    j["changes"] = ChangesJson(changes);
    if (a.Bool("patch")) LFS_TRY(AddPatches(changes, HistoryReader(*st), &j["changes"]));
    *result = std::move(j);
    return Status::Ok();
  };
  v.text = [](const Args& a, const json& c, Output& o) {
    std::optional<LogFormat> format;
    if (a.Has("format")) {
      auto f = ParseLogFormat(a.Str("format"));  // checked by from_cli
      if (f.ok() && !f->text.empty()) format = *f;
    }
    if (!format) {
      PrintCommitHeader(c, o);
    } else {
      o.Outf("{}\n", FormatCommit(format->text, c));
      if (!a.Bool("no_patch") && !c["changes"].empty() && !format->one_line) o.Out("\n");
    }
    if (a.Bool("no_patch")) return;
    if (a.Bool("name_only")) {
      for (const auto& e : c["changes"]) o.Outf("{}\n", merge::GitQuote(e["path"].get<std::string>()));
    } else if (a.Bool("stat")) {
      PrintChanges(c["changes"], true, o);
    } else if (a.Bool("patch")) {
      PrintPatches(c["changes"], o);
    } else {
      PrintChanges(c["changes"], false, o);
    }
  };
  return v;
}

// Git's `diff A`: from Commit `from` to the working tree, HEAD's (Context::Head): the Workspace
// of the branch mounted writable at the working directory (else main's, mounted or not; its
// mount's writes settled first), or the Commit of a read-only mount there.
Status DiffWorkingTree(Context& ctx, const Args& a, const std::string& from, Store* st, json* result) {
  const std::string head = ctx.Head();
  LFS_ASSIGN(ObjectId ia, st->Resolve(from.empty() ? head : from));
  LFS_ASSIGN(auto branch_head, st->BranchHead(head));
  std::vector<DiffEntry> changes;
  SideReader read = HistoryReader(*st);
  std::shared_ptr<workspace::Workspace> ws;
  if (!branch_head) {  // a read-only mount: its Commit is the tree
    LFS_ASSIGN(ObjectId ib, st->Resolve(head));
    LFS_ASSIGN(changes, st->Diff(ia, ib));
  } else {
    LFS_TRY(SettleMount(ctx, head, ""));
    LFS_ASSIGN(auto* reg, ctx.Workspaces());
    LFS_ASSIGN(ws, reg->Get(head));
    LFS_ASSIGN(changes, ws->Changes(ia));
    read = WorkingTreeReader(*st, *ws);
  }
  LFS_TRY(KeepPaths(ctx, a, &changes));
  LFS_TRY(FindRenamesIf(a, &changes, read));
  *result = ChangesJson(changes);
  if (a.Bool("patch")) LFS_TRY(AddPatches(changes, read, result));
  return Status::Ok();
}

Verb Diff() {
  Verb v;
  v.name = v.cli = "diff";
  v.ref_args = {"a", "b"};
  v.help = "Paths added, removed, modified, type- or mode-changed from A to B (without B: to the working tree)";
  v.read_only = true;
  v.args = {{"a", ArgType::kString, "A",
             "Old commit, or A...B: from the merge base of A and B to B (none: HEAD, as `git diff`)"},
            {"b", ArgType::kString, "B", "New commit (none: HEAD's working tree, as `git diff A`)"},
            {"stat", ArgType::kBool, "--stat", "Sizes and a summary", false, true},
            {"name_only", ArgType::kBool, "--name-only", "Only the paths, one per line", false, true},
            {"name_status", ArgType::kBool, "--name-status", "The change and the path of each (the default)", false, true},
            // Git's staged changes: there is no index, every change is what a commit records.
            {"cached", ArgType::kBool, "--cached,--staged", "Accepted as in Git: there is no index, so the same", false, true},
            kPatch, kRenames, kPaths};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore(/*read_only_ok=*/true));
    std::string from = a.Str("a"), to = a.Str("b");
    if (from.empty() && !to.empty()) return Status::Invalid("diff takes A B, A...B, A, or nothing");
    if (const auto two = from.find(".."); two != std::string::npos && from.find("...") == std::string::npos) {
      // Git's diff A..B is diff A B.
      if (!to.empty()) return Status::Invalid("diff takes A B, A..B, A...B, A, or nothing");
      to = from.substr(two + 2);
      from = from.substr(0, two);
      if (from.empty() || to.empty()) return Status::Invalid(fmt::format("'{}' is not A..B", a.Str("a")));
    }
    const auto dots = from.find("...");
    if (dots != std::string::npos) {
      if (!to.empty()) return Status::Invalid("diff takes A B, A...B, A, or nothing");
      to = from.substr(dots + 3);
      from = from.substr(0, dots);
      if (from.empty() || to.empty()) return Status::Invalid(fmt::format("'{}' is not A...B", a.Str("a")));
    } else if (to.empty()) {
      return DiffWorkingTree(ctx, a, from, st, result);
    }
    LFS_ASSIGN(ObjectId ia, st->Resolve(from));
    LFS_ASSIGN(ObjectId ib, st->Resolve(to));
    if (dots != std::string::npos) {
      LFS_ASSIGN(auto bases, merge::MergeBases(*st, {ia}, {ib}));
      if (bases.empty()) return Status::NotFound(fmt::format("{} and {} have no common ancestor", from, to));
      ia = bases[0];
    }
    LFS_ASSIGN(auto d, st->Diff(ia, ib));
    LFS_TRY(KeepPaths(ctx, a, &d));
    LFS_TRY(FindRenamesIf(a, &d, HistoryReader(*st)));
    *result = ChangesJson(d);
    if (a.Bool("patch")) LFS_TRY(AddPatches(d, HistoryReader(*st), result));
    return Status::Ok();
  };
  v.text = [](const Args& a, const json& r, Output& o) {
    if (a.Bool("name_only")) {
      for (const auto& e : r) o.Outf("{}\n", merge::GitQuote(e["path"].get<std::string>()));
    } else if (a.Bool("patch") && !a.Bool("stat")) {
      PrintPatches(r, o);
    } else {
      PrintChanges(r, a.Bool("stat"), o);
    }
  };
  return v;
}

Verb Cat() {
  Verb v;
  v.name = v.cli = "cat";
  v.ref_args = {"commit"};
  v.help = "Print a file of a Commit (COMMIT:PATH)";
  v.read_only = true;
  v.args = {{"spec", ArgType::kString, "COMMIT:PATH", "What to print", true, true},
            {"commit", ArgType::kString, "", "Commit (any REF)", true},
            {"path", ArgType::kString, "", "Path in the Commit's tree", true},
            {"offset", ArgType::kInt, "", "First byte to return (default 0)"},
            {"length", ArgType::kInt, "", "At most this many bytes (default: to the end)"}};
  v.from_cli = [](std::string*, Args* a) -> Status {
    const std::string spec = a->Str("spec");
    auto colon = spec.find(':');
    if (colon == std::string::npos) return Status::Invalid(fmt::format("'{}' is not COMMIT:PATH", spec));
    a->raw()["commit"] = spec.substr(0, colon);
    a->raw()["path"] = spec.substr(colon + 1);
    a->raw().erase("spec");
    return Status::Ok();
  };
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore(/*read_only_ok=*/true));
    LFS_ASSIGN(ObjectId id, st->Resolve(a.Str("commit")));
    const std::string path = a.Str("path");
    LFS_ASSIGN(auto e, st->Lookup(id, path));
    const uint64_t off = static_cast<uint64_t>(a.Int("offset", 0));
    uint64_t len = 0;
    std::string data;
    if (e.type == EntryType::kDir) return Status::Error(EISDIR, fmt::format("{}: is a directory", path));
    if (e.type != EntryType::kFile && e.type != EntryType::kSymlink)
      return Status::Invalid(fmt::format("{}: is a {}", path, EntryTypeName(e.type)));
    const uint64_t size = e.type == EntryType::kSymlink ? e.target.size() : e.size;
    len = off >= size ? 0 : size - off;
    if (a.Has("length")) len = std::min<uint64_t>(len, static_cast<uint64_t>(a.Int("length")));
    if (len > kMaxContent)
      return Status::Errorf(kTooLarge, "{} is {} bytes: read it in pieces of at most {} bytes with offset and length",
                            path, size, kMaxContent);
    if (e.type == EntryType::kSymlink) {
      data = e.target.substr(std::min<uint64_t>(off, size), len);
    } else if (len > 0) {
      LFS_ASSIGN(data, history::ReadContentRange(st->objects(), e.id, e.chunked, off, len));
    }
    *result = {{"path", path},
               {"type", EntryTypeName(e.type)},
               {"size", size},
               {"content_base64", Base64Encode(data)}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json& r, Output& o) {
    auto data = Base64Decode(r["content_base64"].get<std::string>());
    if (data.ok()) o.Out(*data);
  };
  return v;
}

Verb Export() {
  Verb v;
  v.name = v.cli = "export";
  v.ref_args = {"commit"};
  v.help = "Write a Commit's tree into DIR (absent or empty)";
  v.progress = true;
  v.args = {{"commit", ArgType::kString, "COMMIT", "Commit", true},
            {"dir", ArgType::kString, "DIR", "Target directory (absent or empty)", true}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore(/*read_only_ok=*/true));
    LFS_ASSIGN(ObjectId id, st->Resolve(a.Str("commit")));
    const std::string dir = a.Str("dir");
    const std::string target = ctx.Abs(dir);
    struct stat sb;
    if (lstat(target.c_str(), &sb) == 0) {
      if (!S_ISDIR(sb.st_mode)) return Status::Error(ENOTDIR, fmt::format("{} is not a directory", dir));
      std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(target.c_str()), closedir);
      if (!d) return Status::Errorf(errno, "open {}: {}", dir, strerror(errno));
      while (dirent* e = readdir(d.get()))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) return Status::Exists(fmt::format("{} is not empty", dir));
    }
    LFS_ASSIGN(auto c, st->GetCommit(id));
    LFS_TRY(st->Export(id, target, ctx.progress));
    *result = {{"commit", id.Hex()}, {"dir", target}, {"files", c.files}, {"bytes", c.logical_bytes}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json&, Output&) {};
  return v;
}

}  // namespace

void AddHistoryVerbs(std::vector<Verb>* out) {
  for (auto& v : {Log(), RevParse(), Show(), Diff(), Cat(), Export()}) out->push_back(v);
}

}  // namespace layerfs::cli
