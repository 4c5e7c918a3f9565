// Verbs that read history: log, show, diff, cat, export.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "cli/cli.h"
#include "cli/json_shapes.h"
#include "history/file_content.h"
#include "merge/merge.h"

namespace layerfs::cli {

namespace {

void PrintChanges(const json& d, bool stat, Output& o) {
  size_t counts[256] = {};
  for (const auto& e : d) {
    const char change = e["change"].get<std::string>()[0];
    const std::string path = e["path"].get<std::string>();
    counts[static_cast<unsigned char>(change)]++;
    if (stat) {
      int64_t before = e.contains("before") ? e["before"]["size"].get<int64_t>() : 0;
      int64_t after = e.contains("after") ? e["after"]["size"].get<int64_t>() : 0;
      o.Outf("{} {:<60} {:+} bytes\n", change, path, after - before);
    } else {
      o.Outf("{}\t{}\n", change, path);
    }
  }
  if (stat)
    o.Outf("{} paths changed: {} added, {} removed, {} modified, {} type changed, {} attributes changed\n", d.size(),
           counts[int{'A'}], counts[int{'D'}], counts[int{'M'}], counts[int{'T'}], counts[int{'P'}]);
}

// Git-style lanes, one column per line of history being followed: '*' the commit, '|' the
// others, then "|\\" where a merge opens a lane for its other parent and "|/" where two lanes
// reach the same commit and join.
void PrintGraph(const json& log, Output& o) {
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
    o.Outf("{}{} {} {}\n", row(lanes.size(), col), id.substr(0, 12), FormatTime(c["time"].get<int64_t>()),
           c["message"].get<std::string>());
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

// show's text and log -p's, for one Commit: its header, then its changes or their patches.
void PrintCommit(const json& c, bool patch, Output& o) {
  o.Outf("commit {}\n", c["id"].get<std::string>());
  if (c["parents"].size() > 1) {
    // A merge: the paths are those it changed against its first parent, as `git show
    // --first-parent` lists them.
    std::string m = "merge ";
    for (const auto& p : c["parents"]) m += " " + p.get<std::string>().substr(0, 12);
    o.Outf("{}\n", m);
  }
  for (const auto& p : c["parents"]) o.Outf("parent {}\n", p.get<std::string>());
  o.Outf("tree   {}\ndate   {}\nfiles  {}, {} bytes\n\n    {}\n\n", c["root"].get<std::string>(),
         FormatTime(c["time"].get<int64_t>()), c["files"].get<uint64_t>(), c["logical_bytes"].get<uint64_t>(),
         c["message"].get<std::string>());
  if (patch) PrintPatches(c["changes"], o);
  else PrintChanges(c["changes"], false, o);
}

Verb Log() {
  Verb v;
  v.name = v.cli = "log";
  v.ref_args = {"ref"};
  v.help = "Commits newest first along first parents (--graph: all of history)";
  v.read_only = true;
  v.args = {{"ref", ArgType::kString, "REF", "Where to start (default HEAD: the branch mounted here, else main)"},
            {"max_count", ArgType::kInt, "-n,--max-count", "At most N commits"},
            {"graph", ArgType::kBool, "--graph", "Every commit reachable through all parents, children first, with lanes"},
            {"oneline", ArgType::kBool, "--oneline", "A short id and the message's first line per Commit", false, true},
            kPaths, kPatch};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore(/*read_only_ok=*/true));
    LFS_ASSIGN(ObjectId id, st->Resolve(a.Has("ref") ? a.Str("ref") : ctx.Head()));
    const size_t limit = static_cast<size_t>(a.Int("max_count", 0));
    std::vector<CommitInfo> log;
    std::vector<std::string> paths;  // resolved once (Context::TreePaths reads the mount table)
    if (a.Has("paths")) {
      // The Commits that changed a path against their first parent, along first parents.
      if (a.Bool("graph")) return Status::Invalid("log --graph does not take paths");
      LFS_ASSIGN(paths, ctx.TreePaths(a.Strings("paths")));
      std::optional<ObjectId> cur = id;
      while (cur && (limit == 0 || log.size() < limit)) {
        LFS_ASSIGN(auto c, st->GetCommit(*cur));
        std::optional<ObjectId> parent;
        if (!c.parents.empty()) parent = c.parents[0];
        LFS_ASSIGN(bool changed, PathsChanged(*st, parent, *cur, paths));
        if (changed) log.push_back(c);
        cur = parent;
      }
    } else if (a.Bool("graph")) {
      LFS_ASSIGN(log, st->LogAll(id, limit));
    } else {
      LFS_ASSIGN(log, st->Log(id, limit));
    }
    json arr = json::array();
    uint64_t patch_bytes = 0;
    for (const auto& e : log) {
      json j = CommitJson(e);
      if (a.Bool("patch")) {
        // Each Commit's change against its first parent (none for a root), as show gives it.
        if (a.Bool("graph")) return Status::Invalid("log --graph does not take -p");
        std::vector<DiffEntry> changes;
        if (!e.parents.empty()) {
          LFS_ASSIGN(changes, st->Diff(e.parents[0], e.id));
        }
        if (a.Has("paths"))
          std::erase_if(changes, [&](const DiffEntry& d) { return !PathSelected(d.path, paths); });
        j["changes"] = ChangesJson(changes);
        LFS_TRY(AddPatches(changes, HistoryReader(*st), &j["changes"], &patch_bytes));
      }
      arr.push_back(std::move(j));
    }
    *result = std::move(arr);
    return Status::Ok();
  };
  v.text = [](const Args& a, const json& r, Output& o) {
    if (a.Bool("graph")) return PrintGraph(r, o);
    if (a.Bool("patch")) {
      for (const auto& c : r) PrintCommit(c, true, o);
      return;
    }
    for (const auto& e : r) {
      const std::string id = e["id"].get<std::string>(), msg = e["message"].get<std::string>();
      if (a.Bool("oneline")) o.Outf("{} {}\n", id.substr(0, 12), msg.substr(0, msg.find('\n')));
      else o.Outf("{} {} {}\n", id, FormatTime(e["time"].get<int64_t>()), msg);
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
  v.args = {{"commit", ArgType::kString, "COMMIT", "Commit (default HEAD)"}, kPatch, kPaths};
  v.from_cli = [](std::string* name, Args* a) -> Status {
    // Git's `show REF:PATH` prints the file: that is cat's.
    const std::string spec = a->Str("commit");
    const size_t colon = spec.find(':');
    if (colon == std::string::npos) return Status::Ok();
    if (a->Bool("patch") || a->Has("paths")) return Status::Invalid("show REF:PATH takes neither -p nor paths");
    *name = "cat";
    a->raw() = {{"commit", spec.substr(0, colon)}, {"path", spec.substr(colon + 1)}};
    return Status::Ok();
  };
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore(/*read_only_ok=*/true));
    LFS_ASSIGN(ObjectId id, st->Resolve(a.Has("commit") ? a.Str("commit") : ctx.Head()));
    LFS_ASSIGN(auto c, st->GetCommit(id));
    std::vector<DiffEntry> changes;
    if (!c.parents.empty()) {
      LFS_ASSIGN(changes, st->Diff(c.parents[0], id));
    }
    LFS_TRY(KeepPaths(ctx, a, &changes));
    json j = CommitJson(c);
    j["changes"] = ChangesJson(changes);
    if (a.Bool("patch")) LFS_TRY(AddPatches(changes, HistoryReader(*st), &j["changes"]));
    *result = std::move(j);
    return Status::Ok();
  };
  v.text = [](const Args& a, const json& c, Output& o) { PrintCommit(c, a.Bool("patch"), o); };
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
            kPatch, kPaths};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore(/*read_only_ok=*/true));
    std::string from = a.Str("a"), to = a.Str("b");
    if (from.empty() && !to.empty()) return Status::Invalid("diff takes A B, A...B, A, or nothing");
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
    *result = ChangesJson(d);
    if (a.Bool("patch")) LFS_TRY(AddPatches(d, HistoryReader(*st), result));
    return Status::Ok();
  };
  v.text = [](const Args& a, const json& r, Output& o) {
    if (a.Bool("name_only")) {
      for (const auto& e : r) o.Outf("{}\n", e["path"].get<std::string>());
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
