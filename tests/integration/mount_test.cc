// Mount lifecycle and adapter behaviour that a parity run cannot see: remounting keeps content
// and inode numbers, external unmounts, open handle counts, read-only and multithreaded mounts,
// and data written through the kernel (write, mmap) reaching the Workspace itself.
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../unit/test_util.h"
#include "fuse/uring.h"
#include "mount_env.h"
#include "syscall_log.h"

namespace layerfs::itest {
namespace {

bool WriteFile(const std::string& path, std::string_view data) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  return close(fd) == 0 && ok;
}

std::string ReadFile(const std::string& path) {
  SyscallLog s("");
  int err = 0;
  std::string c = s.Slurp(path, &err);
  return err ? "<" + ErrName(err) + ">" : c;
}

template <typename Pred>
bool WaitFor(Pred p, int ms = 5000) {
  for (int i = 0; i < ms / 10; ++i) {
    if (p()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return p();
}

// The Workspace's own view of a file below the root (no kernel cache involved).
std::string WorkspaceContent(workspace::Workspace& ws, std::string_view name) {
  auto a = ws.Lookup(workspace::kRootIno, name);
  if (!a.ok()) return "<" + a.status().ToString() + ">";
  auto d = ws.Read(a->ino, 0, a->size);
  return d.ok() ? *d : "<" + d.status().ToString() + ">";
}

struct Seen {
  ino_t ino;
  std::string content;
};

std::map<std::string, Seen> Snapshot(const std::string& root, const std::vector<std::string>& names) {
  std::map<std::string, Seen> out;
  for (const auto& n : names) {
    struct stat st {};
    std::string p = root + "/" + n;
    if (lstat(p.c_str(), &st) != 0) continue;
    out[n] = {st.st_ino, S_ISREG(st.st_mode) ? ReadFile(p) : ""};
  }
  return out;
}

void Populate(const std::string& m) {
  ASSERT_EQ(mkdir((m + "/dir").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((m + "/dir/sub").c_str(), 0700), 0);
  ASSERT_TRUE(WriteFile(m + "/a.txt", "alpha"));
  ASSERT_TRUE(WriteFile(m + "/dir/b.bin", std::string(200000, 'b')));
  ASSERT_TRUE(WriteFile(m + "/dir/sub/c", "gamma"));
  ASSERT_EQ(link((m + "/a.txt").c_str(), (m + "/dir/a-link").c_str()), 0);
  ASSERT_EQ(symlink("a.txt", (m + "/sym").c_str()), 0);
}

const std::vector<std::string> kNames = {"dir", "dir/sub", "a.txt", "dir/b.bin", "dir/sub/c", "dir/a-link", "sym"};

TEST(MountTest, RemountKeepsContentAndInodes) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  Populate(env.mnt());
  auto before = Snapshot(env.mnt(), kNames);
  ASSERT_EQ(before.size(), kNames.size());
  EXPECT_EQ(before["a.txt"].ino, before["dir/a-link"].ino);
  ASSERT_TRUE(env.Unmount());
  EXPECT_FALSE(IsMounted(env.mnt()));

  env.CloseWorkspace();  // reopen the Workspace from the same Store
  ASSERT_TRUE(env.Mount());
  auto after = Snapshot(env.mnt(), kNames);
  ASSERT_EQ(after.size(), kNames.size());
  for (const auto& n : kNames) {
    EXPECT_EQ(before[n].ino, after[n].ino) << n;
    EXPECT_EQ(before[n].content, after[n].content) << n;
  }
  ASSERT_TRUE(env.Unmount());

  ASSERT_TRUE(env.ReopenStore());  // and from the Store opened again
  ASSERT_TRUE(env.Mount());
  auto reopened = Snapshot(env.mnt(), kNames);
  ASSERT_EQ(reopened.size(), kNames.size());
  for (const auto& n : kNames) {
    EXPECT_EQ(before[n].ino, reopened[n].ino) << n;
    EXPECT_EQ(before[n].content, reopened[n].content) << n;
  }
  struct stat root {};
  ASSERT_EQ(stat(env.mnt().c_str(), &root), 0);
  EXPECT_EQ(root.st_ino, 1u);
}

TEST(MountTest, ExternalUnmountStopsServing) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  EXPECT_TRUE(env.mount().serving());
  std::string cmd = "fusermount3 -u '" + env.mnt() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_TRUE(WaitFor([&] { return !env.mount().serving(); }));
  EXPECT_FALSE(IsMounted(env.mnt()));
  EXPECT_TRUE(env.mount().Unmount().ok());
  EXPECT_TRUE(env.mount().Unmount().ok());  // idempotent
}

TEST(MountTest, UnmountWhileBusyCompletes) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  ASSERT_TRUE(WriteFile(env.mnt() + "/f", "busy"));
  int fd = open((env.mnt() + "/f").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(env.mount().Unmount().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_FALSE(env.mount().serving());
  EXPECT_FALSE(IsMounted(env.mnt()));
  char c;
  EXPECT_LT(read(fd, &c, 1), 0);  // the connection is gone
  close(fd);
}

TEST(MountTest, OpenHandlesCountsFilesAndDirs) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  EXPECT_EQ(env.mount().open_handles(), 0u);
  int fd = open((env.mnt() + "/f").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  int dfd = open(env.mnt().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dfd, 0);
  EXPECT_EQ(env.mount().open_handles(), 2u);
  close(fd);
  close(dfd);
  // RELEASE is sent asynchronously after close.
  EXPECT_TRUE(WaitFor([&] { return env.mount().open_handles() == 0; }));
  EXPECT_EQ(env.mount().mountpoint(), env.mnt());
}

TEST(MountTest, WritesAndMmapReachTheWorkspace) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  ASSERT_TRUE(WriteFile(env.mnt() + "/w", "written through the kernel"));
  EXPECT_EQ(WorkspaceContent(env.ws(), "w"), "written through the kernel");

  int fd = open((env.mnt() + "/m").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  memcpy(p, "mapped", 6);
  ASSERT_EQ(msync(p, 4096, MS_SYNC), 0);
  EXPECT_EQ(WorkspaceContent(env.ws(), "m").substr(0, 6), "mapped");
  munmap(p, 4096);
  close(fd);

  // O_TRUNC and O_APPEND as the kernel sends them.
  ASSERT_TRUE(WriteFile(env.mnt() + "/w", "new"));
  EXPECT_EQ(WorkspaceContent(env.ws(), "w"), "new");
  fd = open((env.mnt() + "/w").c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "+tail", 5), 5);
  close(fd);
  EXPECT_EQ(WorkspaceContent(env.ws(), "w"), "new+tail");
}

// st_blocks of a file that is all hole is 0 (ext4's answer), so du and cp --sparse see it sparse.
TEST(MountTest, AFileThatIsAllHoleHasNoBlocks) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  const std::string p = env.mnt() + "/hole";
  int fd = open(p.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 1 << 30), 0);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 1 << 30);
  EXPECT_EQ(st.st_blocks, 0);
  ASSERT_EQ(pwrite(fd, "x", 1, 4096), 1);
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(st.st_blocks, (1 << 30) / 512);
  close(fd);
}

