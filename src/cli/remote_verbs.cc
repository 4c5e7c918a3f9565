// The remote verbs: remote_list (`layerfs remote [-v]`), remote_add, remote_remove, push,
// fetch, pull, clone. Each is a library call of src/remote (remote/sync.h, remote/config.h) that
// returns a typed result; the protocol's result (and --json) and the CLI's text are both made
// from it here (docs/design.md, "Remotes": "Verbs, results, progress"). Transfers report
// progress through the Context (events over the protocol, a line on a terminal's stderr).
//
// Failures that have a result carry it: a push with a refused branch is NOT_FAST_FORWARD (or
// ESTALE when the branch lost a compare-and-swap race) with the push's result; a pull stopped on
// conflicts is CONFLICT with the pull's.
#include <fcntl.h>
#include <unistd.h>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/json_shapes.h"
#include "remote/config.h"
#include "remote/lazy.h"
#include "remote/sync.h"

namespace layerfs::cli {

using nlohmann::json;

namespace {

json RefsJson(const std::vector<remote::RefUpdate>& refs) {
  json a = json::array();
  for (const auto& r : refs) {
    json j = {{"branch", r.branch}, {"old", IdOrNull(r.old_id)}, {"new", IdOrNull(r.new_id)}, {"status", r.status}};
    if (!r.reason.empty()) j["reason"] = r.reason;
    a.push_back(j);
  }
  return a;
}

json TransferJson(const remote::TransferStats& s) {
  return {{"objects", s.objects}, {"bytes", s.bytes}, {"packs", s.packs}, {"indexes", s.indexes}, {"seconds", s.seconds}};
}

json FetchJson(const remote::FetchResult& f) {
  return {{"remote", f.remote}, {"url", f.url}, {"lazy", f.lazy}, {"refs", RefsJson(f.refs)},
          {"received", TransferJson(f.received)}};
}

std::string Short(const json& id) { return id.is_string() ? id.get<std::string>().substr(0, 12) : "(none)"; }

std::string Size(uint64_t b) {
  if (b < 10000) return fmt::format("{} bytes", b);
  if (b < 10000000) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{:.1f} MB", b / 1e6);
}

void FetchText(const json& f, Output& o) {
  o.Outf("From {}\n", f["url"].get<std::string>());
  const std::string remote = f["remote"].get<std::string>();
  for (const auto& r : f["refs"]) {
    if (r["status"] == "unchanged") continue;
    o.Outf("  {:<10} {}/{} {} -> {}\n", r["status"].get<std::string>(), remote, r["branch"].get<std::string>(),
           Short(r["old"]), Short(r["new"]));
  }
  const json& rc = f["received"];
  if (f["lazy"].get<bool>())
    o.Outf("refs and {} index(es) fetched; objects come on first read (lazy), {:.1f} s\n", rc["indexes"].get<uint64_t>(),
           rc["seconds"].get<double>());
  else
    o.Outf("received {} objects, {} from {} pack(s), {:.1f} s\n", rc["objects"].get<uint64_t>(),
           Size(rc["bytes"].get<uint64_t>()), rc["packs"].get<uint64_t>(), rc["seconds"].get<double>());
}

// The branch a push or pull works on when none is named: the mount at the working directory's,
// else main.
std::string DefaultBranch(Context& ctx) {
  auto here = ctx.BranchOfTarget("", nullptr);
  return here.ok() ? *here : "main";
}

// REMOTE may be left out, as with Git: then `origin` when there is one (what `layerfs clone`
// names the remote it cloned), else the only remote; with several and none named origin, the
// caller must say which.
const ArgSpec kRemoteName = {"remote", ArgType::kString, "REMOTE", "Remote name (default: origin, else the only remote)"};

Result<std::string> RemoteOf(Store& st, const Args& a) {
  if (a.Has("remote")) return a.Str("remote");
  LFS_ASSIGN(auto remotes, remote::ListRemotes(st));
  if (remotes.empty())
    return Status::Invalid("no remote configured: add one with `layerfs remote add NAME URL`");
  std::vector<std::string> names;
  for (const auto& r : remotes) {
    if (r.name == "origin") return r.name;
    names.push_back(r.name);
  }
  if (names.size() == 1) return names[0];
  return Status::Invalid(
      fmt::format("no REMOTE given and {} remotes, none named origin: name one of {}", names.size(), fmt::join(names, ", ")));
}

Verb RemoteList() {
  Verb v;
  v.name = "remote_list";
  v.cli = "remote";
  v.help = "List remotes (-v: with URLs and remote-tracking branches); `remote add`, `remote remove`";
  v.read_only = true;
  v.args = {{"verbose", ArgType::kBool, "-v,--verbose", "Show URLs and remote-tracking branches", false, true}};
  v.run = [](Context& ctx, const Args&, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore(/*read_only_ok=*/true));
    LFS_ASSIGN(auto remotes, remote::ListRemotes(*st));
    LFS_ASSIGN(auto rrefs, st->RemoteRefs());
    auto source = std::dynamic_pointer_cast<remote::LazySource>(st->objects().source());
    json arr = json::array();
    for (const auto& r : remotes) {
      json branches = json::object();
      for (const auto& [name, id] : rrefs)
        if (name.compare(0, r.name.size() + 1, r.name + "/") == 0) branches[name.substr(r.name.size() + 1)] = id.Hex();
      json j = {{"name", r.name}, {"url", r.url}, {"lazy", r.lazy}, {"branches", branches}};
      if (r.lazy && source)
        j["fetched_on_read"] = {{"objects", source->objects_fetched()}, {"bytes", source->bytes_fetched()}};
      arr.push_back(j);
    }
    *result = arr;
    return Status::Ok();
  };
  v.text = [](const Args& a, const json& r, Output& o) {
    for (const auto& rm : r) {
      const std::string name = rm["name"].get<std::string>();
      if (!a.Bool("verbose")) {
        o.Outf("{}\n", name);
        continue;
      }
      o.Outf("{}\t{}{}\n", name, rm["url"].get<std::string>(), rm["lazy"].get<bool>() ? " (lazy)" : "");
      for (const auto& [b, id] : rm["branches"].items()) o.Outf("  {}/{} {}\n", name, b, id.get<std::string>());
      if (rm.contains("fetched_on_read") && rm["fetched_on_read"]["objects"].get<uint64_t>() > 0)
        o.Outf("  fetched on first read here: {} objects, {}\n", rm["fetched_on_read"]["objects"].get<uint64_t>(),
               Size(rm["fetched_on_read"]["bytes"].get<uint64_t>()));
    }
  };
  return v;
}

Verb RemoteAdd() {
  Verb v;
  v.name = "remote_add";
  v.cli = "remote add";
  v.help = "Add remote NAME at URL: file:///PATH, rados://POOL[/NS], s3://BUCKET[/PREFIX][?endpoint=http://HOST:PORT]";
  v.args = {{"name", ArgType::kString, "NAME", "Remote name ([A-Za-z0-9._-], at most 64 bytes)", true},
            {"url", ArgType::kString, "URL", "Remote URL (or a directory's absolute path)", true},
            {"lazy", ArgType::kBool, "--lazy", "Fetch refs and indexes only; objects come on first read"}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore());
    const std::string url = a.Str("url");
    LFS_TRY(remote::AddRemote(*st, {a.Str("name"), url, a.Bool("lazy"), ""}));
    // A lazy remote needs the object source from now on.
    LFS_TRY(remote::AttachLazySource(*st).status());
    *result = {{"name", a.Str("name")}, {"url", url}, {"lazy", a.Bool("lazy")}, {"branches", json::object()}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json&, Output&) {};
  return v;
}

Verb RemoteRemove() {
  Verb v;
  v.name = "remote_remove";
  v.cli = "remote remove";
  v.help = "Forget remote NAME, its remote-tracking branches and its catalog (the remote is untouched)";
  v.destructive = true;  // what only its remote-tracking refs reached becomes garbage
  v.args = {{"name", ArgType::kString, "NAME", "Remote name", true}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore());
    LFS_ASSIGN(auto info, remote::GetRemote(*st, a.Str("name")));
    LFS_TRY(remote::RemoveRemote(*st, info.name));
    LFS_TRY(remote::AttachLazySource(*st).status());
    *result = {{"name", info.name}, {"url", info.url}, {"lazy", info.lazy}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json&, Output&) {};
  return v;
}

Verb Push() {
  Verb v;
  v.name = v.cli = "push";
  v.help = "Send BRANCHes (default: the branch mounted here, else main) to REMOTE: only what it lacks, refs by compare-and-swap";
  v.progress = true;
  v.destructive = true;  // with --force, the remote branch may lose Commits
  v.args = {kRemoteName,
            {"branches", ArgType::kStrings, "BRANCH", "Branches to push"},
            {"force", ArgType::kBool, "-f,--force", "Move the remote branch even if it is not a fast-forward"}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore());
    remote::PushOptions o;
    o.branches = a.Strings("branches");
    if (o.branches.empty()) o.branches.push_back(DefaultBranch(ctx));
    o.force = a.Bool("force");
    o.progress = ctx.progress;
    LFS_ASSIGN(const std::string name, RemoteOf(*st, a));
    LFS_ASSIGN(auto r, remote::Push(*st, name, o));
    *result = {{"remote", r.remote}, {"url", r.url}, {"refs", RefsJson(r.refs)}, {"sent", TransferJson(r.sent)}};
    // A refused branch fails the verb with one line (the others' outcome is in it and in the result).
    std::vector<std::string> rejected, moved;
    bool all_stale = true;
    for (const auto& u : r.refs) {
      if (u.status == "rejected") {
        rejected.push_back(fmt::format("{} -> {}/{}: {}", u.branch, r.remote, u.branch, u.reason));
        all_stale = all_stale && u.lost_race;
      } else if (u.status != "up-to-date") {
        moved.push_back(u.branch);
      }
    }
    if (rejected.empty()) return Status::Ok();
    return Status::Error(all_stale ? ESTALE : kNotFastForward,
                         fmt::format("rejected {}{}", fmt::join(rejected, "; rejected "),
                                     moved.empty() ? "" : fmt::format(" (pushed: {})", fmt::join(moved, ", "))));
  };
  v.text = [](const Args&, const json& r, Output& o) {
    // A refused push is one line on stderr (it names every branch's outcome), as Git's is.
    for (const auto& u : r["refs"])
      if (u["status"] == "rejected") return;
    o.Outf("To {}\n", r["url"].get<std::string>());
    const std::string remote = r["remote"].get<std::string>();
    for (const auto& u : r["refs"])
      o.Outf("  {:<12} {} -> {}/{} {} -> {}\n", u["status"].get<std::string>(), u["branch"].get<std::string>(), remote,
             u["branch"].get<std::string>(), Short(u["old"]), Short(u["new"]));
    const json& s = r["sent"];
    o.Outf("sent {} objects, {} in {} pack(s), {:.1f} s\n", s["objects"].get<uint64_t>(), Size(s["bytes"].get<uint64_t>()),
           s["packs"].get<uint64_t>(), s["seconds"].get<double>());
  };
  return v;
}

