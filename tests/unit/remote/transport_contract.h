// The transport contract (src/remote/transport.h) as tests every backend must pass. A binary
// includes this header once and instantiates TransportContract with its backends:
// tests/unit/remote (memory, file) and tests/remote (RADOS and S3 on the test cluster).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../test_util.h"
#include "remote/fault_transport.h"
#include "remote/mem_transport.h"
#include "remote/transport.h"

namespace layerfs::remote {

// One backend under test. `fresh_url(tmp)` names an empty remote no other test uses (`tmp` is a
// directory the test owns); empty for the in-memory transport, which the fixture shares
// between the transports it opens.
struct ContractBackend {
  std::string name;
  std::function<std::string(const std::string& tmp)> fresh_url;
};

inline std::string BackendName(const ::testing::TestParamInfo<ContractBackend>& i) { return i.param.name; }

class TransportContract : public ::testing::TestWithParam<ContractBackend> {
 protected:
  void SetUp() override {
    url_ = GetParam().fresh_url ? GetParam().fresh_url(dir_.path()) : "";
    if (url_.empty()) mem_ = NewMemTransport();
    t_ = Open();
    ASSERT_NE(t_, nullptr);
  }
  void TearDown() override {
    if (!t_ || url_.empty() || url_.starts_with("file:")) return;
    auto keys = t_->List("");  // leave the shared cluster as we found it
    if (keys.ok())
      for (const auto& k : *keys) (void)t_->Delete(k);
  }
  // Another transport onto the same remote: another process or host.
  std::unique_ptr<Transport> Open() {
    if (mem_) return std::make_unique<FaultTransport>(mem_.get());
    auto t = OpenTransport(url_);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return t.ok() ? std::move(*t) : nullptr;
  }
  std::string GetOr(std::string_view key) {
    auto r = t_->Get(key);
    return r.ok() ? *r : "<" + std::string(strerror(r.status().code())) + ">";
  }

  layerfs::testing::TempDir dir_;
  std::string url_;
  std::unique_ptr<Transport> mem_;
  std::unique_ptr<Transport> t_;
};

TEST_P(TransportContract, BlobsRoundTripAndPutReplaces) {
  std::string big = layerfs::testing::RandomBytes(3 << 20, 7);
  ASSERT_TRUE(t_->Put("packs/one.pack", big).ok());
  ASSERT_TRUE(t_->Put("empty", "").ok());
  ASSERT_TRUE(t_->Put("bin", std::string("\0\xff\n\r ", 5)).ok());
  EXPECT_EQ(GetOr("packs/one.pack"), big);
  EXPECT_EQ(GetOr("empty"), "");
  EXPECT_EQ(GetOr("bin"), std::string("\0\xff\n\r ", 5));
  ASSERT_TRUE(t_->Put("bin", "second").ok());
  EXPECT_EQ(GetOr("bin"), "second");
  auto absent = t_->Get("packs/two.pack");
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), ENOENT);
  EXPECT_NE(absent.status().message().find("packs/two.pack"), std::string::npos) << absent.status().message();
  // Another transport sees the same bytes.
  auto other = Open();
  auto r = other->Get("packs/one.pack");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, big);
}

TEST_P(TransportContract, PutIfAbsentRefusesAnExistingKey) {
  ASSERT_TRUE(t_->PutIfAbsent("objects/x", "first").ok());
  Status s = t_->PutIfAbsent("objects/x", "second");
  EXPECT_EQ(s.code(), EEXIST) << s.message();
  EXPECT_EQ(GetOr("objects/x"), "first");
  auto list = t_->List("objects/");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, std::vector<std::string>{"objects/x"});  // no temporary left visible
}

