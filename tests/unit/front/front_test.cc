// How the front and the full CLI find a command line's Store (src/front/front.h).
#include "front/front.h"

#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace layerfs::front {
namespace {

using V = std::vector<std::string>;

TEST(Front, MountHelperForm) {
  EXPECT_TRUE(IsMountHelperForm(V{"layerfs", "/s:main", "/mnt"}));
  EXPECT_TRUE(IsMountHelperForm(V{"layerfs", "/a:b/s:main", "/mnt", "-o", "ro"}));
  EXPECT_FALSE(IsMountHelperForm(V{"layerfs", "/s:main"}));            // no DIR
  EXPECT_FALSE(IsMountHelperForm(V{"layerfs", "--store", "/s:x", "branch"}));
  EXPECT_FALSE(IsMountHelperForm(V{"layerfs", ":main", "/mnt"}));      // ':' first
  EXPECT_FALSE(IsMountHelperForm(V{"layerfs", "/s:", "/mnt"}));        // ':' last
  EXPECT_FALSE(IsMountHelperForm(V{"layerfs", "cat", "main:path"}));   // a verb
  EXPECT_FALSE(IsMountHelperForm(V{"layerfs", "", "/mnt"}));
}

TEST(Front, StoreOption) {
  EXPECT_EQ(StoreOption(V{"layerfs", "--store", "/s", "branch"}), "/s");
  EXPECT_EQ(StoreOption(V{"layerfs", "--store=/t", "log"}), "/t");
  EXPECT_EQ(StoreOption(V{"layerfs", "branch", "--store", "/s"}), "");  // after the verb: not the app's
  EXPECT_EQ(StoreOption(V{"layerfs", "--store"}), "");
  EXPECT_EQ(StoreOption(V{"layerfs"}), "");
}

TEST(Front, ResolveStoreOrderAndPaths) {
  char tmpl[] = "/tmp/layerfs-front-test.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  char real[PATH_MAX];
  ASSERT_NE(realpath(tmpl, real), nullptr);
  const std::string dir = real;
  ASSERT_EQ(mkdir((dir + "/store").c_str(), 0700), 0);
  ASSERT_EQ(symlink("store", (dir + "/link").c_str()), 0);
  const V args{"layerfs", "branch"};
  // --store first, relative to cwd and made real; then the environment; then nothing.
  EXPECT_EQ(ResolveStore("store", "/elsewhere", args, dir, false), dir + "/store");
  EXPECT_EQ(ResolveStore("link", nullptr, args, dir, false), dir + "/store");
  EXPECT_EQ(ResolveStore("", "link", args, dir, false), dir + "/store");
  EXPECT_EQ(ResolveStore("", "missing", args, dir, false), dir + "/missing");  // absolute, not real
  EXPECT_EQ(ResolveStore("", nullptr, V{"layerfs", "status", dir}, dir, false), "");  // not a mount
  EXPECT_EQ(ResolveStore("", nullptr, args, dir, true), "");
  unlink((dir + "/link").c_str());
  rmdir((dir + "/store").c_str());
  rmdir(dir.c_str());
}

TEST(Front, StoreOfMountOutsideAnyMount) {
  std::string mp = "x";
  EXPECT_EQ(StoreOfMount("/", &mp), "");
  EXPECT_EQ(mp, "");
  EXPECT_EQ(StoreOfMount("/no/such/path", &mp), "");
}

}  // namespace
}  // namespace layerfs::front
