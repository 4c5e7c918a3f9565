// The JSON shapes verbs share (docs/protocol.md, "Verbs"): a Commit, a change, a tree entry, and
// base64 for file content. Stateless functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <functional>
#include <optional>
#include <string>

#include "layerfs/store.h"
#include "merge/merge.h"

namespace layerfs::workspace {
class Workspace;
}

namespace layerfs::cli {

// {"id", "parents", "root", "message", "time", "time_nsec", "logical_bytes", "files"}
nlohmann::json CommitJson(const CommitInfo& c);
// {"type", "mode", "size", "id"?, "target"?}; mode as four octal digits ("0644").
nlohmann::json EntryJson(const TreeEntry& e);
// {"path", "change", "before"?, "after"?}; a rename ('R') adds "from_path" and "similarity".
nlohmann::json ChangeJson(const DiffEntry& d);
nlohmann::json ChangesJson(const std::vector<DiffEntry>& d);
std::string ModeString(uint32_t mode);
// An id as hex, or null for none.
nlohmann::json IdOrNull(const std::optional<ObjectId>& id);
// A merge conflict: {"path", "kind", "base", "ours", "theirs", "sides"}; each side is the entry's
// content id (a symlink's target), or null where that side has none.
nlohmann::json ConflictJson(const merge::Conflict& c);

// The most file content one result (read_file, cat) carries: its base64 stays under the
// protocol's 64 MiB message limit with room for the rest of the message.
inline constexpr uint64_t kMaxContent = 32 << 20;

// With --patch (diff, show, status): each change's Git unified diff (merge::UnifiedPatch) as
// "patch" in (*changes)[i]. `read` gives the content of a side of a change (after: true for
// d.after), called only for a side merge::NeedsContent. E2BIG once the patches pass kMaxContent
// (counted in *running_total across calls when given: log -p).
using SideReader = std::function<Result<std::string>(const DiffEntry& d, bool after)>;
Status AddPatches(const std::vector<DiffEntry>& d, const SideReader& read, nlohmann::json* changes,
                  uint64_t* running_total = nullptr);
// Both sides from history (a symlink's content is its target).
SideReader HistoryReader(Store& st);
// The side before from history, the side after read from the Workspace `ws` (status -p, diff A).
SideReader WorkingTreeReader(Store& st, workspace::Workspace& ws);
// The CLI's text for them: every patch, in order.
class Output;
void PrintPatches(const nlohmann::json& changes, Output& o);
// The CLI's text for changes: Git's name-status (`M\tPATH`, a rename `R090\tOLD\tNEW`), or with
// `stat` each path's size change and a summary line; paths as merge::GitQuote prints them.
void PrintChanges(const nlohmann::json& changes, bool stat, Output& o);

std::string Base64Encode(std::string_view data);
// EINVAL on a character outside the alphabet or a bad length (padding optional).
Result<std::string> Base64Decode(std::string_view text);

}  // namespace layerfs::cli