TEST_P(TransportContract, ConcurrentPutIfAbsentHasOneWinner) {
  std::atomic<int> wins{0}, exists{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 6; i++) {
    ts.emplace_back([&, i] {
      auto t = Open();
      Status s = t->PutIfAbsent("claim", "writer " + std::to_string(i));
      if (s.ok()) wins++;
      else if (s.code() == EEXIST) exists++;
      else ADD_FAILURE() << s.message();
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(exists.load(), 5);
  EXPECT_TRUE(GetOr("claim").starts_with("writer "));
}

TEST_P(TransportContract, SizeOfBlobs) {
  ASSERT_TRUE(t_->Put("a/size", std::string(12345, 'z')).ok());
  ASSERT_TRUE(t_->Put("a/zero", "").ok());
  auto s = t_->Size("a/size");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(*s, 12345u);
  auto z = t_->Size("a/zero");
  ASSERT_TRUE(z.ok()) << z.status().message();
  EXPECT_EQ(*z, 0u);
  EXPECT_EQ(t_->Size("a/none").status().code(), ENOENT);
}

TEST_P(TransportContract, ReadRangesIncludingPastTheEnd) {
  std::string a = layerfs::testing::RandomBytes(1 << 20, 1), b = layerfs::testing::TextBytes(5000, 2);
  ASSERT_TRUE(t_->Put("p/a", a).ok());
  ASSERT_TRUE(t_->Put("p/b", b).ok());
  std::vector<RangeRead> reads(7);
  reads[0] = {.key = "p/a", .offset = 0, .length = 100};
  reads[1] = {.key = "p/a", .offset = 500000, .length = 300000};
  reads[2] = {.key = "p/b", .offset = 4990, .length = 100};      // runs past the end
  reads[3] = {.key = "p/b", .offset = 5000, .length = 10};       // starts at the end
  reads[4] = {.key = "p/b", .offset = 99999, .length = 10};      // starts past the end
  reads[5] = {.key = "p/a", .offset = (1 << 20) - 1, .length = 1};
  reads[6] = {.key = "p/b", .offset = 7, .length = 0};
  Status s = t_->ReadRanges(&reads);
  ASSERT_TRUE(s.ok()) << s.message();
  for (auto& r : reads) EXPECT_TRUE(r.status.ok()) << r.key << " " << r.status.message();
  EXPECT_EQ(reads[0].data, a.substr(0, 100));
  EXPECT_EQ(reads[1].data, a.substr(500000, 300000));
  EXPECT_EQ(reads[2].data, b.substr(4990));
  EXPECT_EQ(reads[3].data, "");
  EXPECT_EQ(reads[4].data, "");
  EXPECT_EQ(reads[5].data, a.substr((1 << 20) - 1));
  EXPECT_EQ(reads[6].data, "");

  std::vector<RangeRead> mixed(3);
  mixed[0] = {.key = "p/b", .offset = 10, .length = 20};
  mixed[1] = {.key = "p/missing", .offset = 0, .length = 20};
  mixed[2] = {.key = "p/a", .offset = 10, .length = 20};
  s = t_->ReadRanges(&mixed);
  EXPECT_EQ(s.code(), ENOENT) << s.message();
  EXPECT_TRUE(mixed[0].status.ok());
  EXPECT_EQ(mixed[0].data, b.substr(10, 20));
  EXPECT_EQ(mixed[1].status.code(), ENOENT);
  EXPECT_TRUE(mixed[2].status.ok());
  EXPECT_EQ(mixed[2].data, a.substr(10, 20));

  std::vector<RangeRead> none;
  EXPECT_TRUE(t_->ReadRanges(&none).ok());
}

TEST_P(TransportContract, ListIsSortedAndFiltersByPrefix) {
  // "a" and "a/b" both exist: keys are names, not files and directories.
  std::vector<std::string> keys = {"b/x", "a/b/c", "ab", "a", "a-z", "a/b", "refs/heads/main",
                                   "refs/heads/main/sub", "refs/heads/m", ".dot", "a/B"};
  for (const auto& k : keys) ASSERT_TRUE(t_->Put(k, "v:" + k).ok()) << k;
  for (const auto& k : keys) EXPECT_EQ(GetOr(k), "v:" + k);
  auto all = t_->List("");
  ASSERT_TRUE(all.ok()) << all.status().message();
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(*all, sorted);
  auto a = t_->List("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (std::vector<std::string>{"a", "a-z", "a/B", "a/b", "a/b/c", "ab"}));
  auto as = t_->List("a/");
  ASSERT_TRUE(as.ok());
  EXPECT_EQ(*as, (std::vector<std::string>{"a/B", "a/b", "a/b/c"}));
  auto heads = t_->List("refs/heads/m");
  ASSERT_TRUE(heads.ok());
  EXPECT_EQ(*heads, (std::vector<std::string>{"refs/heads/m", "refs/heads/main", "refs/heads/main/sub"}));
  auto none = t_->List("zz");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto deep = t_->List("q/r/s/");
  ASSERT_TRUE(deep.ok());
  EXPECT_TRUE(deep->empty());
}

TEST_P(TransportContract, DeleteRemovesAndIgnoresAbsentKeys) {
  ASSERT_TRUE(t_->Put("d/one", "1").ok());
  ASSERT_TRUE(t_->Put("d/two", "2").ok());
  ASSERT_TRUE(t_->Delete("d/one").ok());
  EXPECT_EQ(t_->Get("d/one").status().code(), ENOENT);
  EXPECT_TRUE(t_->Delete("d/one").ok());
  EXPECT_TRUE(t_->Delete("never/was").ok());
  auto l = t_->List("d/");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(*l, std::vector<std::string>{"d/two"});
  // A deleted key can be created again, exclusively too.
  EXPECT_TRUE(t_->PutIfAbsent("d/one", "again").ok());
  EXPECT_EQ(GetOr("d/one"), "again");
}

TEST_P(TransportContract, RefsMoveOnlyByCompareAndSwap) {
  auto absent = t_->GetRef("refs/heads/main");
  ASSERT_TRUE(absent.ok()) << absent.status().message();
  EXPECT_FALSE(absent->has_value());
  auto t1 = t_->CasRef("refs/heads/main", "commit-1", std::nullopt);
  ASSERT_TRUE(t1.ok()) << t1.status().message();
  auto again = t_->CasRef("refs/heads/main", "commit-x", std::nullopt);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), ESTALE) << again.status().message();
  auto got = t_->GetRef("refs/heads/main");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->value, "commit-1");
  EXPECT_EQ((*got)->token, *t1);
  auto t2 = t_->CasRef("refs/heads/main", "commit-2", (*got)->token);
  ASSERT_TRUE(t2.ok()) << t2.status().message();
  EXPECT_NE(*t2, *t1);
  auto stale = t_->CasRef("refs/heads/main", "commit-3", *t1);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), ESTALE);
  got = t_->GetRef("refs/heads/main");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->value, "commit-2");
  EXPECT_EQ((*got)->token, *t2);
  // A token for a ref that has since been deleted is stale; an absent ref is created again.
  ASSERT_TRUE(t_->Delete("refs/heads/main").ok());
  EXPECT_EQ(t_->CasRef("refs/heads/main", "commit-4", *t2).status().code(), ESTALE);
  auto t4 = t_->CasRef("refs/heads/main", "commit-4", std::nullopt);
  ASSERT_TRUE(t4.ok()) << t4.status().message();
  EXPECT_EQ(GetOr("refs/heads/main"), "commit-4");
}

