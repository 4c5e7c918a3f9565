// Patches: blind writes of a byte range into a value (Batch::Patch), the operand of RocksKv's
// merge operator on the workspace family and applied directly by MemKv.
#include <cstring>

#include "kv/kv.h"

namespace layerfs::kv {
namespace {
constexpr size_t kMaxPatchedValue = 64u << 20;  // far above any value that is patched

uint32_t OffsetOf(std::string_view patch) {
  uint32_t off = 0;
  for (int i = 0; i < 4; i++) off |= uint32_t(static_cast<uint8_t>(patch[i])) << (8 * i);
  return off;
}

bool PatchValid(std::string_view patch) {
  return patch.size() >= 4 && size_t{OffsetOf(patch)} + (patch.size() - 4) <= kMaxPatchedValue;
}
}  // namespace

std::string EncodePatch(uint32_t offset, std::string_view bytes) {
  std::string out(4 + bytes.size(), '\0');
  for (int i = 0; i < 4; i++) out[i] = static_cast<char>((offset >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 4, bytes.data(), bytes.size());
  return out;
}

Status CheckPatch(Cf cf, std::string_view patch) {
  if (cf != Cf::kWorkspace) return Status::Error(EINVAL, "patch outside the workspace family");
  if (!PatchValid(patch)) return Status::Error(EINVAL, "malformed patch");
  return Status::Ok();
}

bool ApplyPatch(std::string_view patch, std::string* value) {
  if (!PatchValid(patch)) return false;
  const uint32_t off = OffsetOf(patch);
  std::string_view bytes = patch.substr(4);
  const size_t end = size_t{off} + bytes.size();
  if (value->size() < end) value->resize(end, '\0');
  std::memcpy(value->data() + off, bytes.data(), bytes.size());
  return true;
}

void Batch::Patch(Cf cf, std::string_view k, uint32_t offset, std::string_view bytes) {
  Add({Op::kPatch, cf, std::string(k), EncodePatch(offset, bytes)});
}

}  // namespace layerfs::kv
