#pragma once
// Stop strings over streamed text.  Generated text arrives in pieces (one token's worth, never a split
// UTF-8 character); a stop string can straddle pieces.  StopText releases only text that can no longer
// become part of a stop string: it holds back the longest tail that is a prefix of some stop string.
#include <string>
#include <vector>

namespace reach::serve {

class StopText {
 public:
  explicit StopText(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Appends `piece`; returns the text now safe to emit.  Once a stop string is seen, stopped() is true,
  // the text before it is returned and everything after it is dropped.
  std::string push(const std::string& piece);
  // The held-back tail, at the end of generation (it did not become a stop string).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace reach::serve
