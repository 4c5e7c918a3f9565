#include "workspace/files.h"

#include <algorithm>

namespace layerfs::workspace {

namespace {

constexpr size_t kWriteChunk = 1 << 20;

// The path's names; EINVAL for "..".
Result<std::vector<std::string>> Split(std::string_view path) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    std::string_view name = path.substr(pos, end - pos);
    pos = end + 1;
    if (name.empty() || name == ".") continue;
    if (name == "..") return Status::Invalid(fmt::format("{}: '..' is not allowed", path));
    if (name.size() > 255) return Status::Error(ENAMETOOLONG, fmt::format("{}: a name is over 255 bytes", path));
    out.emplace_back(name);
  }
  return out;
}

std::string Shown(std::string_view path) { return path.empty() ? "/" : std::string(path); }

Status Loop(std::string_view path) {
  return Status::Error(ELOOP, fmt::format("{}: is a symbolic link (file verbs do not follow links)", Shown(path)));
}

// The inode at names[0..n), from the root. ENOENT, ENOTDIR, ELOOP as a path walk would give them.
Result<Attr> Walk(Workspace& ws, std::string_view path, const std::vector<std::string>& names, size_t n) {
  LFS_ASSIGN(Attr a, ws.GetAttr(kRootIno));
  for (size_t i = 0; i < n; i++) {
    if (S_ISLNK(a.mode)) return Loop(path);
    if (!S_ISDIR(a.mode)) return Status::Error(ENOTDIR, fmt::format("{}: not a directory on the way", Shown(path)));
    auto next = ws.Lookup(a.ino, names[i]);
    if (!next.ok()) {
      if (next.status().code() == ENOENT)
        return Status::NotFound(fmt::format("{}: no such file or directory", Shown(path)));
      return next.status().Context(Shown(path));
    }
    a = *next;
  }
  return a;
}

Result<Attr> Resolve(Workspace& ws, std::string_view path) {
  LFS_ASSIGN(auto names, Split(path));
  return Walk(ws, path, names, names.size());
}

}  // namespace

Result<std::string> ReadPath(Workspace& ws, std::string_view path, uint64_t offset, std::optional<uint64_t> length,
                             uint64_t* size) {
  LFS_ASSIGN(Attr a, Resolve(ws, path));
  if (S_ISDIR(a.mode)) return Status::Error(EISDIR, fmt::format("{}: is a directory", Shown(path)));
  if (S_ISLNK(a.mode)) return Loop(path);
  if (!S_ISREG(a.mode)) return Status::Invalid(fmt::format("{}: not a regular file", Shown(path)));
  *size = a.size;
  uint64_t len = offset >= a.size ? 0 : a.size - offset;
  if (length) len = std::min(len, *length);
  if (len == 0) return std::string();
  auto data = ws.Read(a.ino, offset, len);
  if (!data.ok()) return data.status().Context(Shown(path));
  return data;
}

Result<uint64_t> WritePath(Workspace& ws, std::string_view path, std::string_view data, const WriteOptions& o,
                           Changed* changed) {
  LFS_ASSIGN(auto names, Split(path));
  if (names.empty()) return Status::Error(EISDIR, "/: is a directory");
  // Parents, made where missing.
  LFS_ASSIGN(Attr dir, ws.GetAttr(kRootIno));
  for (size_t i = 0; i + 1 < names.size(); i++) {
    auto next = ws.Lookup(dir.ino, names[i]);
    if (!next.ok() && next.status().code() == ENOENT) {
      next = ws.Mkdir(dir.ino, names[i], 0755, o.owner);
      if (next.ok()) changed->entries.emplace_back(dir.ino, names[i]);
    }
    if (!next.ok()) return next.status().Context(Shown(path));
    if (S_ISLNK(next->mode)) return Loop(path);
    if (!S_ISDIR(next->mode)) return Status::Error(ENOTDIR, fmt::format("{}: not a directory on the way", Shown(path)));
    dir = *next;
  }
  const std::string& name = names.back();
  auto found = ws.Lookup(dir.ino, name);
  Attr f;
  if (!found.ok()) {
    if (found.status().code() != ENOENT) return found.status().Context(Shown(path));
    auto made = ws.Mknod(dir.ino, name, S_IFREG | (o.mode.value_or(0644) & 07777), 0, o.owner);
    if (!made.ok()) return made.status().Context(Shown(path));
    f = *made;
    changed->entries.emplace_back(dir.ino, name);
  } else {
    f = *found;
    if (S_ISDIR(f.mode)) return Status::Error(EISDIR, fmt::format("{}: is a directory", Shown(path)));
    if (S_ISLNK(f.mode)) return Loop(path);
    if (!S_ISREG(f.mode)) return Status::Invalid(fmt::format("{}: not a regular file", Shown(path)));
    AttrChange ch;
    if (!o.append && f.size > 0) ch.size = 0;
    if (o.mode) ch.mode = *o.mode & 07777;
    if (ch.size || ch.mode) {
      auto set = ws.SetAttr(f.ino, ch);
      if (!set.ok()) return set.status().Context(Shown(path));
      f = *set;
    }
  }
  uint64_t off = o.append ? f.size : 0;
  while (!data.empty()) {
    std::string_view piece = data.substr(0, kWriteChunk);
    auto n = ws.Write(f.ino, off, piece);
    if (!n.ok()) return n.status().Context(Shown(path));
    off += *n;
    data.remove_prefix(*n);
  }
  changed->inodes.push_back(f.ino);
  LFS_ASSIGN(Attr after, ws.GetAttr(f.ino));
  return after.size;
}

