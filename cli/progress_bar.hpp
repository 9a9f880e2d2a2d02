#pragma once
// A one-line progress bar on stderr for long operations (weight upload, eval):
//   "loading model  42% [########............]  1234.5/2900.0 MiB  812.3 MiB/s  ETA 2s"
// Drawn with \r, at most ~10 times a second, and only once the operation
// has lasted more than ~0.5 s (short loads print nothing).  Shown only when
// `enabled`, and stderr is a TTY or REACH_PROGRESS=1; REACH_PROGRESS=0 hides
// it always.  Single-threaded: call advance() / set() from one thread.
#include <chrono>
#include <cstdint>
#include <string>

#include "base/progress.hpp"

namespace reach::cli {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total_bytes, bool enabled);
  ~ProgressBar();   // finish()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void advance(uint64_t n);
  // The position and total as a library ProgressFn reports them.
  void set(uint64_t done, uint64_t total);
  // A ProgressFn that drives this bar and never cancels; valid while the bar lives.
  ProgressFn callback();
  // Draws the final state (if anything was drawn) and ends the line.
  void finish();
  // Prints `line` (and a newline) on stderr above the bar: a partial result
  // of a long operation stays on screen, and in a log, as it completes.
  void println(const std::string& line);

  bool active() const { return active_; }   // will it draw at all?
  uint64_t done() const { return done_; }

  // Whether the environment allows a bar on stderr (TTY / REACH_PROGRESS).
  static bool stderr_allows();
  // The line drawn (no \r), exposed for tests.
  static std::string format_line(const std::string& label, uint64_t done, uint64_t total, double seconds);

 private:
  void draw(bool final_draw);

  std::string label_;
  uint64_t total_ = 0;
  uint64_t done_ = 0;
  bool active_ = false;
  bool drawn_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace reach::cli
