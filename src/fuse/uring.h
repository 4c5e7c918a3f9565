// FUSE over io_uring: requests served on the caller's core.
//
// A synchronous FUSE request is a ping-pong: the caller sleeps until the daemon replies. Over
// /dev/fuse the kernel wakes whichever serving thread waited longest, usually on the other core,
// and each wake of an idle core costs ~130 us on this machine against ~10 us for a switch on the
// same core. Linux 6.14+ (module parameter fuse.enable_uring) lets a daemon register buffers on
// io_uring, one queue per CPU, and queues each request on the queue of the CPU its caller runs
// on. One thread per queue, pinned to that CPU, serves it: caller and server share a core.
//
// libfuse 3.14 predates this, so the transport sits under it through fuse_session_custom_io:
// it opts in by setting FUSE_OVER_IO_URING in the INIT reply, rebuilds each ring request as a
// /dev/fuse request for fuse_session_process_buf, and routes the reply written by fuse_reply_*
// on a ring thread into that ring entry (COMMIT_AND_FETCH). Everything else (INIT, FORGET,
// INTERRUPT, notifications, requests before the rings are up) keeps using /dev/fuse. If the
// kernel does not offer it or a ring cannot be set up before INIT is answered, the mount simply
// stays on /dev/fuse.
//
// Replies wake the caller from the queue thread on the caller's core, and the scheduler sends a
// task woken by a busy core to an idle one, so the caller would hop cores on every request. The
// queue threads therefore wait at idle priority (SCHED_IDLE): a core running only them counts as
// idle and the caller is woken where it was. Measured, getxattr round trips: 44 -> 18 us.
//
// Large READs past a file's start (readahead) go to a reader thread per queue, pinned to another
// CPU, which commits them on its own ring: the copies of a sequential read then run on two
// cores instead of one (docs/design.md, "Large reads go to the other core").
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

struct fuse_session;

namespace layerfs::fuse {

class UringTransport {
 public:
  // Whether the running kernel lets daemons serve FUSE over io_uring (fuse.enable_uring=Y).
  static bool KernelEnabled();

  // rings: serve over io_uring when the kernel offers it (else this only watches /dev/fuse).
  // idle_wait: queue threads wait for requests at idle priority (see Queue::Loop), so the
  // caller a reply wakes stays on its core. killpriv_v2: answer INIT with
  // FUSE_HANDLE_KILLPRIV_V2 when the kernel offers it (libfuse 3.14 cannot ask for it): the
  // kernel then stops asking for security.capability before every write, and leaves clearing
  // setuid/setgid to the file system, flagging the requests that must (KillSuidgidAsked).
  UringTransport(fuse_session* se, bool rings, bool idle_wait, bool killpriv_v2);
  ~UringTransport();  // Stop()s and joins the queue threads
  UringTransport(const UringTransport&) = delete;
  UringTransport& operator=(const UringTransport&) = delete;

  // fuse_custom_io hooks (installed by Mount on the session's /dev/fuse descriptor).
  ssize_t Read(int fd, void* buf, size_t len);
  ssize_t Writev(int fd, iovec* iov, int count);
  ssize_t SpliceSend(int fdin, off_t* offin, int fdout, off_t* offout, size_t len, unsigned flags);

  // True once the INIT reply opted in and every queue registered its entries.
  bool active() const {
    const unsigned q = queues_.load();
    return negotiated_.load() && q > 0 && registered_.load() == q && !register_failed_.load();
  }
  // Ends the queue threads; call once the connection is gone (unmounted or aborted).
  void Stop();

  // On a ring thread serving a request: the entry's payload buffer when `size` bytes fit, so a
  // read reply is written there once and fuse_reply_buf(req, ptr, n) copies nothing more.
  static char* ReplyBuffer(size_t size);
  static bool InRingThread();
  // While serving a request on this thread: the kernel asked for setuid/setgid to be cleared
  // with it (a WRITE or SETATTR under FUSE_HANDLE_KILLPRIV_V2).
  static bool KillSuidgidAsked();
  // FUSE_HANDLE_KILLPRIV_V2 was negotiated.
  bool killpriv_v2() const { return killpriv_on_.load(); }
  // READs served by the queues' reader threads so far, in this process (for tests).
  static uint64_t ReaderReads();

  struct Queue;

 private:
  void StartQueues();
  bool WaitQueuesReady();
  void Go(size_t payload_size);

  fuse_session* se_;
  int dev_fd_ = -1;
  bool rings_ = true;
  bool idle_wait_ = true;
  bool killpriv_v2_ = true;
  uint32_t init_extra_flags_ = 0;           // OR'ed into the INIT reply's flags
  std::atomic<uint64_t> patch_unique_{0};  // the INIT request whose reply gets them
  std::atomic<bool> killpriv_on_{false};
  bool offload_ = true;  // large READs go to a reader thread on another core
  std::atomic<unsigned> queues_{0};
  bool started_ = false;  // the session loop's thread only
  std::mutex q_mu_;       // q_ (Stop() may come from another thread)
  std::vector<std::unique_ptr<Queue>> q_;
  std::atomic<bool> negotiated_{false};
  std::atomic<unsigned> registered_{0};
  std::atomic<bool> register_failed_{false};
  std::atomic<uint64_t> init_unique_{0};
  std::atomic<bool> stop_{false};
  friend struct Queue;
};

}  // namespace layerfs::fuse
