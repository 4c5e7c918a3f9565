// The test cluster's settings for tests labelled `remote`: ctest sets LAYERFS_TEST_CLUSTER to the
// file naming the cluster's folder (tests/remote/cluster-fixture), or to the folder itself for a
// cluster started by hand with tests/remote/ceph-cluster. LoadClusterEnv() exports the folder's
// env file (CEPH_CONF, pool, S3 endpoint and keys) into this process. Tests fail, never skip,
// when the cluster is missing.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <fstream>
#include <random>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

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

// LoadClusterEnv, then the S3 user's keys as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
inline Status LoadS3Env() {
  LFS_TRY(LoadClusterEnv());
  const char* access = getenv("LAYERFS_TEST_S3_ACCESS_KEY");
  const char* secret = getenv("LAYERFS_TEST_S3_SECRET_KEY");
  if (!access || !secret) return Status::Error(ENOENT, "the test cluster's env has no S3 user");
  setenv("AWS_ACCESS_KEY_ID", access, 1);
  setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
  unsetenv("AWS_SESSION_TOKEN");
  return Status::Ok();
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

// Sets (or with nullptr unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ScopedEnv(const char* name, const std::string& value) : ScopedEnv(name, value.c_str()) {}
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Runs tests/remote/ceph-cluster VERB on the test cluster's DAEMON (kill / revive one).
inline void Cluster(const std::string& verb, const std::string& daemon) {
  std::string cmd = fmt::format("{}/tests/remote/ceph-cluster {} {} {}", LAYERFS_SOURCE_DIR, verb,
                                ClusterVar("LAYERFS_TEST_CEPH_DIR"), daemon);
  int rc = system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << cmd;
}

// A TCP port on 127.0.0.1 that nothing listens on (bound by the kernel's choice, then closed).
inline int UnusedPort() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(s);
  return port;
}

}  // namespace layerfs::remote
