#include "cli/progress_bar.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "base/platform/console.hpp"


namespace reach::cli {

namespace {
constexpr double kShowAfterSeconds = 0.5;
constexpr double kRedrawSeconds = 0.1;
constexpr int kBarWidth = 20;
constexpr double kMiB = 1024.0 * 1024.0;
}  // namespace

bool ProgressBar::stderr_allows() {
  const char* env = std::getenv("REACH_PROGRESS");
  if (env && std::strcmp(env, "1") == 0) return true;
  if (env && std::strcmp(env, "0") == 0) return false;
  // A terminal that takes the bar's \033[K (a Windows console must be switched to ANSI escapes).
  return platform::is_terminal(platform::Stream::err) && platform::enable_ansi_escapes(platform::Stream::err);
}

ProgressBar::ProgressBar(std::string label, uint64_t total_bytes, bool enabled)
    : label_(std::move(label)), total_(total_bytes), active_(enabled && stderr_allows()) {
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() { finish(); }

std::string ProgressBar::format_line(const std::string& label, uint64_t done, uint64_t total, double seconds) {
  const double frac = total ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 1.0;
  const int filled = static_cast<int>(frac * kBarWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kBarWidth - filled), '.');
  const double rate = seconds > 0 ? static_cast<double>(done) / kMiB / seconds : 0.0;
  char eta[32] = "";
  if (done < total && rate > 0) {
    const double left = static_cast<double>(total - done) / kMiB / rate;
    std::snprintf(eta, sizeof eta, "  ETA %.0fs", left);
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "%3d%% [%s] %8.1f/%.1f MiB %8.1f MiB/s%s", static_cast<int>(frac * 100.0),
                bar.c_str(), static_cast<double>(done) / kMiB, static_cast<double>(total) / kMiB, rate, eta);
  return label + " " + buf;
}

void ProgressBar::draw(bool final_draw) {
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - start_).count();
  std::string line = format_line(label_, done_, total_, seconds);
  // \033[K clears the rest of the previous (possibly longer) line.
  std::fprintf(stderr, "\r%s\033[K%s", line.c_str(), final_draw ? "\n" : "");
  std::fflush(stderr);
  drawn_ = true;
  last_draw_ = now;
}

void ProgressBar::advance(uint64_t n) { set(done_ + n, total_); }

void ProgressBar::set(uint64_t done, uint64_t total) {
  done_ = done;
  total_ = total;
  if (!active_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - start_).count() < kShowAfterSeconds) return;
  if (drawn_ && std::chrono::duration<double>(now - last_draw_).count() < kRedrawSeconds) return;
  draw(false);
}

ProgressFn ProgressBar::callback() {
  return [this](uint64_t done, uint64_t total) {
    set(done, total);
    return true;
  };
}

void ProgressBar::println(const std::string& line) {
  if (drawn_ && !finished_) std::fputs("\r\033[K", stderr);   // clear the bar; the next advance redraws it
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  drawn_ = false;
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (active_ && drawn_) draw(true);   // nothing drawn: the operation was short, stay quiet
}

}  // namespace reach::cli
