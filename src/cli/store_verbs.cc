// Verbs that create and maintain a Store: init, import, fork, branches, branch_delete, stats,
// verify, gc.
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/json_shapes.h"

namespace layerfs::cli {

namespace {

json StatsJson(const StoreStats& s) {
  json j = {{"allocated_bytes", s.allocated_bytes}, {"payload_bytes", s.payload_bytes},
            {"metadata_bytes", s.metadata_bytes},   {"other_bytes", s.other_bytes},
            {"logical_bytes", s.logical_bytes},     {"commits", s.commits},
            {"branches", s.branches},               {"policy", s.policy},
            {"objects", s.objects},                 {"max_chain_depth", s.max_chain_depth},
            {"cf_bytes", s.cf_bytes},               {"pending_objects", s.pending_objects},
            {"pending_bytes", s.pending_bytes}};
  json hist = json::object();
  for (const auto& [kind, h] : s.depth_histogram) {
    json hk = json::object();
    for (const auto& [d, n] : h) hk[std::to_string(d)] = n;
    hist[kind] = hk;
  }
  j["depth_histogram"] = hist;
  return j;
}

std::string Mb(uint64_t b) { return fmt::format("{:.2f} MB", b / 1e6); }

Status NotBusy(Context& ctx, const std::string& branch, const char* what) {
  if (!ctx.mounts) return Status::Ok();
  if (auto mp = ctx.mounts->MountpointOf(branch))
    return Status::Error(EBUSY, fmt::format("branch '{}' is mounted at {}{}", branch, *mp, what));
  return Status::Ok();
}

Verb Init() {
  Verb v;
  v.name = v.cli = "init";
  v.help = "Create a Store with branch main";
  v.protocol = v.mcp = false;  // no Store to be held yet: the CLI runs it itself
  v.args = {{"store", ArgType::kString, "STORE", "Store directory to create", true},
            {"policy", ArgType::kString, "--policy", "Delta-chain caps W/C/M (whole-file/chunk/metadata), default 16/8/8"},
            {"from", ArgType::kString, "--from", "Directory to make the first Commit"},
            {"message", ArgType::kString, "-m,--message", "Message of the first Commit"}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Policy p, Policy::Parse(a.Str("policy", "16/8/8")));
    const std::string from = a.Str("from");
    if (!from.empty()) {
      struct stat sb;
      if (stat(ctx.Abs(from).c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode))
        return Status::NotFound(fmt::format("--from {}: not a directory", from));
    }
    const std::string path = ctx.Abs(a.Str("store"));
    LFS_ASSIGN(auto st, Store::Create(path, p));
    LFS_ASSIGN(auto head, st->BranchHead("main"));
    json r = {{"store", path}, {"policy", p.ToString()}, {"commit", head ? head->Hex() : ""}};
    if (!from.empty()) {
      ImportOptions o;
      o.message = a.Str("message", "initial import");
      if (o.message.empty()) o.message = "initial import";
      o.progress = ctx.progress;
      LFS_ASSIGN(ObjectId id, st->Import(ctx.Abs(from), o));
      r["commit"] = id.Hex();
      r["imported"] = true;
    }
    *result = r;
    return Status::Ok();
  };
  v.text = [](const Args& a, const json& r, Output& o) {
    if (r.value("imported", false)) o.Outf("{}\n", r["commit"].get<std::string>());
  };
  return v;
}

Verb Import() {
  Verb v;
  v.name = v.cli = "import";
  v.help = "Commit a directory's tree as the next Commit of a branch";
  v.progress = true;
  v.args = {{"dir", ArgType::kString, "DIR", "Directory to import", true},
            {"branch", ArgType::kString, "-b,--branch", "Branch (default main)"},
            {"message", ArgType::kString, "-m,--message", "Commit message"},
            {"jobs", ArgType::kInt, "-j,--jobs", "Files read and encoded at once (default: one per core)"},
            {"verbose", ArgType::kBool, "-v,--verbose", "Print what was hashed and stored", false, true}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore());
    ImportOptions o;
    o.branch = a.Str("branch", "main");
    const int64_t jobs = a.Int("jobs", 0);
    if (jobs < 0 || jobs > 1024) return Status::Invalid(fmt::format("--jobs {}: give 1 to 1024 (0: one per core)", jobs));
    o.threads = static_cast<unsigned>(jobs);
    o.message = a.Str("message");
    o.progress = ctx.progress;
    LFS_TRY(NotBusy(ctx, o.branch, "; commit there instead"));
    ImportStats stats;
    LFS_ASSIGN(ObjectId id, st->Import(ctx.Abs(a.Str("dir")), o, &stats));
    LFS_ASSIGN(auto* reg, ctx.Workspaces());
    reg->Drop(o.branch);
    *result = {{"commit", id.Hex()},          {"files", stats.files},
               {"dirs", stats.dirs},          {"hashed", stats.hashed},
               {"stat_hits", stats.stat_hits}, {"objects_added", stats.objects_added},
               {"bytes_added", stats.bytes_added}};
    return Status::Ok();
  };
  v.text = [](const Args& a, const json& r, Output& o) {
    o.Outf("{}\n", r["commit"].get<std::string>());
    if (a.Bool("verbose"))
      o.Errf("files {}, dirs {}, hashed {}, unchanged by stat {}, objects added {} ({} bytes)\n",
             r["files"].get<uint64_t>(), r["dirs"].get<uint64_t>(), r["hashed"].get<uint64_t>(),
             r["stat_hits"].get<uint64_t>(), r["objects_added"].get<uint64_t>(), r["bytes_added"].get<uint64_t>());
  };
  return v;
}

