#include "base/coding.h"

#include <cstring>

namespace layerfs::base {

void PutFixed32(std::string* dst, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; i++) b[i] = static_cast<char>(v >> (8 * i));
  dst->append(b, 4);
}

void PutFixed64(std::string* dst, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; i++) b[i] = static_cast<char>(v >> (8 * i));
  dst->append(b, 8);
}

void PutBigEndian64(std::string* dst, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; i++) b[i] = static_cast<char>(v >> (56 - 8 * i));
  dst->append(b, 8);
}

void PutBigEndian32(std::string* dst, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; i++) b[i] = static_cast<char>(v >> (24 - 8 * i));
  dst->append(b, 4);
}

uint64_t GetBigEndian64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | static_cast<uint8_t>(p[i]);
  return v;
}

void PutVarint(std::string* dst, uint64_t v) {
  while (v >= 0x80) {
    dst->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  dst->push_back(static_cast<char>(v));
}

void PutBytes(std::string* dst, std::string_view s) {
  PutVarint(dst, s.size());
  dst->append(s);
}

bool Reader::U8(uint8_t* v) {
  if (!ok_ || pos_ + 1 > s_.size()) return Fail();
  *v = static_cast<uint8_t>(s_[pos_++]);
  return true;
}

bool Reader::Fixed32(uint32_t* v) {
  if (!ok_ || pos_ + 4 > s_.size()) return Fail();
  uint32_t r = 0;
  for (int i = 0; i < 4; i++) r |= static_cast<uint32_t>(static_cast<uint8_t>(s_[pos_ + i])) << (8 * i);
  pos_ += 4;
  *v = r;
  return true;
}

bool Reader::Fixed64(uint64_t* v) {
  if (!ok_ || pos_ + 8 > s_.size()) return Fail();
  uint64_t r = 0;
  for (int i = 0; i < 8; i++) r |= static_cast<uint64_t>(static_cast<uint8_t>(s_[pos_ + i])) << (8 * i);
  pos_ += 8;
  *v = r;
  return true;
}

bool Reader::Varint(uint64_t* v) {
  uint64_t r = 0;
  for (int shift = 0; shift <= 63; shift += 7) {
    if (!ok_ || pos_ >= s_.size()) return Fail();
    uint8_t b = static_cast<uint8_t>(s_[pos_++]);
    r |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return true;
    }
  }
  return Fail();
}

bool Reader::SVarint(int64_t* v) {
  uint64_t u;
  if (!Varint(&u)) return false;
  *v = static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
  return true;
}

bool Reader::Raw(size_t n, std::string_view* v) {
  if (!ok_ || n > s_.size() - pos_) return Fail();
  *v = s_.substr(pos_, n);
  pos_ += n;
  return true;
}

bool Reader::Bytes(std::string_view* v) {
  uint64_t n;
  if (!Varint(&n)) return false;
  return Raw(n, v);
}

}  // namespace layerfs::base