Verb Fetch() {
  Verb v;
  v.name = v.cli = "fetch";
  v.help = "Bring REMOTE's branches in as remote-tracking refs REMOTE/BRANCH (usable wherever a REF is)";
  v.progress = true;
  v.args = {kRemoteName};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore());
    remote::FetchOptions o;
    o.progress = ctx.progress;
    LFS_ASSIGN(const std::string name, RemoteOf(*st, a));
    LFS_ASSIGN(auto r, remote::Fetch(*st, name, o));
    *result = FetchJson(r);
    return Status::Ok();
  };
  v.text = [](const Args&, const json& r, Output& o) { FetchText(r, o); };
  return v;
}

Verb Pull() {
  Verb v;
  v.name = v.cli = "pull";
  v.help = "Fetch REMOTE, then bring REMOTE/BRANCH into BRANCH: fast-forward or merge (in its mount when mounted)";
  v.progress = true;
  v.args = {kRemoteName,
            {"branch", ArgType::kString, "BRANCH", "Branch (default: the branch mounted here, else main)"}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Store * st, ctx.GetStore());
    LFS_ASSIGN(auto* reg, ctx.Workspaces());
    LFS_ASSIGN(const std::string name, RemoteOf(*st, a));
    const std::string branch = a.Has("branch") ? a.Str("branch") : DefaultBranch(ctx);
    remote::WorkspaceAccess wsa;
    wsa.registry = reg;
    wsa.mounted = [&ctx](const std::string& b) -> Result<std::string> {
      if (!ctx.mounts) return std::string();
      auto mp = ctx.mounts->MountpointOf(b);
      if (!mp) return std::string();
      LFS_TRY(SettleMount(ctx, b, *mp));
      return *mp;
    };
    remote::FetchOptions o;
    o.progress = ctx.progress;
    LFS_ASSIGN(auto r, remote::Pull(*st, wsa, name, branch, o));
    json conflicts = json::array();
    for (const auto& c : r.conflicts) conflicts.push_back(ConflictJson(c));
    json j = {{"branch", r.branch},
              {"old", IdOrNull(r.old_id)},
              {"new", r.new_id.Hex()},
              {"status", r.status},
              {"through_workspace", r.through_workspace},
              {"conflicts", conflicts},
              {"stopped", r.stopped},
              {"fetch", FetchJson(r.fetch)}};
    if (ctx.mounts) {
      if (auto mp = ctx.mounts->MountpointOf(branch)) j["mountpoint"] = *mp;
    }
    *result = std::move(j);
    if (r.stopped)
      return Status::Errorf(kConflict, "pull stopped on {} conflict(s): resolve them in the mount, then `layerfs merge "
                                       "--continue` (or --abort)", r.conflicts.size());
    if (r.status == "conflicts")
      return Status::Errorf(kConflict, "merging {}/{} into {} has {} conflict(s); nothing was changed (mount the "
                                       "branch and pull there to resolve them)", name, branch, branch, r.conflicts.size());
    return Status::Ok();
  };
  v.text = [](const Args&, const json& r, Output& o) {
    FetchText(r["fetch"], o);
    if (r["status"] != "conflicts")
      o.Outf("{}: {} {} -> {}\n", r["branch"].get<std::string>(), r["status"].get<std::string>(), Short(r["old"]),
             Short(r["new"]));
    for (const auto& c : r["conflicts"]) {
      o.Outf("CONFLICT ({}): {}", c["kind"].get<std::string>(), c["path"].get<std::string>());
      for (const auto& s : c["sides"]) o.Outf(" [{}]", s.get<std::string>());
      o.Out("\n");
    }
  };
  return v;
}

