#include "merge/file_merge.h"

#include <git2.h>

#include <cstring>
#include <memory>
#include <mutex>

namespace layerfs::merge {

void InitLibgit2() {
  static std::once_flag once;
  std::call_once(once, [] { git_libgit2_init(); });
}

bool LooksBinary(std::string_view data) {
  return std::memchr(data.data(), '\0', std::min<size_t>(data.size(), 8000)) != nullptr;
}

Result<FileMergeResult> MergeText(const FileMergeInput& in) {
  for (auto side : {in.base, in.ours, in.theirs})
    if (side.size() > kMaxTextBytes || LooksBinary(side)) return Status::Invalid("binary content is not merged by lines");
  InitLibgit2();
  git_merge_file_input base = GIT_MERGE_FILE_INPUT_INIT, ours = GIT_MERGE_FILE_INPUT_INIT,
                       theirs = GIT_MERGE_FILE_INPUT_INIT;
  base.ptr = in.base.data();
  base.size = in.base.size();
  ours.ptr = in.ours.data();
  ours.size = in.ours.size();
  theirs.ptr = in.theirs.data();
  theirs.size = in.theirs.size();
  git_merge_file_options opts = GIT_MERGE_FILE_OPTIONS_INIT;
  opts.our_label = in.our_label.c_str();
  opts.their_label = in.their_label.c_str();
  opts.favor = in.favor == 1   ? GIT_MERGE_FILE_FAVOR_OURS
               : in.favor == 2 ? GIT_MERGE_FILE_FAVOR_THEIRS
                               : GIT_MERGE_FILE_FAVOR_NORMAL;
  if (in.keep_markers) opts.flags |= GIT_MERGE_FILE_ACCEPT_CONFLICTS;
  git_merge_file_result res{};
  if (git_merge_file(&res, &base, &ours, &theirs, &opts) != 0) {
    const git_error* e = git_error_last();
    return Status::Errorf(EIO, "file merge: {}", e && e->message ? e->message : "libgit2 failed");
  }
  std::unique_ptr<git_merge_file_result, void (*)(git_merge_file_result*)> hold(&res, git_merge_file_result_free);
  FileMergeResult out;
  out.clean = res.automergeable != 0;
  out.content.assign(res.ptr ? res.ptr : "", res.len);
  return out;
}

}  // namespace layerfs::merge
