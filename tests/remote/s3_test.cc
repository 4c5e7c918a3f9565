// What the S3 transport promises beyond the contract, against radosgw: the bucket is created by
// the first write (also by several writers at once) and an absent bucket reads as an empty
// remote; credentials from a profile file; wrong keys and a dead endpoint give clear errors;
// large blobs; and (RemoteFaultTest, run alone) a radosgw killed mid-transfer gives a clear error
// at once and the same transport works again once it is back.
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../unit/test_util.h"
#include "cluster_env.h"
#include "remote/transport.h"

namespace layerfs::remote {
namespace {


std::string Endpoint() { return ClusterVar("LAYERFS_TEST_S3_ENDPOINT"); }

std::string FreshUrl(std::string_view prefix = "") {
  std::string p = prefix.empty() ? "" : "/" + std::string(prefix);
  return fmt::format("s3://{}{}?endpoint={}", UniqueName("s3test"), p, Endpoint());
}

std::unique_ptr<Transport> OpenOrFail(const std::string& url) {
  auto t = OpenTransport(url);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(*t) : nullptr;
}

class S3Test : public ::testing::Test {
 protected:
  void SetUp() override {
    Status s = LoadS3Env();
    ASSERT_TRUE(s.ok()) << s.message();
  }
};

TEST_F(S3Test, AbsentBucketIsAnEmptyRemoteUntilTheFirstWriteCreatesIt) {
  auto t = OpenOrFail(FreshUrl());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->Get("k").status().code(), ENOENT);
  EXPECT_EQ(t->Size("k").status().code(), ENOENT);
  auto l = t->List("");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_TRUE(l->empty());
  auto r = t->GetRef("refs/heads/main");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->has_value());
  EXPECT_TRUE(t->Delete("k").ok());
  auto tok = t->CasRef("refs/heads/main", "c1", std::nullopt);  // creates the bucket
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  EXPECT_EQ(*t->Get("refs/heads/main"), "c1");
}

TEST_F(S3Test, WritersRacingOnANewBucketAllSucceed) {
  std::string url = FreshUrl("pre");
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; i++) {
    ts.emplace_back([&, i] {
      auto t = OpenOrFail(url);
      Status s = t->Put(fmt::format("k{}", i), "v");
      if (s.ok()) ok++;
      else ADD_FAILURE() << s.message();
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 4);
  auto t = OpenOrFail(url);
  auto l = t->List("");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(*l, (std::vector<std::string>{"k0", "k1", "k2", "k3"}));
}

TEST_F(S3Test, PrefixesKeepRemotesApartInOneBucket) {
  std::string bucket = UniqueName("s3test");
  auto a = OpenOrFail(fmt::format("s3://{}/team/a?endpoint={}", bucket, Endpoint()));
  auto b = OpenOrFail(fmt::format("s3://{}/team/ab?endpoint={}", bucket, Endpoint()));
  ASSERT_TRUE(a->Put("x", "in a").ok());
  ASSERT_TRUE(b->Put("x", "in ab").ok());
  EXPECT_EQ(*a->Get("x"), "in a");
  auto la = a->List("");
  ASSERT_TRUE(la.ok());
  EXPECT_EQ(*la, std::vector<std::string>{"x"});  // not "b/x" from team/ab
}

TEST_F(S3Test, CredentialsFromAProfileFile) {
  testing::TempDir d;
  testing::WriteFile(d / "credentials",
                     fmt::format("[default]\naws_access_key_id = WRONG\naws_secret_access_key = WRONG\n\n"
                                 "# the test user\n[ceph]\naws_access_key_id = {}\naws_secret_access_key={}\n",
                                 ClusterVar("LAYERFS_TEST_S3_ACCESS_KEY"), ClusterVar("LAYERFS_TEST_S3_SECRET_KEY")));
  testing::WriteFile(d / "config", "[profile ceph]\nregion = us-east-1\n");
  ScopedEnv id("AWS_ACCESS_KEY_ID", nullptr), secret("AWS_SECRET_ACCESS_KEY", nullptr);
  ScopedEnv file("AWS_SHARED_CREDENTIALS_FILE", (d / "credentials").c_str());
  ScopedEnv config("AWS_CONFIG_FILE", (d / "config").c_str());
  std::string url = FreshUrl();
  {
    ScopedEnv profile("AWS_PROFILE", "ceph");
    auto t = OpenOrFail(url);
    ASSERT_TRUE(t);
    Status s = t->Put("k", "from a profile");
    ASSERT_TRUE(s.ok()) << s.message();
  }
  ScopedEnv profile("AWS_PROFILE", nullptr);  // [default] has the wrong keys
  auto t = OpenOrFail(url);
  ASSERT_TRUE(t);
  auto g = t->Get("k");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), EACCES) << g.status().message();
  EXPECT_NE(g.status().message().find("InvalidAccessKeyId"), std::string::npos) << g.status().message();
}

