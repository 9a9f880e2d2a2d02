#include "runtime/serve/reply_text.hpp"

#include "runtime/text/tokenizer.hpp"

namespace reach::serve {

ReplyText::ReplyText(std::vector<std::string> stops, const Tokenizer* channels, const std::string& prefix,
                     bool calls)
    : stop_(std::move(stops)), channels_(channels) {
  if (channels_) {
    harmony_.emplace(calls);
    prefix_ = harmony_->push(prefix);   // a header: it adds nothing but a call's opening
  }
}

ReplyPiece ReplyText::push(int32_t id, const std::string& decoded) {
  return split(channels_ ? harmony_piece(*channels_, id, decoded) : decoded, false);
}

ReplyPiece ReplyText::finish(const std::string& tail) { return split(tail, true); }

ReplyPiece ReplyText::split(const std::string& text, bool end) {
  ReplyPiece out;
  if (stop_.stopped()) return out;
  std::string content = text;
  if (harmony_) {
    HarmonyDelta d = harmony_->push(text);
    d.calls.insert(0, prefix_.calls);
    prefix_.calls.clear();
    if (end) {
      const HarmonyDelta rest = harmony_->flush();
      d.reasoning += rest.reasoning;
      d.content += rest.content;
      d.calls += rest.calls;
    }
    out.reasoning = std::move(d.reasoning);
    out.calls = std::move(d.calls);
    content = std::move(d.content);
  }
  out.content = stop_.push(content);
  if (end && !stop_.stopped()) out.content += stop_.flush();
  return out;
}

}  // namespace reach::serve
