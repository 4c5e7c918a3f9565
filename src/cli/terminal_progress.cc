#include "cli/terminal_progress.h"

#include <unistd.h>

#include <cstdio>
#include <fmt/format.h>

namespace layerfs::cli {

namespace {

std::string Size(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.0f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

}  // namespace

TerminalProgress::~TerminalProgress() {
  if (open_line_) o_.Err("\n");
}

ProgressFn TerminalProgress::fn() {
  if (!on_) return nullptr;
  return [this](const Progress& p) { Show(p); };
}

void TerminalProgress::Show(const Progress& p) {
  std::string line = p.phase + ": " + std::to_string(p.objects);
  if (p.objects_total) line += fmt::format("/{} ({:.0f}%)", p.objects_total, 100.0 * p.objects / p.objects_total);
  line += " objects, " + Size(p.bytes);
  if (p.bytes_total) line += " of " + Size(p.bytes_total);
  if (p.rate > 0) line += ", " + Size(p.rate) + "/s";
  // \r returns to the line's start; \033[K clears what a longer previous line left.
  o_.Err("\r" + line + "\033[K" + (p.done ? "\n" : ""));
  open_line_ = !p.done;
}

}  // namespace layerfs::cli