Verb Fork() {
  Verb v;
  v.name = v.cli = "fork";
  v.ref_args = {"from"};
  v.help = "Create branch NEW at FROM (a branch, commit, prefix or REF~N), O(1)";
  v.args = {{"name", ArgType::kString, "NEW", "New branch name", true},
            {"from", ArgType::kString, "FROM", "Where the branch starts (default HEAD: the branch mounted here, else main)"}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore());
    const std::string name = a.Str("name");
    LFS_TRY(st->Fork(name, a.Has("from") ? a.Str("from") : ctx.Head()));
    LFS_ASSIGN(auto head, st->BranchHead(name));
    *result = {{"branch", name}, {"commit", head ? head->Hex() : ""}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json& r, Output& o) {
    o.Outf("{} {}\n", r["branch"].get<std::string>(), r["commit"].get<std::string>());
  };
  return v;
}

Verb Branches() {
  Verb v;
  v.name = "branches";
  v.cli = "branch";
  v.help = "List branches with their heads, delete one, or (as fork) create one";
  v.read_only = true;
  v.args = {{"delete", ArgType::kString, "-d,--delete", "Delete branch NAME", false, true},
            // Git's `branch NEW [START]`: fork.
            {"new", ArgType::kString, "NEW", "Create branch NEW (as `layerfs fork NEW START`)", false, true},
            {"start", ArgType::kString, "START", "Where NEW starts (default HEAD)", false, true}};
  v.run = [](Context& ctx, const Args&, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore(/*read_only_ok=*/true));
    LFS_ASSIGN(auto branches, st->Branches());
    json arr = json::array();
    for (auto& [name, head] : branches) {
      json b = {{"name", name}, {"commit", head.Hex()}};
      if (ctx.mounts)
        if (auto mp = ctx.mounts->MountpointOf(name)) b["mountpoint"] = *mp;
      arr.push_back(std::move(b));
    }
    *result = std::move(arr);
    return Status::Ok();
  };
  v.text = [](const Args&, const json& r, Output& o) {
    for (const auto& b : r) {
      o.Outf("{} {}", b["name"].get<std::string>(), b["commit"].get<std::string>());
      if (b.contains("mountpoint")) o.Outf("  mounted at {}", b["mountpoint"].get<std::string>());
      o.Out("\n");
    }
  };
  v.from_cli = [](std::string* verb, Args* a) -> Status {
    if (a->Has("new")) {
      if (a->Has("delete")) return Status::Invalid("branch takes -d NAME or NEW [START], not both");
      *verb = "fork";
      json args = {{"name", a->Str("new")}};
      if (a->Has("start")) args["from"] = a->Str("start");
      a->raw() = std::move(args);
      return Status::Ok();
    }
    if (a->Has("delete")) {
      *verb = "branch_delete";
      a->raw()["name"] = a->Str("delete");
      a->raw().erase("delete");
    }
    return Status::Ok();
  };
  return v;
}

Verb BranchDelete() {
  Verb v;
  v.name = "branch_delete";
  v.destructive = true;
  v.help = "Delete a branch (its Commits stay until gc frees what no branch reaches)";
  v.args = {{"name", ArgType::kString, "", "Branch to delete", true}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore());
    const std::string name = a.Str("name");
    LFS_TRY(NotBusy(ctx, name, ""));
    LFS_TRY(st->DeleteBranch(name));
    LFS_ASSIGN(auto* reg, ctx.Workspaces());
    reg->Drop(name);
    LFS_TRY(workspace::DropWorkspaceState(*st, name));
    *result = {{"branch", name}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json&, Output&) {};
  return v;
}