TEST_P(TransportContract, RefMovedByAnotherHostIsStale) {
  auto other = Open();
  ASSERT_TRUE(t_->CasRef("refs/heads/dev", "A", std::nullopt).ok());
  auto mine = t_->GetRef("refs/heads/dev");
  ASSERT_TRUE(mine.ok() && mine->has_value());
  auto theirs = other->GetRef("refs/heads/dev");
  ASSERT_TRUE(theirs.ok() && theirs->has_value());
  EXPECT_EQ((*theirs)->token, (*mine)->token);
  ASSERT_TRUE(other->CasRef("refs/heads/dev", "B", (*theirs)->token).ok());
  auto lost = t_->CasRef("refs/heads/dev", "C", (*mine)->token);
  EXPECT_EQ(lost.status().code(), ESTALE);
  auto now = t_->GetRef("refs/heads/dev");
  ASSERT_TRUE(now.ok() && now->has_value());
  EXPECT_EQ((*now)->value, "B");
  // A plain Put of the ref changes its token too.
  ASSERT_TRUE(other->Put("refs/heads/dev", "D").ok());
  EXPECT_EQ(t_->CasRef("refs/heads/dev", "E", (*now)->token).status().code(), ESTALE);
}

TEST_P(TransportContract, RacingIncrementsCountExactly) {
  constexpr int kThreads = 4, kEach = 25;
  std::atomic<int> stale{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; i++) {
    ts.emplace_back([&] {
      auto t = Open();
      for (int n = 0; n < kEach;) {
        auto cur = t->GetRef("counter");
        ASSERT_TRUE(cur.ok()) << cur.status().message();
        int v = cur->has_value() ? std::stoi((*cur)->value) : 0;
        std::optional<std::string> expected;
        if (cur->has_value()) expected = (*cur)->token;
        auto r = t->CasRef("counter", std::to_string(v + 1), expected);
        if (r.ok()) {
          n++;
        } else {
          ASSERT_EQ(r.status().code(), ESTALE) << r.status().message();
          stale++;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  auto end = t_->GetRef("counter");
  ASSERT_TRUE(end.ok() && end->has_value());
  EXPECT_EQ((*end)->value, std::to_string(kThreads * kEach)) << stale.load() << " stale attempts";
}

// A remote's first writes at once, each from its own connection (a push's packs go up in
// parallel): where the first write makes the remote's container (an S3 bucket), those makings
// race, and radosgw answers the losers "BucketAlreadyExists" as if another owner had it. Every
// write lands.
TEST_P(TransportContract, FirstWritesOfManyConnectionsAllLand) {
  constexpr int kThreads = 6;
  std::vector<std::unique_ptr<Transport>> conns;
  for (int i = 0; i < kThreads; i++) conns.push_back(Open());
  std::vector<Status> got(kThreads);
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; i++)
    ts.emplace_back([&, i] { got[i] = conns[i]->Put("first/" + std::to_string(i), "v" + std::to_string(i)); });
  for (auto& t : ts) t.join();
  for (int i = 0; i < kThreads; i++) {
    EXPECT_TRUE(got[i].ok()) << got[i].message();
    EXPECT_EQ(GetOr("first/" + std::to_string(i)), "v" + std::to_string(i));
  }
}

TEST_P(TransportContract, BadKeysAreRefused) {
  const std::vector<std::string> bad = {"", "/a", "a/../b", "..", ".", "a/./b", "a//b", "a/",
                                        "a b", std::string("a\0b", 3), "caf\xc3\xa9", "a\\b",
                                        "a,lock", "a+", "x?y", std::string(513, 'k')};
  for (const auto& k : bad) {
    SCOPED_TRACE(k);
    EXPECT_EQ(CheckKey(k).code(), EINVAL);
    EXPECT_EQ(t_->Put(k, "x").code(), EINVAL);
    EXPECT_EQ(t_->PutIfAbsent(k, "x").code(), EINVAL);
    EXPECT_EQ(t_->Get(k).status().code(), EINVAL);
    EXPECT_EQ(t_->Size(k).status().code(), EINVAL);
    EXPECT_EQ(t_->Delete(k).code(), EINVAL);
    EXPECT_EQ(t_->GetRef(k).status().code(), EINVAL);
    EXPECT_EQ(t_->CasRef(k, "x", std::nullopt).status().code(), EINVAL);
    std::vector<RangeRead> r(1);
    r[0].key = k;
    r[0].length = 1;
    EXPECT_EQ(t_->ReadRanges(&r).code(), EINVAL);
    EXPECT_EQ(r[0].status.code(), EINVAL);
  }
  for (std::string p : {"/", "../", "a//", "a/../", "sp ace"}) EXPECT_EQ(t_->List(p).status().code(), EINVAL) << p;
  EXPECT_TRUE(CheckKey(std::string(512, 'k')).ok());
  EXPECT_TRUE(t_->Put(std::string(200, 'k'), "long").ok());
  EXPECT_TRUE(t_->Put("..x/.y/z..", "dots inside names").ok());
  EXPECT_EQ(GetOr("..x/.y/z.."), "dots inside names");
  auto all = t_->List("");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (std::vector<std::string>{"..x/.y/z..", std::string(200, 'k')}));
}

TEST_P(TransportContract, ListPagesThroughManyKeys) {
  // More than one page of an S3 listing (1000 keys), written by several threads.
  constexpr int kKeys = 1100;
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int w = 0; w < 4; w++) {
    ts.emplace_back([&, w] {
      auto t = Open();
      for (int i = w; i < kKeys; i += 4)
        if (!t->Put(fmt::format("many/{:05}", i), "").ok()) failures++;
    });
  }
  for (auto& t : ts) t.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_TRUE(t_->Put("manz", "").ok());
  auto l = t_->List("many/");
  ASSERT_TRUE(l.ok()) << l.status().message();
  ASSERT_EQ(l->size(), size_t{kKeys});
  for (int i = 0; i < kKeys; i++) ASSERT_EQ((*l)[i], fmt::format("many/{:05}", i));
}

}  // namespace layerfs::remote
