// Verbs that read history: log, show, diff, cat, export.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include <cstdio>

#include "cli/cli.h"
#include "merge/merge.h"

namespace layerfs::cli {

using nlohmann::json;

namespace {

json CommitJson(const CommitInfo& c) {
  json parents = json::array();
  for (const auto& p : c.parents) parents.push_back(p.Hex());
  return {{"id", c.id.Hex()},           {"parents", parents},         {"message", c.message},
          {"time", c.time_sec},         {"tree", c.root.Hex()},       {"logical_bytes", c.logical_bytes},
          {"files", c.files}};
}

json EntryJson(const TreeEntry& e) {
  json j = {{"type", EntryTypeName(e.type)}, {"mode", fmt::format("{:04o}", e.mode)}, {"size", e.size}};
  if (e.type == EntryType::kFile || e.type == EntryType::kDir) j["id"] = e.id.Hex();
  if (e.type == EntryType::kSymlink) j["target"] = e.target;
  return j;
}

void PrintDiff(Context& ctx, const std::vector<DiffEntry>& d, bool stat, bool as_json) {
  if (as_json) {
    json arr = json::array();
    for (const auto& e : d) {
      json j = {{"path", e.path}, {"change", std::string(1, e.change)}};
      if (e.before) j["before"] = EntryJson(*e.before);
      if (e.after) j["after"] = EntryJson(*e.after);
      arr.push_back(j);
    }
    ctx.Printf("%s\n", arr.dump(2).c_str());
    return;
  }
  size_t counts[256] = {};
  for (const auto& e : d) {
    counts[static_cast<unsigned char>(e.change)]++;
    if (stat) {
      int64_t before = e.before ? static_cast<int64_t>(e.before->size) : 0;
      int64_t after = e.after ? static_cast<int64_t>(e.after->size) : 0;
      ctx.Printf("%c %-60s %+ld bytes\n", e.change, e.path.c_str(), after - before);
    } else {
      ctx.Printf("%c\t%s\n", e.change, e.path.c_str());
    }
  }
  if (stat)
    ctx.Printf("%zu paths changed: %zu added, %zu removed, %zu modified, %zu type changed, %zu attributes changed\n",
                d.size(), counts['A'], counts['D'], counts['M'], counts['T'], counts['P']);
}

// Git-style lanes, one column per line of history being followed: '*' the commit, '|' the
// others, then "|\\" where a merge opens a lane for its other parent and "|/" where two lanes
// reach the same commit and join.
void PrintGraph(Context& ctx, const std::vector<CommitInfo>& log) {
  std::vector<ObjectId> lanes;
  auto row = [&](size_t n, size_t star) {
    std::string r;
    for (size_t i = 0; i < n; i++) r += i == star ? "* " : "| ";
    return r;
  };
  for (const auto& c : log) {
    auto it = std::find(lanes.begin(), lanes.end(), c.id);
    size_t col = it - lanes.begin();
    if (it == lanes.end()) lanes.push_back(c.id);
    // Lanes that were also waiting for this commit join it.
    for (size_t j = lanes.size(); j-- > col + 1;) {
      if (lanes[j] != c.id) continue;
      std::string r;
      for (size_t i = 0; i < lanes.size(); i++) {
        if (i + 1 < j) r += "| ";
        else if (i + 1 == j) r += "|/";
        else if (i > j) r += " /";
      }
      lanes.erase(lanes.begin() + j);
      ctx.Printf("%s\n", r.substr(0, r.find_last_not_of(' ') + 1).c_str());
    }
    std::string line = row(lanes.size(), col);
    ctx.Printf("%s%s %s %s\n", line.c_str(), c.id.Hex().substr(0, 12).c_str(), FormatTime(c.time_sec).c_str(),
               c.message.c_str());
    if (c.parents.empty()) {
      lanes.erase(lanes.begin() + col);
      continue;
    }
    lanes[col] = c.parents[0];
    for (size_t p = 1; p < c.parents.size(); p++) {
      if (std::find(lanes.begin(), lanes.end(), c.parents[p]) != lanes.end()) continue;
      lanes.insert(lanes.begin() + col + p, c.parents[p]);
      std::string r;
      for (size_t i = 0; i + 1 < lanes.size(); i++) r += i == col ? "|\\" : i < col ? "| " : " \\";
      ctx.Printf("%s\n", r.c_str());
    }
  }
}

}  // namespace

void AddHistoryVerbs(CLI::App& app, Context& ctx) {
  {
    auto* c = app.add_subcommand("log", "Commits newest first along first parents (--graph: all of history)");
    auto ref = std::make_shared<std::string>("main");
    auto as_json = std::make_shared<bool>(false);
    auto graph = std::make_shared<bool>(false);
    auto limit = std::make_shared<size_t>(0);
    c->add_option("REF", *ref, "Where to start (default main)");
    c->add_flag("--json", *as_json, "Print a JSON array");
    c->add_flag("--graph", *graph, "Every commit reachable through all parents, children first, with lanes");
    c->add_option("-n,--max-count", *limit, "At most N commits");
    c->callback([&ctx, ref, as_json, graph, limit] {
      ctx.run = [&ctx, ref, as_json, graph, limit]() -> Status {
        LFS_ASSIGN(Store * st, ctx.GetStore());
        LFS_ASSIGN(ObjectId id, st->Resolve(*ref));
        std::vector<CommitInfo> log;
        if (*graph) {
          LFS_ASSIGN(log, st->LogAll(id, *limit));
        } else {
          LFS_ASSIGN(log, st->Log(id, *limit));
        }
        if (*graph && !*as_json) {
          PrintGraph(ctx, log);
        } else if (*as_json) {
          json arr = json::array();
          for (const auto& e : log) arr.push_back(CommitJson(e));
          ctx.Printf("%s\n", arr.dump(2).c_str());
        } else {
          for (const auto& e : log)
            ctx.Printf("%s %s %s\n", e.id.Hex().c_str(), FormatTime(e.time_sec).c_str(), e.message.c_str());
        }
        return Status::Ok();
      };
    });
  }
  {
    auto* c = app.add_subcommand("show", "A Commit's metadata and the paths it changed");
    auto ref = std::make_shared<std::string>();
    auto as_json = std::make_shared<bool>(false);
    c->add_option("COMMIT", *ref, "Commit")->required();
    c->add_flag("--json", *as_json, "Print JSON");
    c->callback([&ctx, ref, as_json] {
      ctx.run = [&ctx, ref, as_json]() -> Status {
        LFS_ASSIGN(Store * st, ctx.GetStore());
        LFS_ASSIGN(ObjectId id, st->Resolve(*ref));
        LFS_ASSIGN(auto c, st->GetCommit(id));
        std::vector<DiffEntry> changes;
        if (!c.parents.empty()) {
          LFS_ASSIGN(changes, st->Diff(c.parents[0], id));
        }
        if (*as_json) {
          json j = CommitJson(c);
          json ch = json::array();
          for (const auto& e : changes) ch.push_back({{"path", e.path}, {"change", std::string(1, e.change)}});
          j["changes"] = ch;
          ctx.Printf("%s\n", j.dump(2).c_str());
          return Status::Ok();
        }
        ctx.Printf("commit %s\n", c.id.Hex().c_str());
        if (c.parents.size() > 1) {
          // A merge: the paths are those it changed against its first parent, as `git show
          // --first-parent` lists them.
          std::string m = "merge ";
          for (const auto& p : c.parents) m += " " + p.Hex().substr(0, 12);
          ctx.Printf("%s\n", m.c_str());
        }
        for (const auto& p : c.parents) ctx.Printf("parent %s\n", p.Hex().c_str());
        ctx.Printf("tree   %s\ndate   %s\nfiles  %lu, %lu bytes\n\n    %s\n\n", c.root.Hex().c_str(),
                    FormatTime(c.time_sec).c_str(), c.files, c.logical_bytes, c.message.c_str());
        PrintDiff(ctx, changes, false, false);
        return Status::Ok();
      };
    });
  }
  {
    auto* c = app.add_subcommand("diff", "Paths added, removed, modified, type- or mode-changed from A to B");
    auto a = std::make_shared<std::string>();
    auto b = std::make_shared<std::string>();
    auto stat = std::make_shared<bool>(false);
    auto as_json = std::make_shared<bool>(false);
    c->add_option("A", *a, "Old commit, or A...B: from the merge base of A and B to B")->required();
    c->add_option("B", *b, "New commit");
    c->add_flag("--stat", *stat, "Sizes and a summary");
    c->add_flag("--json", *as_json, "Print a JSON array");
    c->callback([&ctx, a, b, stat, as_json] {
      ctx.run = [&ctx, a, b, stat, as_json]() -> Status {
        LFS_ASSIGN(Store * st, ctx.GetStore());
        std::string from = *a, to = *b;
        const auto dots = from.find("...");
        if (dots != std::string::npos) {
          if (!to.empty()) return Status::Invalid("diff takes A B or A...B");
          to = from.substr(dots + 3);
          from = from.substr(0, dots);
          if (from.empty() || to.empty()) return Status::Invalid(fmt::format("'{}' is not A...B", *a));
        } else if (to.empty()) {
          return Status::Invalid("diff takes A B or A...B");
        }
        LFS_ASSIGN(ObjectId ia, st->Resolve(from));
        LFS_ASSIGN(ObjectId ib, st->Resolve(to));
        if (dots != std::string::npos) {
          LFS_ASSIGN(auto bases, merge::MergeBases(*st, {ia}, {ib}));
          if (bases.empty()) return Status::NotFound(fmt::format("{} and {} have no common ancestor", from, to));
          ia = bases[0];
        }
        LFS_ASSIGN(auto d, st->Diff(ia, ib));
        PrintDiff(ctx, d, *stat, *as_json);
        return Status::Ok();
      };
    });
  }
  {
    auto* c = app.add_subcommand("cat", "Print a file of a Commit (COMMIT:PATH)");
    auto spec = std::make_shared<std::string>();
    c->add_option("COMMIT:PATH", *spec, "What to print")->required();
    c->callback([&ctx, spec] {
      ctx.run = [&ctx, spec]() -> Status {
        auto colon = spec->find(':');
        if (colon == std::string::npos) return Status::Invalid(fmt::format("'{}' is not COMMIT:PATH", *spec));
        LFS_ASSIGN(Store * st, ctx.GetStore());
        LFS_ASSIGN(ObjectId id, st->Resolve(spec->substr(0, colon)));
        std::string path = spec->substr(colon + 1);
        LFS_ASSIGN(auto e, st->Lookup(id, path));
        std::string data;
        if (e.type == EntryType::kSymlink) data = e.target;
        else if (e.type == EntryType::kDir) return Status::Error(EISDIR, fmt::format("{}: is a directory", path));
        else if (e.type != EntryType::kFile) return Status::Invalid(fmt::format("{}: is a {}", path, EntryTypeName(e.type)));
        else {
          LFS_ASSIGN(data, st->ReadFile(e));
        }
        ctx.out += data;
        return Status::Ok();
      };
    });
  }
  {
    auto* c = app.add_subcommand("export", "Write a Commit's tree into DIR (absent or empty)");
    auto ref = std::make_shared<std::string>();
    auto dir = std::make_shared<std::string>();
    c->add_option("COMMIT", *ref, "Commit")->required();
    c->add_option("DIR", *dir, "Target directory")->required();
    c->callback([&ctx, ref, dir] {
      ctx.run = [&ctx, ref, dir]() -> Status {
        LFS_ASSIGN(Store * st, ctx.GetStore());
        LFS_ASSIGN(ObjectId id, st->Resolve(*ref));
        std::string target = ctx.Abs(*dir);
        struct stat sb;
        if (lstat(target.c_str(), &sb) == 0) {
          if (!S_ISDIR(sb.st_mode)) return Status::Error(ENOTDIR, fmt::format("{} is not a directory", *dir));
          std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(target.c_str()), closedir);
          if (!d) return Status::Errorf(errno, "open {}: {}", *dir, strerror(errno));
          while (dirent* e = readdir(d.get()))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
              return Status::Exists(fmt::format("{} is not empty", *dir));
        }
        return st->Export(id, target);
      };
    });
  }
}

}  // namespace layerfs::cli