TEST(MountTest, UnlinkedOpenFileIsForgottenAfterClose) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  ASSERT_TRUE(WriteFile(env.mnt() + "/gone", std::string(100000, 'g')));
  struct stat st {};
  ASSERT_EQ(stat((env.mnt() + "/gone").c_str(), &st), 0);
  int fd = open((env.mnt() + "/gone").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(unlink((env.mnt() + "/gone").c_str()), 0);
  EXPECT_TRUE(env.ws().GetAttr(st.st_ino).ok());  // still open: the inode stays
  close(fd);
  // The kernel evicts the inode and sends FORGET; the Workspace then frees it.
  EXPECT_TRUE(WaitFor([&] { return !env.ws().GetAttr(st.st_ino).ok(); }))
      << "inode " << st.st_ino << " still present after close";
}

TEST(MountTest, ReadOnlyMountRefusesChanges) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  ASSERT_TRUE(WriteFile(env.mnt() + "/keep", "kept"));
  ASSERT_TRUE(env.Unmount());
  ASSERT_TRUE(env.Mount({.read_only = true}));
  EXPECT_EQ(ReadFile(env.mnt() + "/keep"), "kept");
  errno = 0;
  EXPECT_LT(open((env.mnt() + "/new").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644), 0);
  EXPECT_EQ(errno, EROFS);
  EXPECT_LT(open((env.mnt() + "/keep").c_str(), O_WRONLY | O_CLOEXEC), 0);
  EXPECT_EQ(errno, EROFS);
  EXPECT_NE(mkdir((env.mnt() + "/d").c_str(), 0755), 0);
  EXPECT_EQ(errno, EROFS);
}

