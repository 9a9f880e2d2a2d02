// The bytes a token appends to the text: each token alone through the decoder chain, as the chain
// treats a token in the middle of the text (constrained sampling needs exact bytes, and decode() of a
// single token would turn a split UTF-8 character into U+FFFD).
#include "runtime/text/tokenizer_impl.hpp"
#include "runtime/text/utf8.hpp"

namespace reach {

std::vector<std::string> Tokenizer::token_bytes() const {
  const TokenizerImpl& t = *impl_;
  std::vector<std::string> out(t.id_to_token.size());
  std::string replaced;
  for (size_t id = 0; id < out.size(); ++id) {
    if (t.special[id] || t.id_to_token[id].empty()) continue;
    std::string s = t.id_to_token[id];
    if (!t.has_decoder) { out[id] = std::move(s); continue; }
    bool fused = false;
    for (const DecoderStep& step : t.decoder) {
      switch (step.kind) {
        case DecoderStep::byte_level: s = byte_level_token(s); break;
        case DecoderStep::replace:
          // One token is far below the growth limit the whole-text decode guards.
          if (step.pattern->replace_all(s, step.text, max_grown_size(s.size()), replaced)) s.swap(replaced);
          break;
        case DecoderStep::byte_fallback:
          if (const int b = parse_byte_token(s); b >= 0) s.assign(1, static_cast<char>(b));
          break;
        case DecoderStep::fuse: fused = true; break;
        case DecoderStep::strip:
          if (!fused) s = strip_token(s, step.text, step.start, step.stop);   // per token: Strip's own rule
          break;
        case DecoderStep::metaspace: replace_literal(s, step.text, " "); break;
      }
    }
    out[id] = std::move(s);
  }
  return out;
}

}  // namespace reach
