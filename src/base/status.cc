#include "layerfs/status.h"

#include <cstring>

namespace layerfs {

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->msg : kEmpty;
}

Status Status::Context(std::string_view ctx) const {
  if (ok()) return *this;
  return Status(code(), fmt::format("{}: {}", ctx, message()));
}

}  // namespace layerfs

namespace layerfs {

std::string Status::CodeName() const {
  switch (code()) {
    case 0: return "OK";
    case kNotFastForward: return "NOT_FAST_FORWARD";
    case kConflict: return "CONFLICT";
    case kDiverged: return "DIVERGED";
    case kTooLarge: return "TOO_LARGE";
    case kProtocol: return "PROTOCOL";
  }
  const char* name = strerrorname_np(code());
  return name ? name : fmt::format("E{}", code());
}

}  // namespace layerfs
