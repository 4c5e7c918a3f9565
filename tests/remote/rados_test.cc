// What the RADOS transport promises beyond the contract: blobs up to one RADOS write and a
// clear EFBIG beyond, namespaces that keep remotes apart, clear errors for a missing pool, a
// missing config, an unknown client and an unreachable cluster; and (RemoteFaultTest, run
// alone) a killed OSD gives ETIMEDOUT after the transport's timeout instead of a hang.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "../unit/test_util.h"
#include "cluster_env.h"
#include "remote/transport.h"

namespace layerfs::remote {
namespace {


class RadosTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status s = LoadClusterEnv();
    ASSERT_TRUE(s.ok()) << s.message();
    pool_ = ClusterVar("LAYERFS_TEST_RADOS_POOL");
    url_ = fmt::format("rados://{}/{}", pool_, UniqueName("rados"));
    auto t = OpenTransport(url_);
    ASSERT_TRUE(t.ok()) << t.status().message();
    t_ = std::move(*t);
  }
  void TearDown() override {
    if (!t_) return;
    auto keys = t_->List("");
    if (keys.ok())
      for (const auto& k : *keys) (void)t_->Delete(k);
  }
  std::string pool_, url_;
  std::unique_ptr<Transport> t_;
};

TEST_F(RadosTest, BlobsUpToOneWriteRoundTripAndLargerOnesFailClearly) {
  std::string big = testing::RandomBytes(80 << 20, 3);
  ASSERT_TRUE(t_->Put("packs/big", big).ok());
  auto got = t_->Get("packs/big");  // more than Get's first read: the second, version-checked op
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(*got == big);
  std::vector<RangeRead> r(2);
  r[0] = {.key = "packs/big", .offset = (80 << 20) - 10, .length = 100};
  r[1] = {.key = "packs/big", .offset = 12345678, .length = 4 << 20};
  ASSERT_TRUE(t_->ReadRanges(&r).ok());
  EXPECT_EQ(r[0].data, big.substr((80 << 20) - 10));
  EXPECT_TRUE(r[1].data == big.substr(12345678, 4 << 20));
  big.clear();
  got = Result<std::string>(std::string());

  std::string huge(91 << 20, 'x');  // over osd_max_write_size (90 MiB)
  Status s = t_->Put("packs/huge", huge);
  EXPECT_EQ(s.code(), EFBIG) << s.message();
  EXPECT_NE(s.message().find("packs/huge"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("osd_max_write_size"), std::string::npos) << s.message();
  EXPECT_EQ(t_->PutIfAbsent("packs/huge", huge).code(), EFBIG);
  EXPECT_EQ(t_->Size("packs/huge").status().code(), ENOENT);  // nothing half-written
}

TEST_F(RadosTest, NamespacesKeepRemotesApart) {
  auto other = OpenTransport(fmt::format("rados://{}/{}", pool_, UniqueName("other")));
  ASSERT_TRUE(other.ok()) << other.status().message();
  ASSERT_TRUE(t_->Put("refs/heads/main", "mine").ok());
  ASSERT_TRUE((*other)->Put("refs/heads/main", "theirs").ok());
  ASSERT_TRUE((*other)->Put("only/there", "x").ok());
  EXPECT_EQ(*t_->Get("refs/heads/main"), "mine");
  EXPECT_EQ(*(*other)->Get("refs/heads/main"), "theirs");
  EXPECT_EQ(t_->Get("only/there").status().code(), ENOENT);
  auto mine = t_->List("");
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(*mine, std::vector<std::string>{"refs/heads/main"});
  auto theirs = (*other)->List("");
  ASSERT_TRUE(theirs.ok());
  for (const auto& k : *theirs) EXPECT_TRUE((*other)->Delete(k).ok());
}

TEST_F(RadosTest, RefTokenIsTheObjectVersion) {
  auto t1 = t_->CasRef("refs/heads/main", "a", std::nullopt);
  ASSERT_TRUE(t1.ok()) << t1.status().message();
  auto t2 = t_->CasRef("refs/heads/main", "b", *t1);
  ASSERT_TRUE(t2.ok()) << t2.status().message();
  EXPECT_GT(std::stoull(*t2), std::stoull(*t1));
  // Delete and re-create: the version keeps growing, so the old token stays stale.
  ASSERT_TRUE(t_->Delete("refs/heads/main").ok());
  auto t3 = t_->CasRef("refs/heads/main", "b", std::nullopt);
  ASSERT_TRUE(t3.ok());
  EXPECT_GT(std::stoull(*t3), std::stoull(*t2));
  EXPECT_EQ(t_->CasRef("refs/heads/main", "c", *t2).status().code(), ESTALE);
  EXPECT_EQ(t_->CasRef("refs/heads/main", "c", "not-a-version").status().code(), ESTALE);
}

TEST(RadosOpenTest, MissingPoolIsNamed) {
  ASSERT_TRUE(LoadClusterEnv().ok());
  auto t = OpenTransport("rados://no-such-pool-here");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), ENOENT);
  EXPECT_NE(t.status().message().find("pool 'no-such-pool-here' does not exist"), std::string::npos)
      << t.status().message();
}

