#include "fuse/uring.h"

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <linux/io_uring.h>
#include <linux/time_types.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace layerfs::fuse {
namespace {

// The FUSE-over-io_uring ABI (include/uapi/linux/fuse.h of Linux 6.14+; the build host's headers
// may predate it).
constexpr uint64_t kFuseOverIoUring = 1ULL << 41;
constexpr uint32_t kFuseInitExt = 1U << 30;
constexpr uint32_t kCmdRegister = 1;
constexpr uint32_t kCmdCommitAndFetch = 2;
constexpr size_t kInOutSize = 128;
constexpr size_t kOpInSize = 128;

struct EntInOut {
  uint64_t flags;
  uint64_t commit_id;
  uint32_t payload_sz;
  uint32_t padding;
  uint64_t reserved;
};
struct ReqHeader {
  char in_out[kInOutSize];  // fuse_in_header from the kernel, fuse_out_header to it
  char op_in[kOpInSize];    // the request's first argument (its fixed-size struct)
  EntInOut ent;
};
struct CmdReq {
  uint64_t flags;
  uint64_t commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
static_assert(sizeof(ReqHeader) == 288);
static_assert(sizeof(CmdReq) <= 80);

// Entries per queue. A queue's thread serves its entries one after another; more entries let
// the kernel hand it the next request (often readahead) in the same wakeup, and let large reads
// be away at the queue's reader thread while a synchronous request still finds one at home.
constexpr unsigned kDepth = 4;
// READs of at least this many bytes go to the queue's reader thread on another core.
constexpr uint32_t kOffloadBytes = 128 << 10;
// user_data of completions that are not entries: a wake from the other thread of the queue
// (IORING_OP_MSG_RING), and the failure of a wake this thread sent (success is skipped).
constexpr uint64_t kWake = 1ULL << 62;
constexpr uint64_t kWakeSent = (1ULL << 62) + 1;
constexpr unsigned kGone = 1U << 31;  // an entry passed back because it failed
// Room in front of each payload buffer to rebuild a request as /dev/fuse delivers it:
// fuse_in_header, then the op struct, then the payload, contiguous.
constexpr size_t kSlack = 4096;
constexpr long kWaitNs = 200'000'000;  // a queue thread checks for Stop() this often

struct Entry {
  ReqHeader* hdr = nullptr;
  char* region = nullptr;
  size_t region_size = 0;
  char* payload = nullptr;
  size_t payload_size = 0;
  iovec iov[2]{};
  uint64_t commit_id = 0;
  bool replied = false;
  bool live = false;
  bool registering = false;
};

thread_local Entry* tl_entry = nullptr;
thread_local bool tl_kill_suidgid = false;

// Notes what the raw request asks that libfuse 3.14 does not pass on: under
// FUSE_HANDLE_KILLPRIV_V2, whether a WRITE or SETATTR must clear setuid/setgid (the kernel sets
// the flag when the caller lacks CAP_FSETID, or for any chown).
void NoteRequest(const void* buf, size_t len) {
  tl_kill_suidgid = false;
  if (len < sizeof(fuse_in_header)) return;
  fuse_in_header ih;
  memcpy(&ih, buf, sizeof ih);
  const char* op = static_cast<const char*>(buf) + sizeof ih;
  const size_t oplen = len - sizeof ih;
  if (ih.opcode == FUSE_WRITE && oplen >= offsetof(fuse_write_in, write_flags) + sizeof(uint32_t)) {
    uint32_t wf;
    memcpy(&wf, op + offsetof(fuse_write_in, write_flags), sizeof wf);
    tl_kill_suidgid = wf & FUSE_WRITE_KILL_SUIDGID;
  } else if (ih.opcode == FUSE_SETATTR && oplen >= sizeof(uint32_t)) {
    uint32_t valid;
    memcpy(&valid, op + offsetof(fuse_setattr_in, valid), sizeof valid);
    tl_kill_suidgid = valid & FATTR_KILL_SUIDGID;
  }
}
std::atomic<uint64_t> g_reader_reads{0};
thread_local bool tl_ring_thread = false;

// One io_uring with 128-byte SQEs, used by the one thread that created it.
class Ring {
 public:
  ~Ring() { Close(); }

