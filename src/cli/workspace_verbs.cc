// Verbs on live Workspaces: mount, umount, mounts, commit, status, reset.
#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "merge/merge_into.h"

namespace layerfs::cli {

namespace {

Status NeedDaemon(const char* verb) {
  return Status::Errorf(ENOTCONN, "{} needs the layerfsd of this store, and none is running", verb);
}

// Flushes what the kernel still holds for the mount (page cache, shared mmaps) to the daemon.
Status SyncMount(const std::string& mp) {
  int fd = open(mp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::Errorf(errno, "open {}: {}", mp, strerror(errno));
  int rc = syncfs(fd);
  int e = errno;
  close(fd);
  if (rc != 0) return Status::Errorf(e, "sync {}: {}", mp, strerror(e));
  return Status::Ok();
}

}  // namespace

void AddWorkspaceVerbs(CLI::App& app, Context& ctx) {
  {
    auto* c = app.add_subcommand("mount", "Mount a branch (writable) or a commit (read-only) at MOUNTPOINT");
    auto req = std::make_shared<MountService::Request>();
    auto fg = std::make_shared<bool>(false);
    c->add_option("REF", req->ref, "Branch, commit, prefix or REF~N")->required();
    c->add_option("MOUNTPOINT", req->mountpoint, "Directory to mount on")->required();
    c->add_flag("--read-only", req->read_only, "Mount read-only (a branch's head commit)");
    c->add_flag("--allow-other", req->allow_other, "Let other users see the mount");
    auto single = std::make_shared<bool>(false);
    c->add_flag("--single-threaded", *single, "Serve the mount with one thread (default: a thread pool)");
    auto pool = std::make_shared<bool>(false);  // the default; accepted for scripts
    c->add_flag("--threads", *pool, "Serve the mount with a thread pool (the default)");
    c->add_flag("--no-follow-cpu", req->no_follow_cpu, "Do not move the serving thread to its caller's CPU");
    c->add_flag("-f,--foreground", *fg, "Keep layerfsd in the foreground");
    c->callback([&ctx, req, fg, single, pool] {
      ctx.run = [&ctx, req, single]() -> Status {
        if (!ctx.mounts) return NeedDaemon("mount");
        MountService::Request r = *req;
        r.multithreaded = !*single;
        r.mountpoint = ctx.Abs(r.mountpoint);
        return ctx.mounts->Mount(r, &ctx.out);
      };
    });
  }
  {
    auto* c = app.add_subcommand("umount", "Flush and unmount MOUNTPOINT");
    auto mp = std::make_shared<std::string>();
    c->add_option("MOUNTPOINT", *mp, "Mounted directory")->required();
    c->callback([&ctx, mp] {
      ctx.run = [&ctx, mp]() -> Status {
        if (!ctx.mounts) return NeedDaemon("umount");
        return ctx.mounts->Unmount(ctx.Abs(*mp));
      };
    });
  }
  {
    auto* c = app.add_subcommand("mounts", "List the mounts of the running daemon");
    auto as_json = std::make_shared<bool>(false);
    c->add_flag("--json", *as_json,
                "One JSON object per mount: mountpoint, ref, read_only, transport, and the FUSE "
                "requests it has served per operation");
    c->callback([&ctx, as_json] {
      ctx.run = [&ctx, as_json]() -> Status {
        if (*as_json) {
          nlohmann::json all = nlohmann::json::array();
          if (ctx.mounts) {
            for (const auto& m : ctx.mounts->Describe()) {
              nlohmann::json req = nlohmann::json::object();
              for (const auto& [op, n] : m.requests) req[op] = n;
              all.push_back({{"mountpoint", m.mountpoint}, {"ref", m.ref}, {"read_only", m.read_only},
                             {"transport", m.transport}, {"requests", req}});
            }
          }
          ctx.Printf("%s\n", all.dump().c_str());
          return Status::Ok();
        }
        if (!ctx.mounts) return Status::Ok();
        for (const auto& [mp, what] : ctx.mounts->List()) ctx.Printf("%s %s\n", mp.c_str(), what.c_str());
        return Status::Ok();
      };
    });
  }
  {
    auto* c = app.add_subcommand("commit", "Commit what was written to a mounted (or unmounted) branch");
    auto target = std::make_shared<std::string>();
    auto msg = std::make_shared<std::string>();
    c->add_option("TARGET", *target, "Mountpoint or branch (default: the mount holding the working directory)");
    c->add_option("-m,--message", *msg, "Commit message")->required();
    c->callback([&ctx, target, msg] {
      ctx.run = [&ctx, target, msg]() -> Status {
        std::string mp;
        LFS_ASSIGN(std::string branch, ctx.BranchOfTarget(*target, &mp));
        if (!mp.empty()) LFS_TRY(SyncMount(mp));
        LFS_ASSIGN(auto* reg, ctx.Workspaces());
        LFS_ASSIGN(auto ws, reg->Get(branch));
        LFS_ASSIGN(auto merging, merge::ReadMergeState(*ws));
        if (merging)
          return Status::Errorf(EBUSY, "a merge of {} is in progress in {}: `layerfs merge --continue` commits it, `--abort` ends it",
                                merging->source_label, branch);
        LFS_ASSIGN(ObjectId id, ws->Commit(*msg));
        ctx.Printf("%s\n", id.Hex().c_str());
        return Status::Ok();
      };
    });
  }
  {
    auto* c = app.add_subcommand("status", "Uncommitted changes of a Workspace");
    auto target = std::make_shared<std::string>();
    c->add_option("TARGET", *target, "Mountpoint or branch (default: the mount holding the working directory)");
    c->callback([&ctx, target] {
      ctx.run = [&ctx, target]() -> Status {
        std::string mp;
        LFS_ASSIGN(std::string branch, ctx.BranchOfTarget(*target, &mp));
        if (!mp.empty()) LFS_TRY(SyncMount(mp));
        LFS_ASSIGN(auto* reg, ctx.Workspaces());
        LFS_ASSIGN(auto ws, reg->Get(branch));
        LFS_ASSIGN(auto merging, merge::ReadMergeState(*ws));
        LFS_ASSIGN(auto changes, ws->Changes());
        if (merging) {
          // Conflicts first, as `git status` shows unmerged paths: C, the kind, the path.
          LFS_ASSIGN(auto unresolved, merge::UnresolvedPaths(*ws, *merging));
          ctx.Printf("# merging %s (%s) into %s: %zu conflict(s), %zu unresolved; "
                     "`layerfs merge --continue` once resolved, or --abort\n",
                     merging->source_label.c_str(), merging->theirs.Hex().substr(0, 12).c_str(), branch.c_str(),
                     merging->conflicts.size(), unresolved.size());
          for (const auto& c : merging->conflicts) {
            bool open = false;
            for (const auto& u : unresolved)
              open |= u.path == c.path || std::find(c.sides.begin(), c.sides.end(), u.path) != c.sides.end();
            ctx.Printf("C\t%s\t%s%s\n", c.path.c_str(), merge::ConflictKindName(c.kind), open ? "" : " (resolved)");
          }
        }
        for (const auto& d : changes) ctx.Printf("%c\t%s\n", d.change, d.path.c_str());
        return Status::Ok();
      };
    });
  }
  {
    auto* c = app.add_subcommand("reset", "Discard uncommitted changes; with --hard REF, also move the branch to REF");
    auto target = std::make_shared<std::string>();
    auto hard = std::make_shared<std::string>();
    c->add_option("TARGET", *target, "Mountpoint or branch (default: the mount holding the working directory)");
    c->add_option("--hard", *hard, "Move the branch to this commit");
    c->callback([&ctx, target, hard] {
      ctx.run = [&ctx, target, hard]() -> Status {
        std::string mp;
        LFS_ASSIGN(std::string branch, ctx.BranchOfTarget(*target, &mp));
        LFS_ASSIGN(Store * st, ctx.GetStore());
        std::optional<ObjectId> to;
        if (!hard->empty()) {
          LFS_ASSIGN(to, st->Resolve(*hard));
        }
        LFS_ASSIGN(auto* reg, ctx.Workspaces());
        LFS_ASSIGN(auto ws, reg->Get(branch));
        auto reset = [&]() { return ws->Reset(to); };
        if (ctx.mounts) LFS_TRY(ctx.mounts->WithBranchUnmounted(branch, reset));
        else LFS_TRY(reset());
        ctx.Printf("%s %s\n", branch.c_str(), ws->base_commit().Hex().c_str());
        return Status::Ok();
      };
    });
  }
}

}  // namespace layerfs::cli
