// Fuzz target: the merge record a Workspace keeps while a merge is stopped on conflicts
// (docs/format.md, "Merge record"), with a round trip.
#include "fuzz_util.h"
#include "merge/merge_into.h"

using namespace layerfs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = merge::DecodeMergeState(fuzz::AsView(data, size));
  if (!m.ok()) return 0;
  const std::string again = merge::EncodeMergeState(*m);
  auto m2 = merge::DecodeMergeState(again);
  FUZZ_CHECK(m2.ok());
  FUZZ_CHECK(merge::EncodeMergeState(*m2) == again);
  return 0;
}
