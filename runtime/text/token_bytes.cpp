// The bytes a token appends to the text: each token alone through the decoder chain, as the chain
// treats a token in the middle of the text (constrained sampling needs exact bytes, and decode() of a
// single token would turn a split UTF-8 character into U+FFFD).
#include "runtime/text/tokenizer_impl.hpp"
#include "runtime/text/utf8.hpp"

namespace reach {

namespace {

// ByteLevel per token: characters back to bytes; a token with a character outside the table keeps its
// UTF-8 as is (what decode_byte_level does).
std::string byte_level(const std::string& t) {
  std::string bytes;
  for (size_t i = 0; i < t.size();) {
    size_t len = 0;
    const int b = byte_from_unicode(utf8::decode(t, i, &len));
    if (b < 0) return t;
    bytes += static_cast<char>(b);
    i += len;
  }
  return bytes;
}

int byte_token(const std::string& t) {  // "<0xNN>" -> NN, else -1
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

void replace_all(std::string& t, const std::string& what, const std::string& with) {
  if (what.empty()) return;
  for (size_t p = t.find(what); p != std::string::npos; p = t.find(what, p + with.size())) t.replace(p, what.size(), with);
}

}  // namespace

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
        case DecoderStep::byte_level: s = byte_level(s); break;
        case DecoderStep::replace:
          // One token is far below the growth limit the whole-text decode guards.
          if (step.pattern->replace_all(s, step.text, max_grown_size(s.size()), replaced)) s.swap(replaced);
          break;
        case DecoderStep::byte_fallback:
          if (const int b = byte_token(s); b >= 0) s.assign(1, static_cast<char>(b));
          break;
        case DecoderStep::fuse: fused = true; break;
        case DecoderStep::strip:
          if (!fused) {   // per token: the Strip decoder's own rule
            size_t b = 0, e = s.size();
            const std::string& c = step.text;
            for (uint64_t k = 0; k < step.start && !c.empty() && b + c.size() <= e && s.compare(b, c.size(), c) == 0; ++k)
              b += c.size();
            for (uint64_t k = 0; k < step.stop && !c.empty() && e >= b + c.size() && s.compare(e - c.size(), c.size(), c) == 0; ++k)
              e -= c.size();
            s = s.substr(b, e - b);
          }
          break;
        case DecoderStep::metaspace: replace_all(s, step.text, " "); break;
      }
    }
    out[id] = std::move(s);
  }
  return out;
}

}  // namespace reach
