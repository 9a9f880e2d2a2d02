#include "runtime/serve/reply_assembly.hpp"

#include <iterator>

namespace reach::serve {

namespace {
// Code points in UTF-8 text: the bytes that do not continue a character.
size_t utf8_chars(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}
}  // namespace

JobEvent ReplyAssembly::push(GeneratedToken tok) {
  if (tok.logprob) {
    // Where the token's text starts in the reply: the characters decoded before it (a token that ends
    // no character yet starts at the one it helps complete).
    tok.logprob->text_offset = text_chars_;
    logprobs_.push_back(std::move(*tok.logprob));
  }
  text_chars_ += utf8_chars(tok.text);
  ReplyPiece piece = text_.push(tok.id, tok.text);
  emitted_chars_ += utf8_chars(piece.content);
  JobEvent e;
  e.text = std::move(piece.content);
  e.reasoning = std::move(piece.reasoning);
  e.calls = std::move(piece.calls);
  e.logprobs = take_logprobs(false);
  return e;
}

JobEvent ReplyAssembly::finish(FinishReason reason, const std::string& tail) {
  JobEvent e;
  ReplyPiece piece = text_.finish(tail);
  if (text_.stopped()) reason = FinishReason::stop;
  e.text = std::move(piece.content);
  e.reasoning = std::move(piece.reasoning);
  e.calls = std::move(piece.calls);
  e.done = true;
  e.finish = reason;
  emitted_chars_ += utf8_chars(e.text);
  // A stop string cut the reply: the tokens past the cut are left out, as their text is.
  e.logprobs = take_logprobs(!text_.stopped());
  return e;
}

std::vector<TokenLogprob> ReplyAssembly::take_logprobs(bool all) {
  std::vector<TokenLogprob> out;
  size_t n = 0;
  while (n < logprobs_.size() && (all || logprobs_[n].text_offset < emitted_chars_)) ++n;
  out.assign(std::make_move_iterator(logprobs_.begin()), std::make_move_iterator(logprobs_.begin() + ptrdiff_t(n)));
  logprobs_.erase(logprobs_.begin(), logprobs_.begin() + ptrdiff_t(n));
  if (all) logprobs_.clear();
  return out;
}

}  // namespace reach::serve
