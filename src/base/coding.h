// Byte coding for persisted records: little-endian fixed ints and LEB128 varints.
// Decoding is bounds-checked: a Reader on truncated or garbage input fails, it never reads past
// the end. Not thread-safe per object; stateless otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace layerfs::base {

inline void PutU8(std::string* dst, uint8_t v) { dst->push_back(static_cast<char>(v)); }
void PutFixed32(std::string* dst, uint32_t v);
void PutFixed64(std::string* dst, uint64_t v);
// Big-endian, so keys sort numerically.
void PutBigEndian64(std::string* dst, uint64_t v);
void PutBigEndian32(std::string* dst, uint32_t v);
uint64_t GetBigEndian64(const char* p);
void PutVarint(std::string* dst, uint64_t v);
inline void PutSVarint(std::string* dst, int64_t v) {
  PutVarint(dst, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}
void PutBytes(std::string* dst, std::string_view s);  // varint length + bytes

// Sequential reader over a byte string. Every getter returns false on truncation; once one
// fails, ok() stays false.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool U8(uint8_t* v);
  bool Fixed32(uint32_t* v);
  bool Fixed64(uint64_t* v);
  bool Varint(uint64_t* v);
  bool SVarint(int64_t* v);
  bool Bytes(std::string_view* v);       // varint length + bytes
  bool Raw(size_t n, std::string_view* v);
  std::string_view Rest() const { return s_.substr(pos_); }
  bool AtEnd() const { return pos_ == s_.size(); }
  bool ok() const { return ok_; }

 private:
  bool Fail() { return ok_ = false; }
  std::string_view s_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace layerfs::base
