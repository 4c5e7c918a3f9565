// Fuzz target: the Workspace inode record (docs/format.md, "Inode record"), with a round trip,
// and the attributes a mount would report from it.
#include "fuzz_util.h"
#include "workspace/inode.h"

using namespace layerfs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto n = workspace::DecodeInode(7, fuzz::AsView(data, size));
  if (!n.ok()) return 0;
  const workspace::Attr a = n->ToAttr();
  FUZZ_CHECK(a.ino == 7);
  (void)a.blocks();
  const std::string again = workspace::EncodeInode(*n);
  auto n2 = workspace::DecodeInode(7, again);
  FUZZ_CHECK(n2.ok());
  FUZZ_CHECK(workspace::EncodeInode(*n2) == again);
  return 0;
}
