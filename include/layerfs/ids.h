// ObjectId: the 128-bit content address of a stored object (blob, chunk, tree, commit).
//
// An id is a keyed XXH3-128 of the object's decoded bytes (see src/base/hash.h); the key is a
// per-Store secret, so ids from one Store say nothing about another's. Value type, thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace layerfs {

struct ObjectId {
  static constexpr size_t kSize = 16;
  std::array<uint8_t, kSize> bytes{};

  bool IsZero() const {
    for (auto b : bytes)
      if (b) return false;
    return true;
  }
  std::string_view AsKey() const {
    return std::string_view(reinterpret_cast<const char*>(bytes.data()), kSize);
  }
  static ObjectId FromKey(std::string_view k) {
    ObjectId id;
    std::memcpy(id.bytes.data(), k.data(), kSize);
    return id;
  }
  std::string Hex() const;
  // Parses exactly 32 hex digits.
  static std::optional<ObjectId> FromHex(std::string_view hex);
  auto operator<=>(const ObjectId&) const = default;
};

struct ObjectIdHash {
  size_t operator()(const ObjectId& id) const {
    size_t h;
    std::memcpy(&h, id.bytes.data(), sizeof h);
    return h;
  }
};

}  // namespace layerfs