  // Closing the ring cancels its commands still in the kernel, so buffers they point at may be
  // freed only after this.
  void Close() {
    if (sq_ptr_ != MAP_FAILED) munmap(sq_ptr_, sq_size_);
    if (cq_ptr_ != MAP_FAILED && cq_ptr_ != sq_ptr_) munmap(cq_ptr_, cq_size_);
    if (sqes_ != MAP_FAILED) munmap(sqes_, sqes_size_);
    if (fd_ >= 0) close(fd_);
    sq_ptr_ = cq_ptr_ = sqes_ = MAP_FAILED;
    fd_ = -1;
  }

  bool Setup(unsigned entries, std::string* err) {
    // Defer task work to our own waits (the kernel completes a request's hand-over in this
    // thread's context), falling back to plainer setups on older kernels.
    const unsigned variants[] = {
        IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
        IORING_SETUP_SQE128 | IORING_SETUP_COOP_TASKRUN,
        IORING_SETUP_SQE128,
    };
    io_uring_params p{};
    for (unsigned flags : variants) {
      p = io_uring_params{};
      p.flags = flags;
      fd_ = static_cast<int>(syscall(__NR_io_uring_setup, entries, &p));
      if (fd_ >= 0) break;
    }
    if (fd_ < 0) {
      *err = fmt::format("io_uring_setup: {}", strerror(errno));
      return false;
    }
    sq_entries_ = p.sq_entries;
    sq_size_ = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    cq_size_ = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
    if (p.features & IORING_FEAT_SINGLE_MMAP) sq_size_ = cq_size_ = std::max(sq_size_, cq_size_);
    sq_ptr_ = mmap(nullptr, sq_size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_SQ_RING);
    if (sq_ptr_ == MAP_FAILED) {
      *err = fmt::format("mmap of the submission ring: {}", strerror(errno));
      return false;
    }
    cq_ptr_ = (p.features & IORING_FEAT_SINGLE_MMAP)
                  ? sq_ptr_
                  : mmap(nullptr, cq_size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_CQ_RING);
    if (cq_ptr_ == MAP_FAILED) {
      *err = fmt::format("mmap of the completion ring: {}", strerror(errno));
      return false;
    }
    sqes_size_ = p.sq_entries * 2 * sizeof(io_uring_sqe);  // SQE128
    sqes_ = mmap(nullptr, sqes_size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, IORING_OFF_SQES);
    if (sqes_ == MAP_FAILED) {
      *err = fmt::format("mmap of the submission entries: {}", strerror(errno));
      return false;
    }
    auto* sq = static_cast<char*>(sq_ptr_);
    auto* cq = static_cast<char*>(cq_ptr_);
    sq_head_ = reinterpret_cast<unsigned*>(sq + p.sq_off.head);
    sq_tail_ = reinterpret_cast<unsigned*>(sq + p.sq_off.tail);
    sq_mask_ = *reinterpret_cast<unsigned*>(sq + p.sq_off.ring_mask);
    sq_array_ = reinterpret_cast<unsigned*>(sq + p.sq_off.array);
    cq_head_ = reinterpret_cast<unsigned*>(cq + p.cq_off.head);
    cq_tail_ = reinterpret_cast<unsigned*>(cq + p.cq_off.tail);
    cq_mask_ = *reinterpret_cast<unsigned*>(cq + p.cq_off.ring_mask);
    cqes_ = reinterpret_cast<io_uring_cqe*>(cq + p.cq_off.cqes);
    return true;
  }

  // A zeroed 128-byte SQE queued for the next Enter (nullptr if the ring is full).
  io_uring_sqe* Next() {
    const unsigned tail = *sq_tail_;
    const unsigned head = __atomic_load_n(sq_head_, __ATOMIC_ACQUIRE);
    if (tail - head >= sq_entries_) return nullptr;
    const unsigned idx = tail & sq_mask_;
    sq_array_[idx] = idx;
    auto* sqe = reinterpret_cast<io_uring_sqe*>(static_cast<char*>(sqes_) + idx * 2 * sizeof(io_uring_sqe));
    memset(sqe, 0, 2 * sizeof(io_uring_sqe));
    __atomic_store_n(sq_tail_, tail + 1, __ATOMIC_RELEASE);
    pending_++;
    return sqe;
  }

