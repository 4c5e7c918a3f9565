// Fixture for Store tests: a Store on a MemKv and a scratch directory.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "../test_util.h"
#include "kv/kv.h"
#include "layerfs/store.h"

namespace layerfs::testing {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(Policy{}); }
  void Open(const Policy& p) {
    store_.reset();
    kv_ = kv::NewMemKv();
    auto st = Store::OpenOnKv(kv_.get(), p);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    store_ = std::move(*st);
  }
  // Imports `dir` into `branch`, asserting success.
  ObjectId Import(const std::string& dir, const std::string& branch = "main", ImportStats* stats = nullptr,
                  const std::string& msg = "") {
    ImportOptions o;
    o.branch = branch;
    o.message = msg;
    auto r = store_->Import(dir, o, stats);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ObjectId{};
  }
  ObjectId Head(const std::string& branch = "main") {
    auto h = store_->BranchHead(branch);
    EXPECT_TRUE(h.ok() && h->has_value());
    return h.ok() && h->has_value() ? **h : ObjectId{};
  }
  std::string Cat(const ObjectId& commit, const std::string& path) {
    auto e = store_->Lookup(commit, path);
    EXPECT_TRUE(e.ok()) << path << ": " << e.status().ToString();
    if (!e.ok()) return "<missing>";
    auto d = store_->ReadFile(*e);
    EXPECT_TRUE(d.ok()) << path << ": " << d.status().ToString();
    return d.ok() ? *d : "<unreadable>";
  }
  uint64_t ObjectCount() {
    auto s = store_->Stats();
    EXPECT_TRUE(s.ok());
    uint64_t n = 0;
    for (auto& [k, v] : s->objects) n += v;
    return n;
  }

  std::unique_ptr<kv::Kv> kv_;
  std::unique_ptr<Store> store_;
  TempDir tmp_;
};

}  // namespace layerfs::testing
