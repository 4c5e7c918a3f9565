// Patch: one change between two trees as Git's unified diff (`layerfs diff -p`, `show -p`), so
// an agent reads what changed in a file, not only that it changed. The hunks come from
// libgit2's xdiff (the diff Git itself runs) with three lines of context; the header is Git's:
// `diff --git a/P b/P`, the mode lines (`new file mode`, `deleted file mode`, `old mode` /
// `new mode`), `--- a/P` or `/dev/null`, `+++ b/P` or `/dev/null`. A symlink's content is its
// target, with mode 120000, as in Git. Binary content (merge::LooksBinary) or a side over
// kMaxTextBytes gives `Binary files a/P and b/P differ`. A type change is a deletion then an
// addition. A rename ('R', merge::DetectRenames) has Git's `similarity index`, `rename from`
// and `rename to` lines, and hunks only when the content changed. Directories and special files
// have no content, hence no patch (empty). Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "layerfs/store.h"

namespace layerfs::merge {

// `before` and `after`: the content of d.before and d.after (empty where a side is absent or
// NeedsContent says it is not read).
std::string UnifiedPatch(const DiffEntry& d, std::string_view before, std::string_view after);

// Whether a patch shows `e` (a file or a symlink), and whether it needs its content read (not
// for a file over kMaxTextBytes, which is shown as binary).
bool HasPatchContent(const TreeEntry& e);
bool NeedsContent(const TreeEntry& e);

// A path as Git prints it in a listing or a patch header: as it is, unless it holds a control
// character, a double quote or a backslash; then in double quotes with C escapes (\t, \n, \",
// \\, \a \b \v \f \r, other bytes as three octal digits), so that one line stays one path and
// `git apply` reads it back. Bytes of 0x80 and above stay as they are (Git's core.quotePath
// false: UTF-8 names read as written).
std::string GitQuote(std::string_view path);

}  // namespace layerfs::merge