TEST(RadosOpenTest, MissingConfigIsNamed) {
  ASSERT_TRUE(LoadClusterEnv().ok());
  ScopedEnv conf("CEPH_CONF", "/nonexistent/ceph.conf");
  auto t = OpenTransport("rados://" + ClusterVar("LAYERFS_TEST_RADOS_POOL"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("CEPH_CONF"), std::string::npos) << t.status().message();
}

TEST(RadosOpenTest, UnknownClientIsRefused) {
  ASSERT_TRUE(LoadClusterEnv().ok());
  ScopedEnv args("CEPH_ARGS", "--id nobody-here");
  ScopedEnv timeout("LAYERFS_REMOTE_TIMEOUT", "5");
  auto t = OpenTransport("rados://" + ClusterVar("LAYERFS_TEST_RADOS_POOL"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("client.nobody-here"), std::string::npos) << t.status().message();
}

TEST(RadosOpenTest, UnreachableClusterTimesOut) {
  ASSERT_TRUE(LoadClusterEnv().ok());
  testing::TempDir d;
  std::string dir = ClusterVar("LAYERFS_TEST_CEPH_DIR");
  // The cluster's config with the monitor moved to a port nothing listens on.
  int port = UnusedPort();
  ASSERT_NE(port, 0);
  std::ifstream in(dir + "/ceph.conf");
  std::string conf, line;
  while (std::getline(in, line)) {
    if (line.starts_with("mon host")) line = fmt::format("mon host = 127.0.0.1:{}", port);
    conf += line + "\n";
  }
  testing::WriteFile(d / "ceph.conf", conf);
  ScopedEnv c("CEPH_CONF", d / "ceph.conf");
  ScopedEnv timeout("LAYERFS_REMOTE_TIMEOUT", "3");
  auto start = std::chrono::steady_clock::now();
  auto t = OpenTransport("rados://" + ClusterVar("LAYERFS_TEST_RADOS_POOL"));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), ETIMEDOUT) << t.status().message();
  EXPECT_NE(t.status().message().find("cannot connect"), std::string::npos) << t.status().message();
  EXPECT_LT(secs, 60) << "the 3 s timeout was not applied";  // a hang check, not a speed test
}

TEST(RemoteFaultTest, KilledOsdGivesTimeoutNotAHang) {
  ASSERT_TRUE(LoadClusterEnv().ok());
  ScopedEnv timeout("LAYERFS_REMOTE_TIMEOUT", "5");
  std::string url = fmt::format("rados://{}/{}", ClusterVar("LAYERFS_TEST_RADOS_POOL"), UniqueName("fault"));
  auto t = OpenTransport(url);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_TRUE((*t)->Put("before", "x").ok());
  // A writer keeps pushing 4 MiB blobs; the OSD dies under it.
  std::atomic<bool> stop{false};
  Status writer_error;
  double writer_secs = 0;
  std::thread writer([&] {
    std::string blob = testing::RandomBytes(4 << 20, 9);
    for (int i = 0; !stop; i++) {
      auto start = std::chrono::steady_clock::now();
      Status s = (*t)->Put(fmt::format("packs/{}", i), blob);
      if (!s.ok()) {
        writer_error = s;
        writer_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        return;
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Cluster("kill", "osd");
  auto start = std::chrono::steady_clock::now();
  auto r = (*t)->Get("before");
  double read_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stop = true;
  writer.join();
  Cluster("revive", "osd");

  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ETIMEDOUT) << r.status().message();
  EXPECT_NE(r.status().message().find("'before'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("no answer from the cluster in 5 s"), std::string::npos) << r.status().message();
  EXPECT_LT(read_secs, 60) << "the 5 s timeout was not applied";  // a hang check
  ASSERT_FALSE(writer_error.ok()) << "the writer never failed";
  EXPECT_EQ(writer_error.code(), ETIMEDOUT) << writer_error.message();
  EXPECT_LT(writer_secs, 60);
  // Back: the same transport works again and nothing it had written is lost.
  // (The client learns the OSD's new address within a few timeouts: measured 1.2 s.)
  auto again = (*t)->Get("before");
  for (int i = 0; i < 12 && !again.ok(); i++) again = (*t)->Get("before");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, "x");
  auto keys = (*t)->List("");
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  for (const auto& k : *keys) EXPECT_TRUE((*t)->Delete(k).ok());
}

}  // namespace
}  // namespace layerfs::remote
