// Verbs that create and maintain a Store: init, import, fork, branch, stats, verify, gc.
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <cstdio>

#include "cli/cli.h"

namespace layerfs::cli {

using nlohmann::json;

namespace {

json StatsJson(const StoreStats& s) {
  json j = {{"allocated_bytes", s.allocated_bytes}, {"payload_bytes", s.payload_bytes},
            {"metadata_bytes", s.metadata_bytes},   {"other_bytes", s.other_bytes},
            {"logical_bytes", s.logical_bytes},     {"commits", s.commits},
            {"branches", s.branches},               {"policy", s.policy},
            {"objects", s.objects},                 {"max_chain_depth", s.max_chain_depth},
            {"cf_bytes", s.cf_bytes}};
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

}  // namespace

void AddStoreVerbs(CLI::App& app, Context& ctx) {
  {
    auto* c = app.add_subcommand("init", "Create a Store with branch main");
    auto path = std::make_shared<std::string>();
    auto policy = std::make_shared<std::string>("16/8/8");
    auto from = std::make_shared<std::string>();
    auto msg = std::make_shared<std::string>();
    c->add_option("STORE", *path, "Store directory to create")->required();
    c->add_option("--policy", *policy, "Delta-chain caps W/C/M (whole-file/chunk/metadata)");
    c->add_option("--from", *from, "Directory to make the first Commit");
    c->add_option("-m,--message", *msg, "Message of the first Commit");
    c->callback([&ctx, path, policy, from, msg] {
      ctx.run = [&ctx, path, policy, from, msg]() -> Status {
        LFS_ASSIGN(Policy p, Policy::Parse(*policy));
        if (!from->empty()) {
          struct stat sb;
          if (stat(from->c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode))
            return Status::NotFound(fmt::format("--from {}: not a directory", *from));
        }
        LFS_ASSIGN(auto st, Store::Create(ctx.Abs(*path), p));
        if (!from->empty()) {
          ImportOptions o;
          o.message = msg->empty() ? "initial import" : *msg;
          LFS_ASSIGN(ObjectId id, st->Import(ctx.Abs(*from), o));
          ctx.Printf("%s\n", id.Hex().c_str());
        }
        return Status::Ok();
      };
    });
  }
  {
    auto* c = app.add_subcommand("import", "Commit a directory's tree as the next Commit of a branch");
    auto dir = std::make_shared<std::string>();
    auto opts = std::make_shared<ImportOptions>();
    auto verbose = std::make_shared<bool>(false);
    c->add_option("DIR", *dir, "Directory to import")->required();
    c->add_option("-b,--branch", opts->branch, "Branch (default main)");
    c->add_option("-m,--message", opts->message, "Commit message");
    c->add_flag("-v,--verbose", *verbose, "Print what was hashed and stored");
    c->callback([&ctx, dir, opts, verbose] {
      ctx.run = [&ctx, dir, opts, verbose]() -> Status {
        LFS_ASSIGN(Store * st, ctx.GetStore());
        if (ctx.mounts) {
          if (auto mp = ctx.mounts->MountpointOf(opts->branch))
            return Status::Error(EBUSY, fmt::format("branch '{}' is mounted at {}; commit there instead", opts->branch, *mp));
        }
        ImportStats stats;
        LFS_ASSIGN(ObjectId id, st->Import(ctx.Abs(*dir), *opts, &stats));
        LFS_ASSIGN(auto* reg, ctx.Workspaces());
        reg->Drop(opts->branch);
        ctx.Printf("%s\n", id.Hex().c_str());
        if (*verbose)
          ctx.Eprintf("files %lu, dirs %lu, hashed %lu, unchanged by stat %lu, objects added %lu (%lu bytes)\n",
                       stats.files, stats.dirs, stats.hashed, stats.stat_hits, stats.objects_added, stats.bytes_added);
        return Status::Ok();
      };
    });
  }
  {
    auto* c = app.add_subcommand("fork", "Create branch NEW at FROM (a branch, commit, prefix or REF~N), O(1)");
    auto name = std::make_shared<std::string>();
    auto from = std::make_shared<std::string>("main");
    c->add_option("NEW", *name, "New branch name")->required();
    c->add_option("FROM", *from, "Where the branch starts (default main)");
    c->callback([&ctx, name, from] {
      ctx.run = [&ctx, name, from]() -> Status {
        LFS_ASSIGN(Store * st, ctx.GetStore());
        LFS_TRY(st->Fork(*name, *from));
        LFS_ASSIGN(auto head, st->BranchHead(*name));
        ctx.Printf("%s %s\n", name->c_str(), head->Hex().c_str());
        return Status::Ok();
      };
    });
  }
  {
    auto* c = app.add_subcommand("branch", "List branches with their heads, or delete one");
    auto del = std::make_shared<std::string>();
    c->add_option("-d,--delete", *del, "Delete branch NAME");
    c->callback([&ctx, del] {
      ctx.run = [&ctx, del]() -> Status {
        LFS_ASSIGN(Store * st, ctx.GetStore());
        if (!del->empty()) {
          if (ctx.mounts) {
            if (auto mp = ctx.mounts->MountpointOf(*del))
              return Status::Error(EBUSY, fmt::format("branch '{}' is mounted at {}", *del, *mp));
          }
          LFS_TRY(st->DeleteBranch(*del));
          LFS_ASSIGN(auto* reg, ctx.Workspaces());
          reg->Drop(*del);
          return workspace::DropWorkspaceState(*st, *del);
        }
        LFS_ASSIGN(auto branches, st->Branches());
        for (auto& [name, head] : branches) ctx.Printf("%s %s\n", name.c_str(), head.Hex().c_str());
        return Status::Ok();
      };
    });
  }
  {
    auto* c = app.add_subcommand("stats", "Allocated bytes split payload/metadata/other, objects, chain depths");
    auto as_json = std::make_shared<bool>(false);
    c->add_flag("--json", *as_json, "Print JSON");
    c->callback([&ctx, as_json] {
      ctx.run = [&ctx, as_json]() -> Status {
        LFS_ASSIGN(Store * st, ctx.GetStore());
        LFS_ASSIGN(auto s, st->Stats());
        if (*as_json) {
          ctx.Printf("%s\n", StatsJson(s).dump(2).c_str());
          return Status::Ok();
        }
        ctx.Printf("policy %s, %lu commits, %lu branches\n", s.policy.c_str(), s.commits, s.branches);
        ctx.Printf("allocated %s = payload %s + metadata %s + other %s\n", Mb(s.allocated_bytes).c_str(),
                    Mb(s.payload_bytes).c_str(), Mb(s.metadata_bytes).c_str(), Mb(s.other_bytes).c_str());
        ctx.Printf("logical %s in all commits (%.1fx the allocated bytes)\n", Mb(s.logical_bytes).c_str(),
                    s.allocated_bytes ? double(s.logical_bytes) / s.allocated_bytes : 0.0);
        for (const auto& [kind, n] : s.objects) {
          ctx.Printf("%-10s %8lu objects, depths:", kind.c_str(), n);
          for (const auto& [d, cnt] : s.depth_histogram[kind]) ctx.Printf(" %u:%lu", d, cnt);
          ctx.Printf("\n");
        }
        ctx.Printf("max chain depth whole %u, chunk %u, metadata %u\n", s.max_chain_depth["whole"],
                    s.max_chain_depth["chunk"], s.max_chain_depth["metadata"]);
        return Status::Ok();
      };
    });
  }
  {
    auto* c = app.add_subcommand("verify", "Read back every object reachable from COMMITs (default all) and check hashes");
    auto commits = std::make_shared<std::vector<std::string>>();
    c->add_option("COMMIT", *commits, "Commits to verify");
    c->callback([&ctx, commits] {
      ctx.run = [&ctx, commits]() -> Status {
        LFS_ASSIGN(Store * st, ctx.GetStore());
        std::vector<ObjectId> ids;
        for (const auto& spec : *commits) {
          LFS_ASSIGN(ObjectId id, st->Resolve(spec));
          ids.push_back(id);
        }
        LFS_ASSIGN(auto rep, st->Verify(ids));
        for (const auto& p : rep.problems) ctx.Printf("damaged: %s\n", p.c_str());
        ctx.Printf("%lu commits, %lu objects, %lu bytes verified, %zu problems\n", rep.commits, rep.objects,
                    rep.bytes, rep.problems.size());
        if (!rep.ok()) return Status::Errorf(EIO, "verify found {} damaged object(s)", rep.problems.size());
        return Status::Ok();
      };
    });
  }
  {
    auto* c = app.add_subcommand("gc", "Free what no branch reaches any more");
    c->callback([&ctx] {
      ctx.run = [&ctx]() -> Status {
        LFS_ASSIGN(Store * st, ctx.GetStore());
        LFS_ASSIGN(auto roots, workspace::MergeRoots(*st));
        LFS_ASSIGN(auto rep, st->Gc(roots));
        ctx.Printf("deleted %lu objects; allocated %s -> %s\n", rep.objects_deleted, Mb(rep.bytes_before).c_str(),
                    Mb(rep.bytes_after).c_str());
        return Status::Ok();
      };
    });
  }
}

}  // namespace layerfs::cli