TEST_F(S3Test, WrongSecretIsRefusedClearly) {
  ScopedEnv secret("AWS_SECRET_ACCESS_KEY", "not-the-secret");
  auto t = OpenOrFail(FreshUrl());
  ASSERT_TRUE(t);
  Status s = t->Put("k", "v");
  EXPECT_EQ(s.code(), EACCES) << s.message();
  EXPECT_NE(s.message().find("SignatureDoesNotMatch"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("put 'k'"), std::string::npos) << s.message();
}

TEST_F(S3Test, DeadEndpointFailsAtOnce) {
  int port = UnusedPort();
  ASSERT_NE(port, 0);
  auto t = OpenOrFail(fmt::format("s3://{}?endpoint=http://127.0.0.1:{}", UniqueName("s3test"), port));
  ASSERT_TRUE(t);
  auto g = t->Get("k");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), ECONNREFUSED) << g.status().message();
  EXPECT_NE(g.status().message().find("cannot connect"), std::string::npos) << g.status().message();
}

TEST_F(S3Test, LargeBlobsAndManyRangesInParallel) {
  auto t = OpenOrFail(FreshUrl());
  ASSERT_TRUE(t);
  std::string big = testing::RandomBytes(100 << 20, 5);
  Status s = t->Put("packs/big", big);
  ASSERT_TRUE(s.ok()) << s.message();
  auto g = t->Get("packs/big");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(*g == big);
  std::vector<RangeRead> r(64);
  for (size_t i = 0; i < r.size(); i++) r[i] = {.key = "packs/big", .offset = i * 1500001, .length = 70000};
  ASSERT_TRUE(t->ReadRanges(&r).ok());
  for (size_t i = 0; i < r.size(); i++) EXPECT_TRUE(r[i].data == big.substr(i * 1500001, 70000)) << i;
}

TEST(RemoteFaultTest, KilledRadosgwGivesAClearErrorAtOnce) {
  ASSERT_TRUE(LoadS3Env().ok());
  // 15 s: long enough for a loaded radosgw to create the bucket, short of the 30 s the checks below allow.
  ScopedEnv timeout("LAYERFS_REMOTE_TIMEOUT", "15");
  auto t = OpenOrFail(FreshUrl());
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->Put("before", "x").ok());
  std::atomic<bool> stop{false};
  Status writer_error;
  double writer_secs = 0;
  std::thread writer([&] {
    std::string blob = testing::RandomBytes(16 << 20, 11);
    for (int i = 0; !stop; i++) {
      auto start = std::chrono::steady_clock::now();
      Status s = t->Put(fmt::format("packs/{}", i), blob);
      if (!s.ok()) {
        writer_error = s;
        writer_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        return;
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Cluster("kill", "rgw");
  auto start = std::chrono::steady_clock::now();
  auto r = t->Get("before");
  double read_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stop = true;
  writer.join();
  Cluster("revive", "rgw");

  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ECONNREFUSED) << r.status().message();
  EXPECT_NE(r.status().message().find("get 'before': cannot connect"), std::string::npos) << r.status().message();
  EXPECT_LT(read_secs, 30) << "a refused connection should fail at once";  // a hang check
  ASSERT_FALSE(writer_error.ok()) << "the writer never failed";
  EXPECT_TRUE(writer_error.code() == EIO || writer_error.code() == ECONNREFUSED) << writer_error.message();
  EXPECT_LT(writer_secs, 30);
  auto again = t->Get("before");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, "x");
}

}  // namespace
}  // namespace layerfs::remote
