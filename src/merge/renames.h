// Renames: which files one side of a merge moved, found as Git finds them (docs/design.md, "Merge",
// "Renames").
//
// A rename is a regular file deleted from the base and a regular file added on the same side,
// paired one to one: first by identical content, then by similarity, Git's estimate: both files
// are cut into spans (at each newline or every 64 bytes, a CR before a newline dropped in text),
// each span hashed; the bytes of spans the two have in common over the larger file's size is the
// score, and a pair scores at least half to count. Best scores pair first; a destination with the
// source's base name wins a tie. Empty files pair only with empty files, by identical content. Only what the diff of the side lists is
// read, so the cost follows the change; similarity is skipped above kMaxRenameCandidates sources
// or destinations (exact pairs are still found). Pure reads; thread-safe as the Store is.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "layerfs/store.h"
#include "objects/object_store.h"

namespace layerfs::merge {

constexpr size_t kMaxRenameCandidates = 1000;
// Files larger than this pair only by identical content.
constexpr uint64_t kMaxSimilarityBytes = 16u << 20;

struct Rename {
  std::string from, to;      // paths from the root
  TreeEntry before, after;   // the base's entry at `from`, the side's at `to`
  int score = 0;             // percent similar; 100 for identical content
};

// The renames from tree `base` to tree `side`, sorted by `from`; with `only_from`, of those
// sources only (a merge asks only about files the other side changed, as Git's ort does).
Result<std::vector<Rename>> FindRenames(Store& store, const ObjectId& base, const ObjectId& side, objects::Txn* txn,
                                        const std::set<std::string>* only_from = nullptr);

// The content of one side of a change (after: d.after's, else d.before's).
using ChangeContent = std::function<Result<std::string>(const DiffEntry& d, bool after)>;

// The renames among `diff`'s removed and added regular files, paired as FindRenames pairs them
// (identical content by id, then similarity over contents `read` gives), sorted by `from`.
Result<std::vector<Rename>> PairRenames(const std::vector<DiffEntry>& diff, const ChangeContent& read,
                                        const std::set<std::string>* only_from = nullptr);

// Git's `diff -M`: each rename PairRenames finds replaces its removal and its addition in `diff`
// by one change 'R' at the new path (from_path, similarity, before and after set), in path
// order with the others.
Status DetectRenames(std::vector<DiffEntry>* diff, const ChangeContent& read);

// Git's similarity of two contents in percent (0 when they cannot reach half).
int Similarity(std::string_view a, std::string_view b);

}  // namespace layerfs::merge