TEST(MountTest, MultithreadedMountServesConcurrentWriters) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount({.multithreaded = true}));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        std::string p = fmt::format("{}/t{}_{}", env.mnt(), t, i);
        std::string data(1000 + i * 100, static_cast<char>('a' + t));
        if (!WriteFile(p, data) || ReadFile(p) != data) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto list = env.ws().ReadDir(workspace::kRootIno);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 100u);
}

// With FUSE over io_uring on (tools/setup turns it on where the kernel has it), the mount must
// really serve from its per-CPU rings, and callers on every CPU must get their own replies:
// content written and read back in 1 MiB requests and in small ones, directory listings and
// errnos from threads pinned to each CPU in turn.
TEST(MountTest, ServesOverIoUringOnEveryCpu) {
  if (!std::filesystem::exists("/sys/module/fuse/parameters/enable_uring")) {
    GTEST_SKIP() << "this kernel has no FUSE over io_uring";
  }
  const char* off = getenv("LAYERFS_FUSE_URING");
  const bool want = fuse::UringTransport::KernelEnabled() && !(off != nullptr && std::string_view(off) == "0");
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  struct stat st {};
  ASSERT_EQ(stat(env.mnt().c_str(), &st), 0);  // the rings are registered once a request is answered
  EXPECT_EQ(env.mount().transport(), want ? "io_uring" : "/dev/fuse");

  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  std::atomic<int> failures{0};
  for (long cpu = 0; cpu < ncpu; ++cpu) {
    std::thread([&, cpu] {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(static_cast<int>(cpu), &set);
      if (sched_setaffinity(0, sizeof set, &set) != 0) failures++;
      const std::string dir = fmt::format("{}/cpu{}", env.mnt(), cpu);
      if (mkdir(dir.c_str(), 0755) != 0) failures++;
      std::string big = layerfs::testing::RandomBytes(3 * (1 << 20) + 12345, static_cast<uint64_t>(cpu) + 7);
      for (int i = 0; i < 20; ++i) {
        std::string small(100 + i, static_cast<char>('a' + i));
        if (!WriteFile(fmt::format("{}/s{}", dir, i), small) || ReadFile(fmt::format("{}/s{}", dir, i)) != small) failures++;
      }
      if (!WriteFile(dir + "/big", big)) failures++;
      std::ofstream("/proc/sys/vm/drop_caches") << "3";  // the read goes to the daemon again
      if (ReadFile(dir + "/big") != big) failures++;
      if (access((dir + "/missing").c_str(), F_OK) == 0 || errno != ENOENT) failures++;
      if (rmdir(dir.c_str()) == 0 || errno != ENOTEMPTY) failures++;
    }).join();
  }
  EXPECT_EQ(failures.load(), 0);
  auto list = env.ws().ReadDir(workspace::kRootIno);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), static_cast<size_t>(ncpu));
  ASSERT_TRUE(env.Unmount());
  EXPECT_FALSE(IsMounted(env.mnt()));
}

