// Fuzz target: the commit decoder (docs/format.md, "Commit"), with an encode/decode round trip.
#include "fuzz_util.h"
#include "objects/tree.h"

using namespace layerfs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto c = objects::DecodeCommit(fuzz::AsView(data, size));
  if (!c.ok()) return 0;
  const std::string again = objects::EncodeCommit(*c);
  auto c2 = objects::DecodeCommit(again);
  FUZZ_CHECK(c2.ok());
  FUZZ_CHECK(objects::EncodeCommit(*c2) == again);
  FUZZ_CHECK(c2->root == c->root && c2->parents == c->parents && c2->message == c->message);
  return 0;
}
