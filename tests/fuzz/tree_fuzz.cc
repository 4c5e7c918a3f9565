// Fuzz target: the tree decoder (docs/format.md, "Tree"). What decodes must hold only valid
// names in strict order, and must survive an encode/decode round trip unchanged.
#include "fuzz_util.h"
#include "objects/tree.h"

using namespace layerfs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = objects::DecodeTree(fuzz::AsView(data, size));
  if (!t.ok()) return 0;
  for (size_t i = 0; i < t->size(); i++) {
    FUZZ_CHECK(objects::ValidName((*t)[i].name));
    FUZZ_CHECK(i == 0 || (*t)[i - 1].name < (*t)[i].name);
  }
  const std::string again = objects::EncodeTree(*t);
  auto t2 = objects::DecodeTree(again);
  FUZZ_CHECK(t2.ok());
  FUZZ_CHECK(objects::EncodeTree(*t2) == again);
  return 0;
}