// Large READs on the rings go to a reader thread on another core, which then owns the ring
// entry until a request other than a large READ arrives on it and goes back to the queue
// thread. Sequential reads of a file not in the page cache, from each CPU in turn, must return
// every byte while another thread's metadata calls on the same mount get their own answers.
TEST(MountTest, LargeReadsOnTheReaderThreadKeepEveryReplyStraight) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env.Mount());
  const bool ring = env.mount().transport() == "io_uring";
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  const std::string big = layerfs::testing::RandomBytes(24 * (1 << 20) + 777, 41);
  ASSERT_TRUE(WriteFile(env.mnt() + "/big", big));
  ASSERT_EQ(mkdir((env.mnt() + "/meta").c_str(), 0755), 0);
  const uint64_t before = fuse::UringTransport::ReaderReads();

  for (long cpu = 0; cpu < ncpu; ++cpu) {
    std::ofstream("/proc/sys/vm/drop_caches") << "3";  // the reads go to the daemon again
    std::atomic<bool> done{false};
    std::atomic<int> meta_failures{0}, meta_rounds{0};
    std::thread meta([&] {
      for (int i = 0; !done.load() || i < 20; ++i) {
        const std::string p = fmt::format("{}/meta/f{}", env.mnt(), i % 7);
        const std::string c(50 + i % 13, static_cast<char>('a' + i % 26));
        if (!WriteFile(p, c) || ReadFile(p) != c) meta_failures++;
        struct stat st {};
        if (stat(p.c_str(), &st) != 0 || st.st_size != static_cast<off_t>(c.size())) meta_failures++;
        if (access((p + ".missing").c_str(), F_OK) == 0 || errno != ENOENT) meta_failures++;
        if (unlink(p.c_str()) != 0) meta_failures++;
        meta_rounds++;
      }
    });
    std::string got;
    std::thread reader([&] {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(static_cast<int>(cpu), &set);
      (void)sched_setaffinity(0, sizeof set, &set);
      int fd = open((env.mnt() + "/big").c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return;
      std::string buf(1 << 20, '\0');
      for (ssize_t n; (n = read(fd, buf.data(), buf.size())) > 0;) got.append(buf.data(), static_cast<size_t>(n));
      close(fd);
    });
    reader.join();
    done = true;
    meta.join();
    EXPECT_EQ(got.size(), big.size()) << "cpu " << cpu;
    EXPECT_TRUE(got == big) << "cpu " << cpu << ": content differs";
    EXPECT_EQ(meta_failures.load(), 0) << "cpu " << cpu << " after " << meta_rounds.load() << " rounds";
  }
  if (ring && ncpu > 1) {
    // 24 MiB in readahead requests of at most 512 KiB: most of them past the file's start.
    EXPECT_GE(fuse::UringTransport::ReaderReads() - before, static_cast<uint64_t>(ncpu) * 10);
  }
  auto list = env.ws().ReadDir(workspace::kRootIno);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 2u);
  ASSERT_TRUE(env.Unmount());
}

// Bytes of the data log's segments in the host's page cache.
size_t ResidentSegmentBytes(const std::string& store) {
  size_t total = 0;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (const auto& e : std::filesystem::directory_iterator(store + "/data")) {
    if (e.path().extension() != ".seg" || e.file_size() == 0) continue;
    const size_t n = layerfs::testing::ResidentPages(e.path(), 0, e.file_size());
    if (n == SIZE_MAX) return SIZE_MAX;
    total += n * page;
  }
  return total;
}

// A file read in order leaves little of the data log in the host's page cache: the mount's
// page cache holds the bytes, and each readahead READ drops the segment window behind it, so a
// large cold read touches the memory ext4 would, not twice it. Every byte still comes back,
// and a second cold read finds it all again on the disk. Over the rings (copied into the
// reply) and over /dev/fuse with a thread pool (copied into memory).
TEST(MountTest, StreamingReadsDropTheDataLogBehindThem) {
  constexpr size_t kMiB = 1 << 20;
  const std::string big = layerfs::testing::RandomBytes(48 * kMiB + 4321, 77);
  for (bool uring : {true, false}) {
    SCOPED_TRACE(uring ? "io_uring wanted" : "/dev/fuse");
    MountEnv env;
    ASSERT_TRUE(env.ok());
    ASSERT_TRUE(env.Mount({.multithreaded = true, .uring = uring}));
    if (!uring) {
      ASSERT_EQ(env.mount().transport(), "/dev/fuse");
    }
    ASSERT_TRUE(WriteFile(env.mnt() + "/big", big));
    for (int round = 0; round < 2; ++round) {
      sync();
      std::ofstream("/proc/sys/vm/drop_caches") << "3";
      ASSERT_LT(ResidentSegmentBytes(env.store_dir()), 4 * kMiB) << "round " << round;
      EXPECT_TRUE(ReadFile(env.mnt() + "/big") == big) << "round " << round << ": content differs";
      const size_t resident = ResidentSegmentBytes(env.store_dir());
      ASSERT_NE(resident, SIZE_MAX);
      // Readahead runs at most a few MiB ahead of the last drop, and the tail window stays.
      EXPECT_LT(resident, 16 * kMiB) << "round " << round << ": the data log stayed in the page cache";
    }
    ASSERT_TRUE(env.Unmount());
  }
}

TEST(MountTest, StartFailsOnMissingMountpoint) {
  MountEnv env;
  ASSERT_TRUE(env.ok());
  auto ws = workspace::Workspace::Open(env.store(), {.branch = "main"});
  ASSERT_TRUE(ws.ok());
  auto m = fuse::Mount::Start(ws->get(), env.mnt() + "/does-not-exist", {});
  EXPECT_FALSE(m.ok());
}

}  // namespace
}  // namespace layerfs::itest
