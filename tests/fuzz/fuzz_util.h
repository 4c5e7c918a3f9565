// Helpers shared by the libFuzzer targets of tests/fuzz (docs/reliability.md, "Fuzzing").
//
// Inputs that carry several records are framed as `bytes` (varint length, then the bytes), the
// same framing the formats use, so seeds are easy to generate and the fuzzer's comparison
// tracing finds the lengths. A target aborts (FUZZ_CHECK) only on a broken invariant; a decoder
// refusing bad input with a Status is the expected outcome.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "base/coding.h"
#include "layerfs/ids.h"

#define FUZZ_CHECK(cond)                                                          \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                               \
    }                                                                             \
  } while (0)

namespace layerfs::fuzz {

inline std::string_view AsView(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits `in` into framed pieces (varint length + bytes); stops at the first malformed one or
// after `max` pieces.
inline std::vector<std::string_view> Pieces(std::string_view in, size_t max) {
  std::vector<std::string_view> out;
  base::Reader r(in);
  std::string_view p;
  while (out.size() < max && !r.AtEnd() && r.Bytes(&p)) out.push_back(p);
  return out;
}

// Object ids of the fuzzed Stores: slot i is {0xF0, i lo, i hi, 0, ..., 0}. Seeds written by
// layerfs_fuzz_seeds use them in place of real ids, and the verifier below stands in for the
// keyed hash: it accepts the content stored in a slot as long as every object it names by id
// (subtrees, a commit's root and parents) sits in a later slot, so the object graph stays
// acyclic, as keyed hashes make it in a real Store.
inline ObjectId SlotId(uint32_t i) {
  ObjectId id;
  id.bytes[0] = static_cast<uint8_t>(0xF0);
  id.bytes[1] = static_cast<uint8_t>(i & 0xff);
  id.bytes[2] = static_cast<uint8_t>(i >> 8);
  return id;
}
// The slot of `id`, or -1 if it is not a slot id.
inline int SlotOf(const ObjectId& id) {
  if (id.bytes[0] != 0xF0) return -1;
  for (size_t i = 3; i < ObjectId::kSize; i++)
    if (id.bytes[i] != 0) return -1;
  return id.bytes[1] | id.bytes[2] << 8;
}

}  // namespace layerfs::fuzz
