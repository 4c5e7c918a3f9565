// Private state of a Store shared by the history/*.cc files.
#pragma once

#include <memory>
#include <mutex>
#include <shared_mutex>

#include "layerfs/store.h"
#include "objects/background_encoder.h"

namespace layerfs {

struct Store::Impl {
  Policy policy;
  uint64_t seed = 0;
  int64_t created = 0;
  std::mutex ref_mu;  // serialises ref updates (check-and-set of branch heads)
  std::unique_ptr<objects::BackgroundEncoder> encoder;
  std::shared_mutex gc_mu;  // Store::gc_mutex()
};

namespace history {
bool ValidBranchName(std::string_view name);
int64_t NowNanos();
}  // namespace history

}  // namespace layerfs
