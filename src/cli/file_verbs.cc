// Verbs on a Workspace's files by path, for agents that have no shell: read_file, write_file,
// list_dir, remove_path (workspace/files.h). They reach the branch's live Workspace, mounted or
// not; when it is mounted, the kernel's caches of what changed are dropped (Workspace::Notify),
// so the mount shows the change at once.
#include <cstdio>

#include "cli/cli.h"
#include "cli/json_shapes.h"
#include "workspace/files.h"

namespace layerfs::cli {

namespace {

const ArgSpec kTarget = {"target", ArgType::kString, "TARGET", "Branch, or a mountpoint of one", true};
const ArgSpec kPath = {"path", ArgType::kString, "PATH", "Path in the Workspace, from its root", true};

struct Opened {
  std::string branch, mountpoint;
  std::shared_ptr<workspace::Workspace> ws;
};

// `read_only_ok`: the verbs that only read open a Store they cannot write (a full disk) read-only
// (Context::GetStore), and its Workspace writes nothing (Workspace::Open).
Result<Opened> Open(Context& ctx, const Args& a, bool read_only_ok = false) {
  Opened o;
  LFS_ASSIGN(o.branch, ctx.BranchOfTarget(a.Str("target"), &o.mountpoint));
  LFS_ASSIGN(Store * st, ctx.GetStore(read_only_ok));
  LFS_ASSIGN(auto head, st->BranchHead(o.branch));
  if (!head) return Status::NotFound(fmt::format("no branch '{}'", o.branch));
  if (o.mountpoint.empty() && ctx.mounts) {
    if (auto mp = ctx.mounts->MountpointOf(o.branch)) o.mountpoint = *mp;
  }
  LFS_ASSIGN(auto* reg, ctx.Workspaces());
  LFS_ASSIGN(o.ws, reg->Get(o.branch));
  return o;
}

std::string TypeName(uint32_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "file";
    case S_IFDIR: return "dir";
    case S_IFLNK: return "symlink";
    case S_IFCHR: return "char";
    case S_IFBLK: return "block";
    case S_IFIFO: return "fifo";
    default: return "socket";
  }
}

Verb ReadFile() {
  Verb v;
  v.name = "read_file";
  v.cli = "read-file";
  v.help = "Print a file of a branch's live Workspace (mounted or not)";
  v.read_only = true;
  v.args = {kTarget, kPath,
            {"offset", ArgType::kInt, "--offset", "First byte (default 0)"},
            {"length", ArgType::kInt, "--length", "At most this many bytes (default: to the end)"}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Opened o, Open(ctx, a, /*read_only_ok=*/true));
    const uint64_t off = static_cast<uint64_t>(a.Int("offset", 0));
    std::optional<uint64_t> len;
    if (a.Has("length")) len = static_cast<uint64_t>(a.Int("length"));
    // Refuse before reading what would not fit one message.
    uint64_t size = 0;
    LFS_ASSIGN(std::string probe, workspace::ReadPath(*o.ws, a.Str("path"), off, 0, &size));
    uint64_t want = off >= size ? 0 : size - off;
    if (len) want = std::min(want, *len);
    if (want > kMaxContent)
      return Status::Errorf(kTooLarge, "{} is {} bytes: read it in pieces of at most {} bytes with offset and length",
                            a.Str("path"), size, kMaxContent);
    LFS_ASSIGN(std::string data, workspace::ReadPath(*o.ws, a.Str("path"), off, len, &size));
    *result = {{"path", a.Str("path")}, {"size", size}, {"content_base64", Base64Encode(data)}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json& r, Output& out) {
    auto data = Base64Decode(r["content_base64"].get<std::string>());
    if (data.ok()) out.Out(*data);
  };
  return v;
}

Verb WriteFile() {
  Verb v;
  v.name = "write_file";
  v.cli = "write-file";
  v.help = "Write a file of a branch's live Workspace (mounted or not); stdin when no content is given";
  v.destructive = true;
  v.cli_reads_stdin = true;
  v.args = {kTarget, kPath,
            {"content_base64", ArgType::kString, "", "The file's bytes, base64"},
            {"content", ArgType::kString, "--content", "The file's bytes as text (instead of content_base64)"},
            {"mode", ArgType::kString, "--mode", "Permission bits, octal (default 0644 for a new file)"},
            {"append", ArgType::kBool, "--append", "Add to the end instead of replacing the content"}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    if (a.Has("content") == a.Has("content_base64"))
      return Status::Invalid("write_file: give exactly one of content and content_base64");
    std::string data;
    if (a.Has("content")) {
      data = a.Str("content");
    } else {
      LFS_ASSIGN(data, Base64Decode(a.Str("content_base64")));
    }
    workspace::WriteOptions wo;
    wo.append = a.Bool("append");
    wo.owner = {ctx.uid, ctx.gid};
    if (a.Has("mode")) {
      const std::string m = a.Str("mode");
      size_t used = 0;
      unsigned long bits = 0;
      try {
        bits = std::stoul(m, &used, 8);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != m.size() || m.empty() || bits > 07777)
        return Status::Invalid(fmt::format("write_file: mode '{}' is not octal permission bits", m));
      wo.mode = static_cast<uint32_t>(bits);
    }
    LFS_ASSIGN(Opened o, Open(ctx, a));
    workspace::Changed changed;
    auto size = workspace::WritePath(*o.ws, a.Str("path"), data, wo, &changed);
    o.ws->Notify(changed.inodes, changed.entries);
    LFS_TRY(size.status());
    *result = {{"path", a.Str("path")}, {"size", *size}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json&, Output&) {};
  // The CLI's content, when neither option gives it, is its standard input.
  v.from_cli = [](std::string*, Args* a) -> Status {
    if (a->Has("content") || a->Has("content_base64")) return Status::Ok();
    std::string data;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) data.append(buf, n);
    if (ferror(stdin)) return Status::Errorf(EIO, "write-file: reading standard input failed");
    a->raw()["content_base64"] = Base64Encode(data);
    return Status::Ok();
  };
  return v;
}

Verb ListDir() {
  Verb v;
  v.name = "list_dir";
  v.cli = "list-dir";
  v.help = "List a directory of a branch's live Workspace (mounted or not)";
  v.read_only = true;
  v.args = {kTarget, {"path", ArgType::kString, "PATH", "Directory in the Workspace (default: its root)"}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Opened o, Open(ctx, a, /*read_only_ok=*/true));
    LFS_ASSIGN(auto entries, workspace::ListPath(*o.ws, a.Str("path")));
    json arr = json::array();
    for (const auto& e : entries) {
      json j = {{"name", e.name}, {"type", TypeName(e.mode)}, {"mode", ModeString(e.mode)}, {"size", e.size}};
      if (S_ISLNK(e.mode)) j["target"] = e.target;
      arr.push_back(std::move(j));
    }
    *result = std::move(arr);
    return Status::Ok();
  };
  v.text = [](const Args&, const json& r, Output& out) {
    for (const auto& e : r)
      out.Outf("{} {} {:>12} {}{}\n", e["type"].get<std::string>(), e["mode"].get<std::string>(),
               e["size"].get<uint64_t>(), e["name"].get<std::string>(),
               e.contains("target") ? " -> " + e["target"].get<std::string>() : "");
  };
  return v;
}

Verb RemovePath() {
  Verb v;
  v.name = "remove_path";
  v.cli = "remove-path";
  v.help = "Remove a file or directory of a branch's live Workspace (mounted or not)";
  v.destructive = true;
  v.args = {kTarget, kPath, {"recursive", ArgType::kBool, "-r,--recursive", "A directory and everything below it"}};
  v.run = [](Context& ctx, const Args& a, json* result) -> Status {
    LFS_ASSIGN(Opened o, Open(ctx, a));
    workspace::Changed changed;
    // Unmounted, nothing else holds the inodes: free them now. Mounted, the kernel forgets them.
    Status s = workspace::RemovePath(*o.ws, a.Str("path"), a.Bool("recursive"), o.mountpoint.empty(), &changed);
    o.ws->Notify(changed.inodes, changed.entries);
    LFS_TRY(s);
    *result = {{"path", a.Str("path")}};
    return Status::Ok();
  };
  v.text = [](const Args&, const json&, Output&) {};
  return v;
}

}  // namespace

void AddFileVerbs(std::vector<Verb>* out) {
  for (auto& v : {ReadFile(), WriteFile(), ListDir(), RemovePath()}) out->push_back(v);
}

}  // namespace layerfs::cli