  // Submits what is queued and waits up to kWaitNs for a completion. False on a hard error.
  bool Enter() {
    __kernel_timespec ts{.tv_sec = 0, .tv_nsec = kWaitNs};
    io_uring_getevents_arg arg{};
    arg.ts = reinterpret_cast<uint64_t>(&ts);
    const long r = syscall(__NR_io_uring_enter, fd_, pending_, 1, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
                           &arg, sizeof arg);
    if (r >= 0) {
      pending_ -= std::min<unsigned>(pending_, static_cast<unsigned>(r));
      return true;
    }
    return errno == ETIME || errno == EINTR || errno == EAGAIN || errno == EBUSY;
  }

  // Submits what is queued without waiting. False on a hard error.
  bool Submit() {
    if (pending_ == 0) return true;
    const long r = syscall(__NR_io_uring_enter, fd_, pending_, 0, 0, nullptr, 0);
    if (r >= 0) {
      pending_ -= std::min<unsigned>(pending_, static_cast<unsigned>(r));
      return true;
    }
    return errno == EINTR || errno == EAGAIN || errno == EBUSY;
  }

  // Queues a wake for the thread of ring `target_fd`: a completion with user_data kWake there.
  void Wake(int target_fd) {
    io_uring_sqe* sqe = Next();
    if (sqe == nullptr) return;  // the other thread finds the work at its next timeout
    sqe->opcode = IORING_OP_MSG_RING;
    sqe->fd = target_fd;
    sqe->addr = IORING_MSG_DATA;
    sqe->off = kWake;
    sqe->flags = IOSQE_CQE_SKIP_SUCCESS;
    sqe->user_data = kWakeSent;
  }

  int fd() const { return fd_; }

  bool Pop(io_uring_cqe* out) {
    const unsigned head = *cq_head_;
    if (head == __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE)) return false;
    *out = cqes_[head & cq_mask_];
    __atomic_store_n(cq_head_, head + 1, __ATOMIC_RELEASE);
    return true;
  }

 private:
  int fd_ = -1;
  void* sq_ptr_ = MAP_FAILED;
  void* cq_ptr_ = MAP_FAILED;
  void* sqes_ = MAP_FAILED;
  size_t sq_size_ = 0, cq_size_ = 0, sqes_size_ = 0;
  unsigned sq_entries_ = 0, sq_mask_ = 0, cq_mask_ = 0, pending_ = 0;
  unsigned *sq_head_ = nullptr, *sq_tail_ = nullptr, *sq_array_ = nullptr;
  unsigned *cq_head_ = nullptr, *cq_tail_ = nullptr;
  io_uring_cqe* cqes_ = nullptr;
};

// The CPUs the kernel keeps queues for: num_possible_cpus().
unsigned PossibleCpus() {
  std::ifstream f("/sys/devices/system/cpu/possible");
  std::string s;
  if (!(f >> s)) return static_cast<unsigned>(std::max(1L, sysconf(_SC_NPROCESSORS_CONF)));
  unsigned n = 0;
  size_t pos = 0;
  while (pos < s.size()) {  // e.g. "0-3" or "0,2-5"
    size_t end = s.find(',', pos);
    std::string part = s.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    size_t dash = part.find('-');
    unsigned last = static_cast<unsigned>(std::stoul(dash == std::string::npos ? part : part.substr(dash + 1)));
    n = std::max(n, last + 1);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return std::max(1U, n);
}

void SetPolicy(int policy) {
  sched_param sp{};
  (void)sched_setscheduler(0, policy, &sp);
}

void SetError(Entry& e, uint64_t unique, int err) {
  fuse_out_header oh{.len = sizeof(fuse_out_header), .error = -err, .unique = unique};
  memcpy(e.hdr->in_out, &oh, sizeof oh);
  e.hdr->ent.payload_sz = 0;
  e.replied = true;
}

}  // namespace

struct UringTransport::Queue {
  UringTransport* t = nullptr;
  unsigned qid = 0;
  std::thread th;
  std::mutex mu;
  std::condition_variable cv;
  enum { kStarting, kReady, kFailed } state = kStarting;
  bool go = false, abort = false;
  size_t payload_size = 0;
  Ring ring;
  Entry ents[kDepth];

  // The reader thread: large READs, served on another core (docs/design.md, "Large reads go to
  // the other core"). work and back hold entry indices; the wakes only shorten the waits.
  struct Reader {
    std::thread th;
    Ring ring;
    std::mutex mu;
    std::condition_variable cv;
    enum { kStarting, kReady, kFailed } state = kStarting;
    std::vector<unsigned> work;  // large READs handed over, to serve
    std::vector<unsigned> back;  // entries passed back (| kGone: failed there)
    std::atomic<bool> stop{false}, dead{false};
  } rd;
  bool rd_ok = false;   // the reader runs (queue thread only from here on)
  unsigned away = 0;    // entries the reader owns (handed over, not yet passed back)
  std::atomic<unsigned> live{kDepth};  // entries the kernel still serves
  bool wake_rd = false;

