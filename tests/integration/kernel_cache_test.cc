// What the kernel keeps for a mount and what it still asks the daemon (docs/design.md, "Speed of
// real work"): the per-operation request counters, directory listings cached until the
// directory changes, a moved directory's "..", and FUSE_HANDLE_KILLPRIV_V2: no security.capability
// round trip before every write, and setuid/setgid cleared as the kernel clears them on ext4 (a
// writer without CAP_FSETID loses them, root keeps them).
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "mount_env.h"

namespace layerfs::itest {
namespace {

std::map<std::string, uint64_t> Counts(fuse::Mount& m) {
  std::map<std::string, uint64_t> out;
  for (const auto& [op, n] : m.RequestCounts()) out[op] = n;
  return out;
}

uint64_t Delta(const std::map<std::string, uint64_t>& before, const std::map<std::string, uint64_t>& after,
               const std::string& op) {
  auto a = after.find(op);
  auto b = before.find(op);
  return (a == after.end() ? 0 : a->second) - (b == before.end() ? 0 : b->second);
}

bool Put(const std::string& path, const std::string& data) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  return close(fd) == 0 && ok;
}

// Names in `dir` and the inode its ".." entry names.
std::map<std::string, ino_t> List(const std::string& dir) {
  std::map<std::string, ino_t> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) out[e->d_name] = e->d_ino;
  closedir(d);
  return out;
}

// Runs fn on a thread whose effective capabilities lack CAP_FSETID (capabilities are per thread).
template <typename Fn>
bool WithoutFsetid(Fn fn) {
  bool dropped = false;
  std::thread([&] {
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct d[2]{};
    if (syscall(SYS_capget, &h, d) != 0) return;
    d[CAP_FSETID / 32].effective &= ~(1u << (CAP_FSETID % 32));
    if (syscall(SYS_capset, &h, d) != 0) return;
    dropped = true;
    fn();
  }).join();
  return dropped;
}

bool KillprivOff() {
  const char* e = getenv("LAYERFS_FUSE_KILLPRIV");
  return e != nullptr && std::string_view(e) == "0";
}

TEST(KernelCacheTest, CountsRequestsPerOperation) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  auto before = Counts(env.mount());
  ASSERT_TRUE(Put(env.mnt() + "/a", "hello"));
  ASSERT_TRUE(Put(env.mnt() + "/b", "world"));
  ASSERT_EQ(mkdir((env.mnt() + "/d").c_str(), 0755), 0);
  auto after = Counts(env.mount());
  EXPECT_EQ(Delta(before, after, "create"), 2u);
  EXPECT_EQ(Delta(before, after, "mkdir"), 1u);
  EXPECT_GE(Delta(before, after, "write"), 2u);
  for (const auto& [op, n] : after) EXPECT_GT(n, 0u) << op;  // only operations that were served
}

TEST(KernelCacheTest, WritesDoNotAskForSecurityCapabilityEachTime) {
  if (KillprivOff()) GTEST_SKIP() << "LAYERFS_FUSE_KILLPRIV=0";
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  const std::string f = env.mnt() + "/many";
  int fd = open(f.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  auto before = Counts(env.mount());
  for (int i = 0; i < 100; i++) ASSERT_EQ(pwrite(fd, "0123456789", 10, i * 10), 10);
  close(fd);
  auto after = Counts(env.mount());
  EXPECT_EQ(Delta(before, after, "write"), 100u);
  // Once per inode at most (the kernel asks again after it refreshes the attributes).
  EXPECT_LE(Delta(before, after, "getxattr"), 1u);
}

// The same steps on the mount and on the host file system must leave the same modes: a writer
// or truncater without CAP_FSETID loses setuid and, with group execute on, setgid (without it,
// setgid stays for a caller of the file's group), root with CAP_FSETID keeps both.
TEST(KernelCacheTest, SetuidAndSetgidClearedAsOnTheHost) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  std::map<std::string, std::map<std::string, std::pair<unsigned, off_t>>> got;  // root -> file -> mode, size
  for (const std::string& root : {env.host(), env.mnt()}) {
    SCOPED_TRACE(root);
    const std::string w = root + "/w", t = root + "/t", r = root + "/r", g = root + "/g";
    for (const auto& p : {w, t, r, g}) ASSERT_TRUE(Put(p, "data"));
    ASSERT_EQ(chmod(w.c_str(), 06755), 0);
    ASSERT_EQ(chmod(t.c_str(), 06755), 0);
    ASSERT_EQ(chmod(r.c_str(), 06755), 0);
    ASSERT_EQ(chmod(g.c_str(), 02644), 0);  // setgid without group execute
    bool dropped = WithoutFsetid([&] {
      for (const auto& p : {w, g}) {
        int fd = open(p.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd < 0) return;
        (void)!write(fd, "more", 4);
        close(fd);
      }
      (void)!truncate(t.c_str(), 2);
    });
    ASSERT_TRUE(dropped);
    int fd = open(r.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "more", 4), 4);
    close(fd);
    for (const char* name : {"w", "t", "r", "g"}) {
      struct stat st {};
      ASSERT_EQ(stat((root + "/" + name).c_str(), &st), 0);
      got[root][name] = {st.st_mode & 07777, st.st_size};
    }
  }
  EXPECT_EQ(got[env.mnt()], got[env.host()]);
  auto& m = got[env.mnt()];
  EXPECT_EQ(m["w"].first, 0755u);
  EXPECT_EQ(m["w"].second, 8);
  EXPECT_EQ(m["t"].first, 0755u);
  EXPECT_EQ(m["t"].second, 2);
  EXPECT_EQ(m["r"].first, 06755u);
  EXPECT_EQ(m["g"].first, 02644u);
  // And the Workspace itself holds the modes (what a commit records).
  auto w = env.ws().Lookup(workspace::kRootIno, "w");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->mode & 07777, m["w"].first);
}

