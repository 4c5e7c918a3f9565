// The transport contract (tests/unit/remote/transport_contract.h) against the test cluster:
// RADOS through librados, and S3 through radosgw. Each test gets a RADOS namespace, or an S3
// bucket (created by the transport's first write), of its own.
#include "../unit/remote/transport_contract.h"
#include "cluster_env.h"

namespace layerfs::remote {
namespace {

std::string RadosUrl(const std::string&) {
  Status s = LoadClusterEnv();
  if (!s.ok()) return "unavailable://" + s.message();  // fails the test's SetUp, loudly
  return fmt::format("rados://{}/{}", ClusterVar("LAYERFS_TEST_RADOS_POOL"), UniqueName("contract"));
}

std::string S3Url(const std::string&) {
  Status s = LoadS3Env();
  if (!s.ok()) return "unavailable://" + s.message();
  return fmt::format("s3://{}/some/prefix?endpoint={}", UniqueName("contract"), ClusterVar("LAYERFS_TEST_S3_ENDPOINT"));
}

INSTANTIATE_TEST_SUITE_P(Cluster, TransportContract,
                         ::testing::Values(ContractBackend{"rados", RadosUrl}, ContractBackend{"s3", S3Url}),
                         BackendName);

}  // namespace
}  // namespace layerfs::remote
