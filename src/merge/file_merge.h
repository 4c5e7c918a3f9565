// FileMerge: the line-level three-way merge of one text file, by libgit2's git_merge_file (the
// xdiff merge Git itself uses), so LayerFS never carries a diff3 of its own. Binary content (a
// NUL in the first 8000 bytes of any side, Git's test) and sides over kMaxTextBytes are not
// merged. Pure function; thread-safe (libgit2 is initialised once per process).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "layerfs/status.h"

namespace layerfs::merge {

constexpr size_t kMaxTextBytes = 64u << 20;

// libgit2, initialised once per process (the merges here and the patches of merge/patch.h).
void InitLibgit2();

// Git's rule: content with a NUL byte in its first 8000 bytes is binary.
bool LooksBinary(std::string_view data);

struct FileMergeInput {
  std::string_view base, ours, theirs;  // base is empty for an add/add
  std::string our_label, their_label;
  int favor = 0;                        // 0 conflicts, 1 ours' hunks, 2 theirs' hunks
  bool keep_markers = false;            // a virtual base: conflicting hunks keep their markers
};

struct FileMergeResult {
  bool clean = false;    // no conflicting hunk was left
  std::string content;   // the merged bytes, with conflict markers where not clean
};

// EINVAL if a side is binary or too large to merge as text.
Result<FileMergeResult> MergeText(const FileMergeInput& in);

}  // namespace layerfs::merge
