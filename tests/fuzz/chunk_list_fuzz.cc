// Fuzz target: the chunk list decoder (docs/format.md, "Chunk list"), with a round trip.
#include "fuzz_util.h"
#include "objects/tree.h"

using namespace layerfs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto l = objects::DecodeChunkList(fuzz::AsView(data, size));
  if (!l.ok()) return 0;
  const std::string again = objects::EncodeChunkList(*l);
  auto l2 = objects::DecodeChunkList(again);
  FUZZ_CHECK(l2.ok() && l2->size() == l->size());
  FUZZ_CHECK(objects::EncodeChunkList(*l2) == again);
  return 0;
}
