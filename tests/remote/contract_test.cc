// The transport contract (tests/unit/remote/transport_contract.h) against the test cluster:
// RADOS through librados. Each test gets a namespace of its own in the cluster's pool.
#include "../unit/remote/transport_contract.h"
#include "cluster_env.h"

namespace layerfs::remote {
namespace {

std::string RadosUrl(const std::string&) {
  Status s = LoadClusterEnv();
  if (!s.ok()) return "unavailable://" + s.message();  // fails the test's SetUp, loudly
  return fmt::format("rados://{}/{}", ClusterVar("LAYERFS_TEST_RADOS_POOL"), UniqueName("contract"));
}

INSTANTIATE_TEST_SUITE_P(Cluster, TransportContract, ::testing::Values(ContractBackend{"rados", RadosUrl}),
                         BackendName);

}  // namespace
}  // namespace layerfs::remote
