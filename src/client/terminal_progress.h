// Progress of long work (import, export, verify, gc, ...) as one line on a terminal's stderr,
// redrawn in place and ended with a newline when the work is done. Reports reach it at most ten
// times a second (ProgressMeter). Prints nothing when stderr is not a terminal, so scripts and
// logs see only the verb's own output. Belongs to one thread.
#pragma once

#include "layerfs/progress.h"

namespace layerfs::client {

class TerminalProgress {
 public:
  TerminalProgress();  // on when stderr is a terminal
  ~TerminalProgress();  // ends a line left open
  // The callback to hand to a verb (empty when off).
  ProgressFn fn();

 private:
  void Show(const Progress& p);
  bool on_;
  bool open_line_ = false;
};

}  // namespace layerfs::client
