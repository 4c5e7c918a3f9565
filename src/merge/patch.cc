#include "merge/patch.h"

#include <git2.h>

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "merge/file_merge.h"

namespace layerfs::merge {
namespace {

std::string GitMode(const TreeEntry& e) {
  if (e.type == EntryType::kSymlink) return "120000";
  return fmt::format("100{:03o}", e.mode & 0777);
}

int PrintLine(const git_diff_delta*, const git_diff_hunk*, const git_diff_line* line, void* payload) {
  auto* out = static_cast<std::string*>(payload);
  switch (line->origin) {
    case GIT_DIFF_LINE_FILE_HDR:  // ours is written by OneSide
    case GIT_DIFF_LINE_BINARY:
      return 0;
    case GIT_DIFF_LINE_CONTEXT:
    case GIT_DIFF_LINE_ADDITION:
    case GIT_DIFF_LINE_DELETION:
      out->push_back(line->origin);
      break;
    default:  // hunk headers and "\ No newline at end of file" come whole
      break;
  }
  out->append(line->content, line->content_len);
  return 0;
}

// Git's abbreviated blob id of `data` (what `git hash-object` prints), as on an index line.
std::string BlobId(std::string_view data) {
  InitLibgit2();
  git_oid oid;
  if (git_odb_hash(&oid, data.data(), data.size(), GIT_OBJECT_BLOB) != 0) return "0000000";
  char hex[GIT_OID_HEXSZ + 1];
  git_oid_tostr(hex, sizeof hex, &oid);
  return std::string(hex, 7);
}

// Hunks of before -> after; false if libgit2 finds either side binary.
bool Hunks(std::string_view before, std::string_view after, std::string* out) {
  InitLibgit2();
  git_diff_options opts = GIT_DIFF_OPTIONS_INIT;
  opts.context_lines = 3;
  git_patch* patch = nullptr;
  if (git_patch_from_buffers(&patch, before.data(), before.size(), "a", after.data(), after.size(), "b", &opts) != 0)
    return false;
  std::unique_ptr<git_patch, void (*)(git_patch*)> hold(patch, git_patch_free);
  const git_diff_delta* delta = git_patch_get_delta(patch);
  if (delta && (delta->flags & GIT_DIFF_FLAG_BINARY)) return false;
  return git_patch_print(patch, PrintLine, out) == 0;
}

// The patch from `b` (or nothing) at `old_path` to `a` (or nothing) at `path`; a rename (`old_path`
// not `path`, with its similarity) has Git's rename lines, and no hunks when the content is the same.
std::string OneSide(const std::string& path, const TreeEntry* b, std::string_view before, const TreeEntry* a,
                    std::string_view after, bool same_content, const std::string& old_path = "", int similarity = 0) {
  const std::string& was = old_path.empty() ? path : old_path;
  std::string out = fmt::format("diff --git {} {}\n", GitQuote("a/" + was), GitQuote("b/" + path));
  if (!b) out += fmt::format("new file mode {}\n", GitMode(*a));
  if (!a) out += fmt::format("deleted file mode {}\n", GitMode(*b));
  if (a && b && GitMode(*a) != GitMode(*b)) out += fmt::format("old mode {}\nnew mode {}\n", GitMode(*b), GitMode(*a));
  if (was != path) {
    out += fmt::format("similarity index {}%\nrename from {}\nrename to {}\n", similarity, GitQuote(was), GitQuote(path));
    if (similarity == 100) return out;
  }
  if (same_content) return out;  // a mode change alone
  const std::string from = b ? GitQuote("a/" + was) : "/dev/null", to = a ? GitQuote("b/" + path) : "/dev/null";
  const bool oversized = (b && b->size > kMaxTextBytes) || (a && a->size > kMaxTextBytes);
  if (!oversized) {  // the blob ids git apply checks (and needs before a binary line)
    out += fmt::format("index {}..{}", b ? BlobId(before) : "0000000", a ? BlobId(after) : "0000000");
    out += a && b && GitMode(*a) == GitMode(*b) ? " " + GitMode(*a) + "\n" : std::string("\n");
  }
  if (oversized || LooksBinary(before) || LooksBinary(after)) {
    out += fmt::format("Binary files {} and {} differ\n", from, to);
    return out;
  }
  if (before.empty() && after.empty()) return out;  // an empty file added or removed
  std::string hunks;
  if (!Hunks(before, after, &hunks)) {
    out += fmt::format("Binary files {} and {} differ\n", from, to);
    return out;
  }
  out += fmt::format("--- {}\n+++ {}\n", from, to);
  out += hunks;
  return out;
}

}  // namespace

std::string GitQuote(std::string_view path) {
  auto special = [](unsigned char c) { return c < 0x20 || c == 0x7f || c == '"' || c == '\\'; };
  if (std::none_of(path.begin(), path.end(), [&](char c) { return special(static_cast<unsigned char>(c)); }))
    return std::string(path);
  std::string out = "\"";
  for (char ch : path) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '\a': out += "\\a"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\v': out += "\\v"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default:
        if (special(c)) out += fmt::format("\\{:03o}", c);
        else out += ch;
    }
  }
  return out + "\"";
}

bool HasPatchContent(const TreeEntry& e) { return e.type == EntryType::kFile || e.type == EntryType::kSymlink; }
bool NeedsContent(const TreeEntry& e) { return HasPatchContent(e) && e.size <= kMaxTextBytes; }

std::string UnifiedPatch(const DiffEntry& d, std::string_view before, std::string_view after) {
  const TreeEntry* b = d.before && HasPatchContent(*d.before) ? &*d.before : nullptr;
  const TreeEntry* a = d.after && HasPatchContent(*d.after) ? &*d.after : nullptr;
  if (!a && !b) return "";
  // A file that became a symlink (or the reverse): Git shows the one removed, then the other added.
  if (a && b && a->type != b->type)
    return OneSide(d.path, b, before, nullptr, "", false) + OneSide(d.path, nullptr, "", a, after, false);
  if (d.change == 'R') return OneSide(d.path, b, before, a, after, false, d.from_path, d.similarity);
  return OneSide(d.path, b, b ? before : "", a, a ? after : "", d.change == 'P');
}

}  // namespace layerfs::merge
