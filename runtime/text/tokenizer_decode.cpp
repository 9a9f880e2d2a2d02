// Decoding: ids -> tokens -> the decoder chain of tokenizer.json, and the
// streaming decoder.
#include <algorithm>

#include "runtime/text/tokenizer_impl.hpp"
#include "runtime/text/utf8.hpp"

namespace reach {

std::string byte_level_token(const std::string& t) {
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

int parse_byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Each turn moves b up or e down by c.size() >= 1 (one character, checked at load) within the token,
// so a loop runs at most t.size() times whatever start is.
std::string strip_token(const std::string& t, const std::string& c, uint64_t start, uint64_t stop) {
  if (c.empty()) return t;
  size_t b = 0, e = t.size();
  for (uint64_t k = 0; k < start && b + c.size() <= e && t.compare(b, c.size(), c) == 0; ++k) b += c.size();
  for (uint64_t k = 0; k < stop && e >= b + c.size() && t.compare(e - c.size(), c.size(), c) == 0; ++k)
    e -= c.size();
  return t.substr(b, e - b);
}

// Terminates: `what` is not empty, so each find starts past the previous match.
void replace_literal(std::string& t, const std::string& what, const std::string& with) {
  if (what.empty()) return;
  std::string out;
  size_t prev = 0;
  for (size_t p = t.find(what); p != std::string::npos; p = t.find(what, prev)) {
    out.append(t, prev, p - prev);
    out += with;
    prev = p + what.size();
  }
  out.append(t, prev, std::string::npos);
  t.swap(out);
}

namespace {

// ByteLevel: each token's bytes (byte_level_token); the bytes of all tokens become one string,
// ill-formed parts replaced by U+FFFD.
void decode_byte_level(std::vector<std::string>& tokens) {
  std::string bytes;
  for (const auto& t : tokens) bytes += byte_level_token(t);
  tokens.assign(1, utf8::lossy(bytes));
}

void decode_byte_fallback(std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  std::string pending;
  auto flush = [&] {
    if (pending.empty()) return;
    if (utf8::is_valid(pending)) {
      out.push_back(pending);
    } else {
      for (size_t i = 0; i < pending.size(); ++i) out.emplace_back(utf8::replacement_char);
    }
    pending.clear();
  };
  for (auto& t : tokens) {
    int b = parse_byte_token(t);
    if (b >= 0) {
      pending += static_cast<char>(b);
    } else {
      flush();
      out.push_back(std::move(t));
    }
  }
  flush();
  tokens.swap(out);
}

// Strip: per token (strip_token).
void decode_strip(std::vector<std::string>& tokens, const std::string& c, uint64_t start, uint64_t stop) {
  for (auto& t : tokens) t = strip_token(t, c, start, stop);
}

}  // namespace

std::string TokenizerImpl::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token.size()) continue;  // unknown ids are skipped
    if (skip_special && special[id]) continue;
    tokens.push_back(id_to_token[id]);
  }
  if (!has_decoder) {  // tokenizers joins with spaces when there is no decoder
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  size_t input = 0;
  for (const auto& t : tokens) input += t.size();
  const size_t limit = max_grown_size(input);
  size_t total = input;
  std::string replaced;
  for (const auto& step : decoder) {
    switch (step.kind) {
      case DecoderStep::byte_level:
        decode_byte_level(tokens);
        break;
      case DecoderStep::replace:
        for (auto& t : tokens) {  // each token within what the others leave of the limit
          const size_t others = total - t.size();
          if (!step.pattern->replace_all(t, step.text, limit - others, replaced))
            throw_growth(origin, step.where, input);
          t.swap(replaced);
          total = others + t.size();
        }
        break;
      case DecoderStep::byte_fallback:
        decode_byte_fallback(tokens);
        break;
      case DecoderStep::fuse: {
        std::string all;
        for (auto& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case DecoderStep::strip:
        decode_strip(tokens, step.text, step.start, step.stop);
        break;
      case DecoderStep::metaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          // tokens' Metaspace decoder: the replacement becomes a space, except
          // in the first token when a prefix was prepended, where it is dropped.
          replace_literal(tokens[i], step.text, i == 0 && step.prepend ? std::string() : std::string(" "));
        }
        break;
    }
    // The other steps grow a token at most 3x (an invalid byte becomes U+FFFD).
    total = 0;
    for (const auto& t : tokens) total += t.size();
    if (total > limit) throw_growth(origin, step.where, input);
  }
  std::string out;
  for (auto& t : tokens) out += t;
  return out;
}

// ---------------------------------------------------------------- streaming

// The algorithm of tokenizers' DecodeStream: decode a window made of the
// last emitted token(s) plus the pending ones, and emit what it adds to the
// decode of the emitted part, once it does not end in an incomplete character.
// Keeping one emitted token as context makes decoders that act on the first
// token (Strip, Metaspace) behave as on the whole sequence.
Tokenizer::StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : impl_(tokenizer.impl_), skip_special_(skip_special) {}

void Tokenizer::StreamDecoder::reset() {
  ids_.clear();
  prefix_.clear();
  prefix_count_ = 0;
}

std::string Tokenizer::StreamDecoder::push(int32_t id) {
  ids_.push_back(id);
  std::string text = impl_->decode(ids_, skip_special_);
  if (text.size() < prefix_.size() || text.compare(0, prefix_.size(), prefix_) != 0) {
    // The decoder rewrote the context (does not happen with the supported
    // decoders); restart the window at this token to stay consistent.
    ids_.assign(1, id);
    prefix_.clear();
    prefix_count_ = 0;
    text = impl_->decode(ids_, skip_special_);
  }
  if (text.size() == prefix_.size()) return {};
  std::string_view added = std::string_view(text).substr(prefix_.size());
  if (added.size() >= 3 && added.substr(added.size() - 3) == utf8::replacement_char) {
    // An incomplete character decodes to U+FFFD; wait for more bytes.  (A
    // window of 8+ pending tokens means it will never complete: emit it.)
    if (ids_.size() - prefix_count_ < 8) return {};
  }
  std::string out(added);
  // The new window starts at the tokens just emitted.
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_count_));
  prefix_count_ = ids_.size();
  prefix_ = impl_->decode(ids_, skip_special_);
  return out;
}

std::string Tokenizer::StreamDecoder::flush() {
  std::string text = impl_->decode(ids_, skip_special_);
  std::string out;
  if (text.size() > prefix_.size() && text.compare(0, prefix_.size(), prefix_) == 0) out = text.substr(prefix_.size());
  reset();
  return out;
}

}  // namespace reach
