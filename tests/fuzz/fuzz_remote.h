// Remote-side helpers of the fuzz targets (tests/fuzz, docs/reliability.md "Fuzzing"): index
// trailers, entry comparison, and the in-memory remote every target reaches by one URL.
#pragma once

#include <memory>

#include "base/hash.h"
#include "fuzz_util.h"
#include "remote/config.h"
#include "remote/mem_transport.h"
#include "remote/pack.h"

namespace layerfs::fuzz {

// The id key of the fuzzed Stores and remotes (the seeds' objects are hashed with it).
constexpr uint64_t kRemoteSeed = 42;
constexpr std::string_view kRemoteUrl = "file:///fuzz/remote";

// An index body with its trailer (XXH3-128, seed 0, of the body) appended: inputs carry indexes
// without it when their flags say so, so the fuzzer explores the entries, not the checksum.
inline std::string WithTrailer(std::string_view body) {
  std::string s(body);
  s.append(base::HashContent(body, 0).AsKey());
  return s;
}

inline bool SameEntry(const remote::IndexEntry& a, const remote::IndexEntry& b) {
  return a.kind == b.kind && a.id == b.id && a.depth == b.depth && (a.depth == 0 || a.base == b.base) &&
         a.frame_offset == b.frame_offset && a.frame_length == b.frame_length && a.codec == b.codec &&
         (a.codec != remote::FrameCodec::kZstd || a.frame_size == b.frame_size) &&
         a.record_offset == b.record_offset && a.record_length == b.record_length;
}

// The remote of the current input: every Connect (remote::Connect, as push, fetch and the lazy
// source open their remote) reaches this one MemTransport. Install() once per process.
inline std::shared_ptr<remote::Transport>& CurrentRemote() {
  static std::shared_ptr<remote::Transport> t;
  return t;
}
inline void InstallRemoteOpener() {
  static bool done = [] {
    remote::SetTransportOpenerForTesting([](std::string_view url) -> Result<std::shared_ptr<remote::Transport>> {
      if (url != kRemoteUrl || !CurrentRemote()) return Status::NotFound(fmt::format("fuzz: no remote {}", url));
      return CurrentRemote();
    });
    return true;
  }();
  (void)done;
}

}  // namespace layerfs::fuzz
