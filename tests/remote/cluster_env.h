// The test cluster's settings for tests labelled `remote`: ctest sets LAYERFS_TEST_CLUSTER to the
// file naming the cluster's folder (tests/remote/cluster-fixture), or to the folder itself for a
// cluster started by hand with tests/remote/ceph-cluster. LoadClusterEnv() exports the folder's
// env file (CEPH_CONF, pool, S3 endpoint and keys) into this process. Tests fail, never skip,
// when the cluster is missing.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <fmt/format.h>

#include "layerfs/status.h"

namespace layerfs::remote {

inline Status LoadClusterEnv() {
  static Status loaded = [] {
    const char* where = getenv("LAYERFS_TEST_CLUSTER");
    if (!where || !*where) return Status::Error(ENOENT, "LAYERFS_TEST_CLUSTER is not set (run through ctest, which starts the test cluster)");
    std::string dir = where;
    if (!std::filesystem::is_directory(dir)) {
      std::ifstream ptr(dir);
      if (!std::getline(ptr, dir)) return Status::Errorf(ENOENT, "no test cluster: {} is missing (did the setup test fail?)", where);
    }
    std::ifstream env(dir + "/env");
    if (!env) return Status::Errorf(ENOENT, "no test cluster env in {} (did the cluster fail to start?)", dir);
    std::string line;
    while (std::getline(env, line)) {
      size_t eq = line.find('=');
      if (eq != std::string::npos) setenv(line.substr(0, eq).c_str(), line.substr(eq + 1).c_str(), 1);
    }
    return Status::Ok();
  }();
  return loaded;
}

inline std::string ClusterVar(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

// A name no other test run uses (namespaces, prefixes, buckets).
inline std::string UniqueName(std::string_view stem) {
  static std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}-{:012x}", stem, rng() & 0xffffffffffffull);
}

}  // namespace layerfs::remote
