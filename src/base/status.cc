#include "layerfs/status.h"

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
