// MemTransport: a Transport held in memory, for unit tests of the layers above (push, fetch,
// lazy reads) without a disk or a cluster. Keys follow the contract's rules; every change of a
// key gives it a new version, which is its ref token. Thread-safe (one mutex).
#pragma once

#include <memory>
#include <string_view>

#include "remote/transport.h"

namespace layerfs::remote {

// `url` only names the transport in messages.
std::unique_ptr<Transport> NewMemTransport(std::string_view url = "mem://test");

}  // namespace layerfs::remote
