#include "layerfs/ids.h"

namespace layerfs {

std::string ObjectId::Hex() const {
  static const char* kDigits = "0123456789abcdef";
  std::string s(kSize * 2, '0');
  for (size_t i = 0; i < kSize; i++) {
    s[2 * i] = kDigits[bytes[i] >> 4];
    s[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return s;
}

static int HexVal(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<ObjectId> ObjectId::FromHex(std::string_view hex) {
  if (hex.size() != kSize * 2) return std::nullopt;
  ObjectId id;
  for (size_t i = 0; i < kSize; i++) {
    int hi = HexVal(hex[2 * i]), lo = HexVal(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    id.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return id;
}

}  // namespace layerfs
