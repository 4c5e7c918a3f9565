// Progress of a long operation (push, fetch, clone, ...), reported through a callback the caller
// owns: the CLI prints it on a terminal's stderr, the daemon sends it as progress events.
// Plain data; a ProgressMeter has one owner.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace layerfs {

struct Progress {
  std::string phase;  // "push", "fetch", "index", "verify", ...
  uint64_t objects = 0, objects_total = 0;  // totals 0 when unknown
  uint64_t bytes = 0, bytes_total = 0;
  double rate = 0;   // bytes per second since the phase began
  bool done = false;  // the phase's last report
};
using ProgressFn = std::function<void(const Progress&)>;

// Throttles reports to at most ten a second (and always passes the last one).
class ProgressMeter {
 public:
  ProgressMeter(ProgressFn fn, std::string phase) : fn_(std::move(fn)) {
    p_.phase = std::move(phase);
    start_ = last_ = std::chrono::steady_clock::now();
  }
  Progress& state() { return p_; }
  void Update() { Report(false); }
  void Done() { Report(true); }

 private:
  void Report(bool done) {
    if (!fn_) return;
    auto now = std::chrono::steady_clock::now();
    if (!done && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    double secs = std::chrono::duration<double>(now - start_).count();
    p_.rate = secs > 0 ? p_.bytes / secs : 0;
    p_.done = done;
    fn_(p_);
  }
  ProgressFn fn_;
  Progress p_;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace layerfs
