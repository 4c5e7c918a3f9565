// Progress of long work (import, export, verify, gc, ...) as one line on a terminal's stderr,
// redrawn in place and ended with a newline when the work is done. Reports reach it at most ten
// times a second (ProgressMeter). Prints nothing when stderr is not a terminal, so scripts and
// logs see only the verb's own output. Writes through an Output (verb.h): the CLI's own stderr,
// or the daemon's `output` events when it runs a command line for the front (front/front.h).
// Belongs to one thread.
#pragma once

#include "cli/verb.h"
#include "layerfs/progress.h"

namespace layerfs::cli {

class TerminalProgress {
 public:
  // On when `tty` (stderr is a terminal); lines go to o.Err.
  TerminalProgress(Output& o, bool tty) : o_(o), on_(tty) {}
  ~TerminalProgress();  // ends a line left open
  // The callback to hand to a verb (empty when off).
  ProgressFn fn();

 private:
  void Show(const Progress& p);
  Output& o_;
  bool on_;
  bool open_line_ = false;
};

}  // namespace layerfs::cli
