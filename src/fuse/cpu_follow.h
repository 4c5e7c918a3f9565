// Serving a request on the caller's core: the FUSE serving thread moves to the CPU its caller
// last ran on.
//
// A synchronous FUSE request is a ping-pong: the caller sleeps until the daemon replies. When
// the two run on different cores, every request wakes an idle core twice (on a 2-vCPU guest
// measured at ~400 us per small-file create against ~44 us with both on one core), and the
// scheduler does not co-locate them by itself. So the thread that serves a request checks, at
// most once per interval or when the caller changes, which CPU the caller last ran on
// (/proc/TID/stat, field 39) and pins itself there. Called from the serving thread only.
#pragma once

#include <sys/types.h>

namespace layerfs::fuse {

void FollowCallerCpu(pid_t caller_tid);

}  // namespace layerfs::fuse
