#include "runtime/serve/stop_text.hpp"

#include <algorithm>

namespace reach::serve {

std::string StopText::push(const std::string& piece) {
  if (stopped_) return "";
  pending_ += piece;
  size_t first = std::string::npos;
  for (const std::string& s : stops_) {
    const size_t at = pending_.find(s);
    if (at != std::string::npos) first = std::min(first, at);
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  // Longest tail of pending_ that is a proper prefix of a stop string: it may still complete one.  A tail
  // starting inside a UTF-8 character cannot match a stop string's first byte, so the cut is on a
  // character boundary.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t n = std::min(s.size() - 1, pending_.size()); n > hold; --n)
      if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) { hold = n; break; }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopText::flush() {
  std::string out;
  out.swap(pending_);
  return stopped_ ? std::string() : out;
}

}  // namespace reach::serve