Verb Stats() {
  Verb v;
  v.name = v.cli = "stats";
  v.help = "Allocated bytes split payload/metadata/other, objects, chain depths";
  v.read_only = true;
  v.run = [](Context& ctx, const Args&, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore(/*read_only_ok=*/true));
    LFS_ASSIGN(auto s, st->Stats());
    *result = StatsJson(s);
    return Status::Ok();
  };
  v.text = [](const Args&, const json& r, Output& o) {
    auto u = [&](const char* k) { return r[k].get<uint64_t>(); };
    o.Outf("policy {}, {} commits, {} branches\n", r["policy"].get<std::string>(), u("commits"), u("branches"));
    o.Outf("allocated {} = payload {} + metadata {} + other {}\n", Mb(u("allocated_bytes")), Mb(u("payload_bytes")),
           Mb(u("metadata_bytes")), Mb(u("other_bytes")));
    o.Outf("logical {} in all commits ({:.1f}x the allocated bytes)\n", Mb(u("logical_bytes")),
           u("allocated_bytes") ? double(u("logical_bytes")) / u("allocated_bytes") : 0.0);
    for (const auto& [kind, n] : r["objects"].items()) {
      o.Outf("{:<10} {:>8} objects, depths:", kind, n.get<uint64_t>());
      // Depths in numeric order (JSON object keys sort as strings).
      std::map<uint32_t, uint64_t> depths;
      if (r["depth_histogram"].contains(kind))
        for (const auto& [d, cnt] : r["depth_histogram"][kind].items()) depths[std::stoul(d)] = cnt.get<uint64_t>();
      for (const auto& [d, cnt] : depths) o.Outf(" {}:{}", d, cnt);
      o.Out("\n");
    }
    const json& m = r["max_chain_depth"];
    o.Outf("max chain depth whole {}, chunk {}, metadata {}\n", m.value("whole", 0u), m.value("chunk", 0u),
           m.value("metadata", 0u));
  };
  return v;
}

Verb Verify() {
  Verb v;
  v.name = v.cli = "verify";
  v.ref_args = {"commits"};
  v.help = "Read back every object reachable from COMMITs (default all) and check hashes";
  v.read_only = true;
  v.progress = true;
  v.args = {{"commits", ArgType::kStrings, "COMMIT", "Commits to verify (default: the history of every branch and remote-tracking ref)"},
            {"fetch", ArgType::kBool, "--fetch", "Lazy Store: fetch what was never read (verified) and check it too"}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore(/*read_only_ok=*/true));
    std::vector<ObjectId> ids;
    for (const auto& spec : a.Strings("commits")) {
      LFS_ASSIGN(ObjectId id, st->Resolve(spec));
      ids.push_back(id);
    }
    LFS_ASSIGN(auto rep, st->Verify(ids, ctx.progress, a.Bool("fetch")));
    std::vector<std::string> problems = rep.problems;
    json j = {{"commits", rep.commits}, {"objects", rep.objects}, {"bytes", rep.bytes},
              {"pending", rep.pending}, {"missing", rep.missing}};
    if (ids.empty()) {
      // Uncommitted work too: every Workspace's records and the data-log blocks they point at.
      LFS_ASSIGN(auto wr, workspace::VerifyWorkspaces(*st));
      problems.insert(problems.end(), wr.problems.begin(), wr.problems.end());
      j["workspaces"] = wr.workspaces;
      j["data_log_blocks"] = wr.blocks;
      j["data_log_bytes"] = wr.bytes;
    }
    j["ok"] = problems.empty();
    j["problems"] = std::move(problems);
    *result = std::move(j);
    return Status::Ok();
  };
  v.text = [](const Args&, const json& r, Output& o) {
    for (const auto& p : r["problems"]) o.Outf("damaged: {}\n", p.get<std::string>());
    o.Outf("{} commits, {} objects, {} bytes verified", r["commits"].get<uint64_t>(), r["objects"].get<uint64_t>(),
           r["bytes"].get<uint64_t>());
    if (r.contains("workspaces"))
      o.Outf("; {} workspaces, {} data-log blocks ({} bytes)", r["workspaces"].get<uint64_t>(),
             r["data_log_blocks"].get<uint64_t>(), r["data_log_bytes"].get<uint64_t>());
    o.Outf("; {} problems\n", r["problems"].size());
    if (uint64_t missing = r.value("missing", uint64_t{0}))
      o.Outf("{} objects not fetched yet (lazy Store; verify --fetch fetches and checks them)\n", missing);
  };
  v.cli_status = [](const json& r) {
    if (r["ok"].get<bool>()) return Status::Ok();
    return Status::Errorf(EIO, "verify found {} problem(s)", r["problems"].size());
  };
  return v;
}

Verb Gc() {
  Verb v;
  v.name = v.cli = "gc";
  v.help = "Free what no branch reaches any more";
  v.destructive = true;
  v.progress = true;
  v.run = [](Context& ctx, const Args&, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore());
    LFS_ASSIGN(auto roots, workspace::MergeRoots(*st));  // merges stopped on conflicts keep theirs
    LFS_ASSIGN(auto rep, st->Gc(roots, ctx.progress));
    *result = {{"objects_deleted", rep.objects_deleted},
               {"bytes_before", rep.bytes_before},
               {"bytes_after", rep.bytes_after},
               {"missing", rep.missing}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json& r, Output& o) {
    o.Outf("deleted {} objects; allocated {} -> {}\n", r["objects_deleted"].get<uint64_t>(),
           Mb(r["bytes_before"].get<uint64_t>()), Mb(r["bytes_after"].get<uint64_t>()));
    if (uint64_t missing = r.value("missing", uint64_t{0}))
      o.Outf("{} reachable objects not fetched (lazy Store), skipped\n", missing);
  };
  return v;
}

}  // namespace

void AddStoreVerbs(std::vector<Verb>* out) {
  for (auto& v : {Init(), Import(), Fork(), Branches(), BranchDelete(), Stats(), Verify(), Gc()}) out->push_back(v);
}

}  // namespace layerfs::cli
