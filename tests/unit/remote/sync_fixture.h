// Fixture for push/fetch/clone/lazy tests: "hosts" (Stores on MemKvs sharing one id key) and
// remotes held in memory behind FaultTransports, reached by file:// URLs the test opener maps.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "../test_util.h"
#include "kv/kv.h"
#include "layerfs/store.h"
#include "objects/object_store.h"
#include "remote/config.h"
#include "remote/fault_transport.h"
#include "remote/lazy.h"
#include "remote/mem_transport.h"
#include "remote/remote.h"
#include "remote/sync.h"

namespace layerfs::testing {

// FILES text files of about SIZE bytes spread over seven directories, by path.
inline std::map<std::string, std::string> Tree(int files, uint64_t seed, size_t size = 3000) {
  std::map<std::string, std::string> m;
  for (int i = 0; i < files; i++)
    m["d" + std::to_string(i % 7) + "/f" + std::to_string(i)] = TextBytes(size + i, seed + i);
  return m;
}

struct Host {
  std::unique_ptr<kv::Kv> kv;
  std::unique_ptr<Store> store;
};

class SyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    remote::SetTransportOpenerForTesting([this](std::string_view url) -> Result<std::shared_ptr<remote::Transport>> {
      auto it = remotes_.find(std::string(url));
      if (it == remotes_.end()) return Status::NotFound(fmt::format("test: no remote {}", url));
      return std::shared_ptr<remote::Transport>(it->second, [](remote::Transport*) {});
    });
  }
  void TearDown() override { remote::SetTransportOpenerForTesting(nullptr); }

  // A remote in memory at file:///mem/NAME, behind a fault injector.
  remote::FaultTransport* NewRemote(const std::string& name = "r") {
    std::string url = "file:///mem/" + name;
    mem_.push_back(remote::NewMemTransport(url));
    faults_.push_back(std::make_unique<remote::FaultTransport>(mem_.back().get()));
    remotes_[url] = faults_.back().get();
    return faults_.back().get();
  }
  static std::string Url(const std::string& name = "r") { return "file:///mem/" + name; }

  // A Store on a MemKv; `seed` shared makes hosts of one history.
  Host NewHost(uint64_t seed = 42) {
    Host h;
    h.kv = kv::NewMemKv();
    CreateOptions co;
    co.seed = seed;
    auto st = Store::OpenOnKv(h.kv.get(), Policy{}, co);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    h.store = std::move(*st);
    return h;
  }
  // A host with the remote added (and its lazy source attached when lazy).
  Host NewHostWithRemote(const std::string& remote_name = "r", bool lazy = false, uint64_t seed = 42) {
    Host h = NewHost(seed);
    Status s = remote::AddRemote(*h.store, {"origin", Url(remote_name), lazy, ""});
    EXPECT_TRUE(s.ok()) << s.ToString();
    auto src = remote::AttachLazySource(*h.store);
    EXPECT_TRUE(src.ok());
    return h;
  }

  // Writes files (path -> content) under a fresh directory and imports it as the next Commit.
  ObjectId Commit(Host& h, const std::map<std::string, std::string>& files, const std::string& branch = "main") {
    auto dir = std::make_unique<TempDir>();
    for (const auto& [p, c] : files) {
      std::filesystem::create_directories(std::filesystem::path(dir->path() + "/" + p).parent_path());
      WriteFile(dir->path() + "/" + p, c);
    }
    // Fixed times, so a tree changes only where its content does.
    for (auto& e : std::filesystem::recursive_directory_iterator(dir->path())) SetMtime(e.path(), 1700000000, 0);
    for (auto& e : std::filesystem::recursive_directory_iterator(dir->path())) {
      if (e.is_directory()) SetMtime(e.path(), 1700000000, 0);
    }
    if (branch != "main" && !h.store->BranchHead(branch)->has_value()) {
      EXPECT_TRUE(h.store->Fork(branch, "main").ok());
    }
    ImportOptions o;
    o.branch = branch;
    o.message = "commit";
    o.use_stat_cache = false;
    auto r = h.store->Import(dir->path(), o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    dirs_.push_back(std::move(dir));
    return r.ok() ? *r : ObjectId{};
  }

  std::string Cat(Host& h, const ObjectId& commit, const std::string& path) {
    auto e = h.store->Lookup(commit, path);
    if (!e.ok()) return "<" + e.status().message() + ">";
    auto d = h.store->ReadFile(*e);
    return d.ok() ? *d : "<" + d.status().message() + ">";
  }

  Result<remote::PushResult> Push(Host& h, std::vector<std::string> branches = {"main"}, bool force = false) {
    remote::PushOptions o;
    o.branches = std::move(branches);
    o.force = force;
    return remote::Push(*h.store, "origin", o);
  }
  Result<remote::FetchResult> Fetch(Host& h) { return remote::Fetch(*h.store, "origin", {}); }

  std::map<std::string, remote::Transport*> remotes_;
  std::vector<std::unique_ptr<remote::Transport>> mem_;
  std::vector<std::unique_ptr<remote::FaultTransport>> faults_;
  std::vector<std::unique_ptr<TempDir>> dirs_;
  TempDir tmp_;
};

}  // namespace layerfs::testing
