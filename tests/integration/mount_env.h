// In-process mounts for the integration tests: a Store in a fresh directory under /var/tmp, the
// Workspace of branch main, and a Mount serving it; plus a plain host directory beside it for
// parity runs. Everything is unmounted and removed on destruction, also after a failure.
#pragma once

#include <sys/mount.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "fuse/mount.h"
#include "layerfs/store.h"
#include "workspace/workspace.h"

namespace layerfs::itest {

// True if `path` is a mount point in this namespace.
inline bool IsMounted(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // 36 35 98:0 /root /mnt ... : the fifth field is the mount point.
    size_t pos = 0;
    for (int i = 0; i < 4 && pos != std::string::npos; ++i) pos = line.find(' ', pos + 1);
    if (pos == std::string::npos) continue;
    size_t end = line.find(' ', pos + 1);
    if (line.substr(pos + 1, end - pos - 1) == path) return true;
  }
  return false;
}

class MountEnv {
 public:
  MountEnv() {
    std::string tmpl = "/var/tmp/layerfs_it_XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp: " << strerror(errno);
    base_ = tmpl;
    std::filesystem::create_directories(mnt());
    std::filesystem::create_directories(host());
    auto s = Store::Create(base_ + "/store", Policy{});
    if (!s.ok()) ADD_FAILURE() << "Store::Create: " << s.status().ToString();
    else store_ = std::move(s).value();
  }
  ~MountEnv() {
    if (mount_) {
      Status s = mount_->Unmount();
      if (!s.ok()) ADD_FAILURE() << "Unmount: " << s.ToString();
      mount_.reset();
    }
    if (IsMounted(mnt())) {  // last resort, so a failed test never leaves a mount behind
      std::string cmd = "fusermount3 -u -z '" + mnt() + "' 2>/dev/null || umount -l '" + mnt() + "'";
      if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "could not unmount " << mnt();
    }
    ws_.reset();
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(base_, ec);
  }

  std::string mnt() const { return base_ + "/mnt"; }
  std::string host() const { return base_ + "/host"; }
  std::string store_dir() const { return base_ + "/store"; }
  Store& store() { return *store_; }
  workspace::Workspace& ws() { return *ws_; }
  fuse::Mount& mount() { return *mount_; }
  bool ok() const { return store_ != nullptr; }

  // Opens the Workspace (if not open) and mounts it.
  ::testing::AssertionResult Mount(const fuse::MountOptions& o = {}) {
    if (!ws_) {
      auto w = workspace::Workspace::Open(*store_, {.branch = "main"});
      if (!w.ok()) return ::testing::AssertionFailure() << "Workspace::Open: " << w.status().ToString();
      ws_ = std::move(w).value();
    }
    auto m = fuse::Mount::Start(ws_.get(), mnt(), o);
    if (!m.ok()) return ::testing::AssertionFailure() << "Mount::Start: " << m.status().ToString();
    mount_ = std::move(m).value();
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult Unmount() {
    if (!mount_) return ::testing::AssertionSuccess();
    Status s = mount_->Unmount();
    mount_.reset();
    if (!s.ok()) return ::testing::AssertionFailure() << "Unmount: " << s.ToString();
    return ::testing::AssertionSuccess();
  }

  void CloseWorkspace() { ws_.reset(); }
  // Closes the Workspace and the Store and opens the Store again.
  ::testing::AssertionResult ReopenStore() {
    ws_.reset();
    store_.reset();
    auto s = Store::Open(store_dir());
    if (!s.ok()) return ::testing::AssertionFailure() << "Store::Open: " << s.status().ToString();
    store_ = std::move(s).value();
    return ::testing::AssertionSuccess();
  }

 private:
  std::string base_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<workspace::Workspace> ws_;
  std::unique_ptr<fuse::Mount> mount_;
};

}  // namespace layerfs::itest