  static void BlockSignals() {
    sigset_t set;  // signals belong to the process's main thread
    sigfillset(&set);
    for (int keep : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigdelset(&set, keep);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
  }

  static void Pin(int cpu, const char* who, unsigned q) {
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(cpu, &cpus);
    if (sched_setaffinity(0, sizeof cpus, &cpus) != 0) spdlog::debug("{} {}: cannot pin: {}", who, q, strerror(errno));
  }

  void Run() {
    BlockSignals();
    pthread_setname_np(pthread_self(), fmt::format("fuse-ring{}", qid).c_str());
    // The reader's core: the next one this process may run on after the queue's own.
    int other = -1;
    cpu_set_t allowed;
    if (t->offload_ && sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
      for (unsigned k = 1; k < CPU_SETSIZE && other < 0; k++) {
        const unsigned c = (qid + k) % CPU_SETSIZE;
        if (c != qid && CPU_ISSET(c, &allowed)) other = static_cast<int>(c);
      }
    }
    Pin(static_cast<int>(qid), "ring", qid);
    tl_ring_thread = true;

    std::string err;
    const bool ok = ring.Setup(2 * kDepth, &err);
    if (!ok) spdlog::info("FUSE over io_uring unavailable: {}", err);
    {
      std::unique_lock lock(mu);
      state = ok ? kReady : kFailed;
      cv.notify_all();
      if (!ok) return;
      cv.wait(lock, [&] { return go || abort; });
      if (abort) return;
    }
    for (unsigned i = 0; i < kDepth; i++) {
      Entry& e = ents[i];
      e.hdr = static_cast<ReqHeader*>(aligned_alloc(4096, 4096));
      e.region_size = kSlack + payload_size;
      void* r = mmap(nullptr, e.region_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (e.hdr == nullptr || r == MAP_FAILED) {
        // A REGISTER the kernel refuses turns io_uring off for the connection: /dev/fuse serves.
        spdlog::warn("ring {}: cannot allocate buffers", qid);
        e.region_size = 0;
      } else {
        memset(e.hdr, 0, 4096);
        e.region = static_cast<char*>(r);
        e.payload = e.region + kSlack;
        e.payload_size = payload_size;
      }
      e.iov[0] = {e.hdr, e.hdr ? sizeof(ReqHeader) : 0};
      e.iov[1] = {e.payload, e.payload_size};
      e.live = true;
      Register(i);
    }
    if (other >= 0) StartReader(other);
    t->registered_.fetch_add(1);
    Loop();
    if (rd.th.joinable()) {  // it may be filling an entry: done before the buffers go
      rd.stop.store(true);
      rd.th.join();
    }
    rd.ring.Close();  // it may hold entries too
    // The kernel may still hold entries (Stop() on a live connection): cancel them by closing
    // the ring before their buffers go.
    ring.Close();
    for (Entry& e : ents) {
      if (e.region != nullptr) munmap(e.region, e.region_size);
      free(e.hdr);
      e = Entry{};
    }
  }

  // Queues a FUSE ring command for entry i on ring r: REGISTER hands the kernel its buffers,
  // COMMIT_AND_FETCH answers the request it holds and asks for the next one. The entry's next
  // request then completes on r, so r's thread owns it.
  void Command(Ring& r, unsigned i, uint32_t op) {
    Entry& e = ents[i];
    io_uring_sqe* sqe = r.Next();
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = t->dev_fd_;
    sqe->cmd_op = op;
    sqe->user_data = i;
    if (op == kCmdRegister) {
      sqe->addr = reinterpret_cast<uint64_t>(e.iov);
      sqe->len = 2;
    }
    CmdReq c{};
    c.commit_id = op == kCmdCommitAndFetch ? e.commit_id : 0;
    c.qid = static_cast<uint16_t>(qid);
    memcpy(sqe->cmd, &c, sizeof c);
    e.registering = op == kCmdRegister;
  }
  void Register(unsigned i) { Command(ring, i, kCmdRegister); }
  void Commit(unsigned i) { Command(ring, i, kCmdCommitAndFetch); }

  // A READ the reader thread serves: large, and not the first of its file (that one a caller
  // waits for; later ones are readahead, ahead of the caller).
  bool LargeRead(unsigned i) const {
    fuse_in_header ih;
    memcpy(&ih, ents[i].hdr->in_out, sizeof ih);
    if (ih.opcode != FUSE_READ) return false;
    fuse_read_in in;
    memcpy(&in, ents[i].hdr->op_in, sizeof in);
    return in.size >= kOffloadBytes && in.offset != 0;
  }

  // The live entry a completion is for, or -1: a wake from the other thread (the lists say what
  // about), or the failure of a wake this thread sent to its `peer` (which then finds the work at
  // its next timeout).
  int EntryOf(const io_uring_cqe& cqe, const char* peer) const {
    if (cqe.user_data == kWake) return -1;
    if (cqe.user_data == kWakeSent) {
      if (cqe.res < 0) spdlog::debug("ring {}: wake of the {}: {}", qid, peer, strerror(-cqe.res));
      return -1;
    }
    const unsigned i = static_cast<unsigned>(cqe.user_data);
    return i < kDepth && ents[i].live ? static_cast<int>(i) : -1;
  }

  // A failed command on entry i (either thread): false if the entry is gone.
  bool Failed(Ring& r, unsigned i, int err) {
    Entry& e = ents[i];
    if (err == ENOENT && !e.registering) {
      // The kernel no longer knew the request we answered (ended meanwhile): the entry left
      // its queue with it, so give it back.
      Command(r, i, kCmdRegister);
      return true;
    }
    if (err != ENOTCONN && err != ECONNABORTED && err != ECANCELED) {
      spdlog::warn("ring {}: {} failed: {}", qid, e.registering ? "register" : "commit", strerror(err));
    }
    // A refused REGISTER turned io_uring off for the connection: /dev/fuse serves it.
    if (e.registering) t->register_failed_.store(true);
    e.live = false;
    live.fetch_sub(1);
    return false;
  }

  void StartReader(int cpu) {
    rd.th = std::thread([this, cpu] { ReaderRun(cpu); });
    std::unique_lock lock(rd.mu);
    rd.cv.wait(lock, [&] { return rd.state != Reader::kStarting; });
    rd_ok = rd.state == Reader::kReady;
  }

  // The reader serves the large READs it is handed and commits them on its own ring, so the
  // kernel's copy of the reply runs on its core and the entries' next requests come to it:
  // large READs it serves, anything else goes back to the queue thread (which then owns the
  // entry again).
  void ReaderRun(int cpu) {
    BlockSignals();
    pthread_setname_np(pthread_self(), fmt::format("fuse-rd{}", qid).c_str());
    Pin(cpu, "reader", qid);
    tl_ring_thread = true;
    std::string err;
    const bool ok = rd.ring.Setup(2 * kDepth, &err);
    {
      std::lock_guard lock(rd.mu);
      rd.state = ok ? Reader::kReady : Reader::kFailed;
      rd.cv.notify_all();
    }
    if (!ok) {
      spdlog::debug("ring {}: no reader thread: {}", qid, err);
      return;
    }
    std::vector<unsigned> mine, back;
    while (!rd.stop.load(std::memory_order_relaxed) && !t->stop_.load(std::memory_order_relaxed)) {
      if (!rd.ring.Enter()) {
        // The queue thread sees dead and takes back what it handed over.
        spdlog::warn("ring {}: reader: io_uring_enter: {}", qid, strerror(errno));
        rd.dead.store(true);
        break;
      }
      io_uring_cqe cqe;
      while (rd.ring.Pop(&cqe)) {
        const int n = EntryOf(cqe, "queue thread");
        if (n < 0) continue;
        const unsigned i = static_cast<unsigned>(n);
        if (cqe.res < 0) {
          if (!Failed(rd.ring, i, -cqe.res)) back.push_back(i | kGone);
          continue;
        }
        if (LargeRead(i)) {
          ServeOnReader(i);
        } else {
          back.push_back(i);
        }
      }
      {
        std::lock_guard lock(rd.mu);
        mine.swap(rd.work);
      }
      for (unsigned i : mine) ServeOnReader(i);
      mine.clear();
      if (!back.empty()) {
        {
          std::lock_guard lock(rd.mu);
          rd.back.insert(rd.back.end(), back.begin(), back.end());
        }
        back.clear();
        rd.ring.Wake(ring.fd());
      }
    }
  }

  // On the reader thread: serves entry i and commits it on the reader's ring, which then owns it.
  void ServeOnReader(unsigned i) {
    Serve(ents[i]);
    g_reader_reads.fetch_add(1, std::memory_order_relaxed);
    Command(rd.ring, i, kCmdCommitAndFetch);
  }

  // Hands a large READ to the reader thread, unless it is gone or has all but one entry.
  bool Offload(unsigned i) {
    if (!rd_ok || away + 1 >= kDepth || rd.dead.load(std::memory_order_relaxed) || !LargeRead(i)) return false;
    {
      std::lock_guard lock(rd.mu);
      rd.work.push_back(i);
    }
    away++;
    wake_rd = true;
    return true;
  }

  // Serves what the reader passed back (the entry is this thread's again once committed here).
  // If the reader is gone, the entries handed to it and not yet served come back too.
  void TakeBack() {
    if (away == 0) return;
    std::vector<unsigned> back;
    {
      std::lock_guard lock(rd.mu);
      back.swap(rd.back);
      if (rd.dead.load()) {
        back.insert(back.end(), rd.work.begin(), rd.work.end());
        rd.work.clear();
      }
    }
    for (unsigned i : back) {
      away--;
      if (i & kGone) continue;
      Serve(ents[i]);
      Commit(i);
    }
  }

  void Loop() {
    while (live.load() > 0 && !t->stop_.load(std::memory_order_relaxed)) {
      // Commit at idle priority: the caller a commit wakes is then placed on this core (a CPU
      // running only idle-policy threads counts as idle) and preempts this thread, instead of
      // being sent to the other core (an idle-core wakeup costs ~130 us here). Wait at normal
      // priority: a request nobody waits for yet (readahead) then preempts the task that sent
      // it, so it is under way (at the reader) while that task goes on.
      bool entered = true;
      if (t->idle_wait_) {
        SetPolicy(SCHED_IDLE);
        entered = ring.Submit();
        SetPolicy(SCHED_OTHER);
      }
      entered = entered && ring.Enter();
      if (!entered) {
        spdlog::warn("ring {}: io_uring_enter: {}", qid, strerror(errno));
        break;
      }
      io_uring_cqe cqe;
      while (ring.Pop(&cqe)) {
        const int n = EntryOf(cqe, "reader");  // a wake: TakeBack below
        if (n < 0) continue;
        const unsigned i = static_cast<unsigned>(n);
        if (cqe.res < 0) {
          (void)Failed(ring, i, -cqe.res);
          continue;
        }
        if (Offload(i)) continue;
        Serve(ents[i]);
        Commit(i);
      }
      TakeBack();
      if (wake_rd) {
        ring.Wake(rd.ring.fd());
        wake_rd = false;
      }
    }
  }

  // Rebuilds the request as /dev/fuse would deliver it and lets libfuse dispatch it; the reply
  // lands in this entry through Writev/SpliceSend.
  void Serve(Entry& e) {
    fuse_in_header ih;
    memcpy(&ih, e.hdr->in_out, sizeof ih);
    const size_t psz = e.hdr->ent.payload_sz;
    e.commit_id = e.hdr->ent.commit_id;
    e.replied = false;
    if (psz > e.payload_size || ih.len < sizeof ih + psz || ih.len - sizeof ih - psz > kOpInSize) {
      spdlog::warn("ring {}: malformed request (opcode {}, len {}, payload {})", qid, ih.opcode, ih.len, psz);
      SetError(e, e.commit_id, EIO);
      return;
    }
    const size_t op = ih.len - sizeof ih - psz;
    char* start = e.payload - op - sizeof ih;
    memcpy(start, &ih, sizeof ih);
    memcpy(start + sizeof ih, e.hdr->op_in, op);
    fuse_buf b{};
    b.size = ih.len;
    b.mem = start;
    tl_entry = &e;
    NoteRequest(start, ih.len);
    fuse_session_process_buf(t->se_, &b);
    tl_entry = nullptr;
    if (!e.replied) SetError(e, e.commit_id, EIO);  // every ring request must be answered
  }
};

bool UringTransport::KernelEnabled() {
  std::ifstream f("/sys/module/fuse/parameters/enable_uring");
  char c = 0;
  if (!(f >> c) || c != 'Y') return false;
  std::ifstream d("/proc/sys/kernel/io_uring_disabled");
  int disabled = 0;
  if (d >> disabled && disabled == 2) return false;
  return true;
}

UringTransport::UringTransport(fuse_session* se, bool rings, bool idle_wait, bool killpriv_v2)
    : se_(se), dev_fd_(fuse_session_fd(se)), rings_(rings), idle_wait_(idle_wait), killpriv_v2_(killpriv_v2) {
  const char* off = getenv("LAYERFS_FUSE_RING_OFFLOAD");  // a measurement switch
  offload_ = off == nullptr || strcmp(off, "0") != 0;
}

UringTransport::~UringTransport() { Stop(); }

void UringTransport::StartQueues() {
  std::lock_guard qlock(q_mu_);
  queues_ = PossibleCpus();
  for (unsigned q = 0; q < queues_; q++) {
    auto qu = std::make_unique<Queue>();
    qu->t = this;
    qu->qid = q;
    q_.push_back(std::move(qu));
  }
  for (auto& qu : q_) qu->th = std::thread([p = qu.get()] { p->Run(); });
}

bool UringTransport::WaitQueuesReady() {
  std::lock_guard qlock(q_mu_);
  bool ok = true;
  for (auto& qu : q_) {
    std::unique_lock lock(qu->mu);
    qu->cv.wait(lock, [&] { return qu->state != Queue::kStarting; });
    ok = ok && qu->state == Queue::kReady;
  }
  return ok;
}

void UringTransport::Go(size_t payload_size) {
  std::lock_guard qlock(q_mu_);
  for (auto& qu : q_) {
    std::lock_guard lock(qu->mu);
    qu->payload_size = payload_size;
    qu->go = true;
    qu->cv.notify_all();
  }
}

void UringTransport::Stop() {
  std::lock_guard qlock(q_mu_);
  stop_.store(true);
  for (auto& qu : q_) {
    std::lock_guard lock(qu->mu);
    qu->abort = true;
    qu->cv.notify_all();
  }
  for (auto& qu : q_) {
    if (qu->th.joinable()) qu->th.join();
  }
}

ssize_t UringTransport::Read(int fd, void* buf, size_t len) {
  const ssize_t n = ::read(fd, buf, len);
  if (n > 0) NoteRequest(buf, static_cast<size_t>(n));
  constexpr size_t kInitIn = sizeof(fuse_in_header) + offsetof(fuse_init_in, flags2) + sizeof(uint32_t);
  if (n < static_cast<ssize_t>(kInitIn) || started_) return n;
  fuse_in_header ih;
  memcpy(&ih, buf, sizeof ih);
  if (ih.opcode != FUSE_INIT) return n;
  fuse_init_in in{};
  memcpy(&in, static_cast<char*>(buf) + sizeof ih, std::min(sizeof in, static_cast<size_t>(n) - sizeof ih));
  if (killpriv_v2_ && (in.flags & FUSE_HANDLE_KILLPRIV_V2)) {
    init_extra_flags_ = FUSE_HANDLE_KILLPRIV_V2;
    patch_unique_.store(ih.unique);
  }
  if (!rings_ || !(in.flags & kFuseInitExt) || !((static_cast<uint64_t>(in.flags2) << 32) & kFuseOverIoUring)) {
    started_ = true;
    return n;
  }
  // The kernel offers io_uring: set up one ring per queue now, so the INIT reply only opts in
  // when every queue can serve.
  started_ = true;
  StartQueues();
  if (WaitQueuesReady()) {
    init_unique_.store(ih.unique);
  } else {
    Stop();
  }
  return n;
}

ssize_t UringTransport::Writev(int fd, iovec* iov, int count) {
  if (count < 1 || iov[0].iov_len < sizeof(fuse_out_header)) return ::writev(fd, iov, count);
  fuse_out_header oh;
  memcpy(&oh, iov[0].iov_base, sizeof oh);
  Entry* e = tl_entry;
  if (e != nullptr && !e->replied && oh.unique == e->commit_id) {
    size_t n = 0;
    for (int i = 1; i < count; i++) {
      const size_t len = iov[i].iov_len;
      if (n + len > e->payload_size) {
        SetError(*e, oh.unique, EIO);
        errno = EIO;
        return -1;
      }
      if (iov[i].iov_base != e->payload + n) memcpy(e->payload + n, iov[i].iov_base, len);
      n += len;
    }
    oh.len = static_cast<uint32_t>(sizeof oh + n);
    memcpy(e->hdr->in_out, &oh, sizeof oh);
    e->hdr->ent.payload_sz = oh.error != 0 ? 0 : static_cast<uint32_t>(n);
    e->replied = true;
    return static_cast<ssize_t>(sizeof oh + n);
  }
  const uint64_t init = init_unique_.load();
  const uint64_t patch = patch_unique_.load();
  if (patch != 0 && oh.unique == patch && oh.unique != init) {
    // The INIT reply of a mount on /dev/fuse: only the flags libfuse cannot ask for.
    patch_unique_.store(0);
    if (oh.error != 0 || count < 2 || iov[1].iov_len < sizeof(fuse_init_out)) return ::writev(fd, iov, count);
    std::vector<char> copy(static_cast<char*>(iov[1].iov_base), static_cast<char*>(iov[1].iov_base) + iov[1].iov_len);
    fuse_init_out out;
    memcpy(&out, copy.data(), sizeof out);
    out.flags |= init_extra_flags_;
    memcpy(copy.data(), &out, sizeof out);
    std::vector<iovec> v(iov, iov + count);
    v[1].iov_base = copy.data();
    const ssize_t r = ::writev(fd, v.data(), count);
    if (r >= 0) killpriv_on_.store((init_extra_flags_ & FUSE_HANDLE_KILLPRIV_V2) != 0);
    return r;
  }
  if (init == 0 || oh.unique != init) return ::writev(fd, iov, count);

  // The INIT reply: opt in to io_uring, then let the queues register.
  init_unique_.store(0);
  if (oh.error != 0 || count < 2 || iov[1].iov_len < sizeof(fuse_init_out)) {
    Stop();
    return ::writev(fd, iov, count);
  }
  std::vector<char> copy(static_cast<char*>(iov[1].iov_base), static_cast<char*>(iov[1].iov_base) + iov[1].iov_len);
  fuse_init_out out;
  memcpy(&out, copy.data(), sizeof out);
  out.flags |= kFuseInitExt | init_extra_flags_;
  out.flags2 |= static_cast<uint32_t>(kFuseOverIoUring >> 32);
  patch_unique_.store(0);
  memcpy(copy.data(), &out, sizeof out);
  std::vector<iovec> v(iov, iov + count);
  v[1].iov_base = copy.data();
  const ssize_t r = ::writev(fd, v.data(), count);
  if (r < 0) {
    const int saved = errno;
    Stop();
    errno = saved;
    return r;
  }
  negotiated_.store(true);
  killpriv_on_.store((init_extra_flags_ & FUSE_HANDLE_KILLPRIV_V2) != 0);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = out.max_pages != 0 ? out.max_pages : 32;
  size_t payload = std::max<size_t>({8192, out.max_write, pages * page});
  payload = (payload + page - 1) / page * page;
  Go(payload);
  return r;
}

ssize_t UringTransport::SpliceSend(int fdin, off_t* offin, int fdout, off_t* offout, size_t len, unsigned flags) {
  Entry* e = tl_entry;
  if (e == nullptr || e->replied || len < sizeof(fuse_out_header) || len - sizeof(fuse_out_header) > e->payload_size) {
    return splice(fdin, offin, fdout, offout, len, flags);
  }
  // A spliced reply to a ring request: drain the pipe into the entry.
  auto drain = [&](char* dst, size_t want) {
    size_t got = 0;
    while (got < want) {
      ssize_t r = ::read(fdin, dst + got, want - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  };
  fuse_out_header oh;
  const size_t n = len - sizeof oh;
  if (!drain(reinterpret_cast<char*>(&oh), sizeof oh) || !drain(e->payload, n)) {
    SetError(*e, e->commit_id, EIO);
    errno = EIO;
    return -1;
  }
  memcpy(e->hdr->in_out, &oh, sizeof oh);
  e->hdr->ent.payload_sz = oh.error != 0 ? 0 : static_cast<uint32_t>(n);
  e->replied = true;
  return static_cast<ssize_t>(len);
}

char* UringTransport::ReplyBuffer(size_t size) {
  Entry* e = tl_entry;
  if (e == nullptr || e->replied || size > e->payload_size) return nullptr;
  return e->payload;
}

bool UringTransport::InRingThread() { return tl_ring_thread; }

bool UringTransport::KillSuidgidAsked() { return tl_kill_suidgid; }

uint64_t UringTransport::ReaderReads() { return g_reader_reads.load(); }

}  // namespace layerfs::fuse