TEST(KernelCacheTest, ListingsComeFromTheCacheUntilTheDirectoryChanges) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  const std::string d = env.mnt() + "/d";
  ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
  for (int i = 0; i < 50; i++) ASSERT_TRUE(Put(d + "/f" + std::to_string(i), "x"));
  EXPECT_EQ(List(d).size(), 52u);
  auto before = Counts(env.mount());
  EXPECT_EQ(List(d).size(), 52u);
  auto after = Counts(env.mount());
  if (getenv("LAYERFS_FUSE_CACHE_DIR") == nullptr) {
    EXPECT_EQ(Delta(before, after, "readdir") + Delta(before, after, "readdirplus"), 0u);
  }
  ASSERT_TRUE(Put(d + "/new", "x"));
  ASSERT_EQ(unlink((d + "/f0").c_str()), 0);
  auto names = List(d);
  EXPECT_EQ(names.size(), 52u);
  EXPECT_TRUE(names.count("new"));
  EXPECT_FALSE(names.count("f0"));
  ASSERT_EQ(rename((d + "/f1").c_str(), (d + "/g1").c_str()), 0);
  names = List(d);
  EXPECT_TRUE(names.count("g1"));
  EXPECT_FALSE(names.count("f1"));
}

TEST(KernelCacheTest, MovedDirectoryNamesItsNewParent) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  const std::string a = env.mnt() + "/a", b = env.mnt() + "/b";
  ASSERT_EQ(mkdir(a.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(b.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((a + "/x").c_str(), 0755), 0);
  ASSERT_TRUE(Put(a + "/x/f", "x"));
  struct stat sa {}, sb {};
  ASSERT_EQ(stat(a.c_str(), &sa), 0);
  ASSERT_EQ(stat(b.c_str(), &sb), 0);
  EXPECT_EQ(List(a + "/x")[".."], sa.st_ino);  // cached now
  ASSERT_EQ(rename((a + "/x").c_str(), (b + "/x").c_str()), 0);
  auto moved = List(b + "/x");
  EXPECT_EQ(moved[".."], sb.st_ino);
  EXPECT_TRUE(moved.count("f"));
}

TEST(KernelCacheTest, AttributesStayRightAfterChangesThroughTheMount) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  const std::string f = env.mnt() + "/f";
  ASSERT_TRUE(Put(f, "12345"));
  struct stat st {};
  ASSERT_EQ(stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 5);
  int fd = open(f.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "678", 3), 3);
  close(fd);
  ASSERT_EQ(stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8);
  ASSERT_EQ(chmod(f.c_str(), 0600), 0);
  ASSERT_EQ(stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(link(f.c_str(), (env.mnt() + "/g").c_str()), 0);
  ASSERT_EQ(stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 2u);
  ASSERT_EQ(unlink((env.mnt() + "/g").c_str()), 0);
  ASSERT_EQ(stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 1u);
  ASSERT_EQ(unlink(f.c_str()), 0);
  EXPECT_NE(stat(f.c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
}

}  // namespace
}  // namespace layerfs::itest