Verb Clone() {
  Verb v;
  v.name = v.cli = "clone";
  v.help = "Create STORE from the remote at URL: its history and id key, its branches as local branches";
  v.progress = true;
  v.args = {{"url", ArgType::kString, "URL", "Remote URL (or a directory's path)", true},
            {"store", ArgType::kString, "STORE", "Store directory to create (absent or empty)", true},
            {"lazy", ArgType::kBool, "--lazy", "Fetch refs and indexes only; objects come on first read"}};
  // Makes a new Store and never touches the one a daemon holds: the CLI runs it itself (as init);
  // a daemon asked for it makes the new Store beside its own work.
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    remote::CloneOptions o;
    o.lazy = a.Bool("lazy");
    o.progress = ctx.progress;
    std::string u = a.Str("url");
    if (!u.empty() && u[0] != '/' && u.find("://") == std::string::npos) u = ctx.Abs(u);  // a path
    LFS_ASSIGN(auto r, remote::Clone(u, ctx.Abs(a.Str("store")), o));
    json b = json::array();
    for (const auto& [n, id] : r.branches) b.push_back({{"name", n}, {"commit", id.Hex()}});
    *result = {{"store", r.store}, {"url", r.url},    {"lazy", r.lazy},
               {"empty", r.empty_remote}, {"branches", b}, {"fetch", FetchJson(r.fetch)}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json& r, Output& o) {
    o.Outf("cloned {} into {}{}{}\n", r["url"].get<std::string>(), r["store"].get<std::string>(),
           r["lazy"].get<bool>() ? " (lazy)" : "",
           r["empty"].get<bool>() ? " (the remote is empty: its first push gives it this Store's history)" : "");
    for (const auto& b : r["branches"]) o.Outf("  {} {}\n", b["name"].get<std::string>(), b["commit"].get<std::string>());
    const json& rc = r["fetch"]["received"];
    if (!r["lazy"].get<bool>())
      o.Outf("received {} objects, {}, {:.1f} s\n", rc["objects"].get<uint64_t>(), Size(rc["bytes"].get<uint64_t>()),
             rc["seconds"].get<double>());
  };
  return v;
}

}  // namespace

void AddRemoteVerbs(std::vector<Verb>* out) {
  // remote_list first: `remote add` and `remote remove` are its CLI subcommands.
  for (auto& v : {RemoteList(), RemoteAdd(), RemoteRemove(), Push(), Fetch(), Pull(), Clone()}) out->push_back(v);
}

}  // namespace layerfs::cli
