#include "fuse/cpu_follow.h"

#include <fcntl.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace layerfs::fuse {
namespace {

constexpr long kRecheckNs = 2'000'000;  // 2 ms: a migrated caller is followed within that

struct FollowState {
  pid_t tid = 0;
  long last_ns = 0;
  int cpu = -1;  // pinned to, or -1
  bool have_allowed = false;
  cpu_set_t allowed;  // the thread's mask before the first pin: never pinned outside it
};
thread_local FollowState g_follow;

long NowCoarseNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return ts.tv_sec * 1'000'000'000L + ts.tv_nsec;
}

// The CPU `tid` last ran on, or -1.
int LastCpuOf(pid_t tid) {
  char path[48];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(tid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  // Fields after the command name, which is in parentheses and may hold spaces: the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return -1;
  // p+2 is field 3 (state); "processor" is field 39.
  int field = 3;
  for (p += 2; *p != '\0' && field < 39; p++) {
    if (*p == ' ') field++;
  }
  if (field != 39) return -1;
  int cpu = -1;
  if (std::sscanf(p, "%d", &cpu) != 1) return -1;
  return cpu;
}

}  // namespace

void FollowCallerCpu(pid_t caller_tid) {
  if (caller_tid <= 0) return;  // a request of the kernel's own (writeback, forget)
  FollowState& st = g_follow;
  const long now = NowCoarseNs();
  if (caller_tid == st.tid && now - st.last_ns < kRecheckNs) return;
  st.tid = caller_tid;
  st.last_ns = now;
  const int cpu = LastCpuOf(caller_tid);
  if (cpu < 0 || cpu == st.cpu || cpu >= CPU_SETSIZE) return;
  if (!st.have_allowed) {
    if (sched_getaffinity(0, sizeof st.allowed, &st.allowed) != 0) return;
    st.have_allowed = true;
  }
  if (!CPU_ISSET(cpu, &st.allowed)) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) == 0) st.cpu = cpu;
}

}  // namespace layerfs::fuse
