#include "runtime/serve/reply_text.hpp"

#include "runtime/text/tokenizer.hpp"

namespace reach::serve {

ReplyText::ReplyText(std::vector<std::string> stops, const Tokenizer* channels)
    : stop_(std::move(stops)), channels_(channels) {
  if (channels_) harmony_.emplace();
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
    if (end) {
      const HarmonyDelta rest = harmony_->flush();
      d.reasoning += rest.reasoning;
      d.content += rest.content;
    }
    out.reasoning = std::move(d.reasoning);
    content = std::move(d.content);
  }
  out.content = stop_.push(content);
  if (end && !stop_.stopped()) out.content += stop_.flush();
  return out;
}

}  // namespace reach::serve