Result<std::vector<FileEntry>> ListPath(Workspace& ws, std::string_view path) {
  LFS_ASSIGN(Attr d, Resolve(ws, path));
  if (S_ISLNK(d.mode)) return Loop(path);
  if (!S_ISDIR(d.mode)) return Status::Error(ENOTDIR, fmt::format("{}: not a directory", Shown(path)));
  auto entries = ws.ReadDir(d.ino);
  if (!entries.ok()) return entries.status().Context(Shown(path));
  std::vector<FileEntry> out;
  for (const auto& e : *entries) {
    if (e.name == "." || e.name == "..") continue;
    auto a = ws.GetAttr(e.ino);
    if (!a.ok()) return a.status().Context(Shown(path));
    FileEntry fe{e.name, a->mode, a->size, {}};
    if (S_ISLNK(a->mode)) {
      auto t = ws.Readlink(e.ino);
      if (t.ok()) fe.target = *t;
    }
    out.push_back(std::move(fe));
  }
  std::sort(out.begin(), out.end(), [](const FileEntry& a, const FileEntry& b) { return a.name < b.name; });
  return out;
}

namespace {

// Removes entry `name` (inode `a`) of directory `parent`, and all below it when recursive.
Status Remove(Workspace& ws, Ino parent, const std::string& name, const Attr& a, bool recursive, bool forget,
              const std::string& shown, Changed* changed) {
  if (S_ISDIR(a.mode)) {
    if (recursive) {
      LFS_ASSIGN(auto entries, ws.ReadDir(a.ino));
      for (const auto& e : entries) {
        if (e.name == "." || e.name == "..") continue;
        LFS_ASSIGN(Attr child, ws.Lookup(a.ino, e.name));
        LFS_TRY(Remove(ws, a.ino, e.name, child, true, forget, shown + "/" + e.name, changed));
      }
    }
    Status s = ws.Rmdir(parent, name);
    if (!s.ok()) return s.Context(shown);
  } else {
    Status s = ws.Unlink(parent, name);
    if (!s.ok()) return s.Context(shown);
  }
  changed->entries.emplace_back(parent, name);
  changed->inodes.push_back(a.ino);
  if (forget) ws.Forget(a.ino);
  return Status::Ok();
}

}  // namespace

Status RemovePath(Workspace& ws, std::string_view path, bool recursive, bool forget, Changed* changed) {
  LFS_ASSIGN(auto names, Split(path));
  if (names.empty()) return Status::Invalid("the root of a Workspace cannot be removed");
  LFS_ASSIGN(Attr dir, Walk(ws, path, names, names.size() - 1));
  if (S_ISLNK(dir.mode)) return Loop(path);
  if (!S_ISDIR(dir.mode)) return Status::Error(ENOTDIR, fmt::format("{}: not a directory on the way", path));
  auto a = ws.Lookup(dir.ino, names.back());
  if (!a.ok()) {
    if (a.status().code() == ENOENT) return Status::NotFound(fmt::format("{}: no such file or directory", path));
    return a.status().Context(std::string(path));
  }
  return Remove(ws, dir.ino, names.back(), *a, recursive, forget, std::string(path), changed);
}

}  // namespace layerfs::workspace
