#pragma once
// Small UTF-8 helpers shared by the tokenizer files.  Header-only.  Every loop
// here and in its callers advances by a length of at least 1: sequence_length()
// returns 1..4 or sets *bad to 1..3, decode() sets *len to 1..4.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace reach::utf8 {

// Length of the well-formed UTF-8 sequence starting at s[i] (1..4), or 0 if
// the bytes there are not one.  In the 0 case `*bad` receives the length of
// the maximal subpart to replace by one U+FFFD (Unicode 3.9 / WHATWG, as Rust's
// String::from_utf8_lossy does).
inline size_t sequence_length(std::string_view s, size_t i, size_t* bad = nullptr) {
  auto b = [&](size_t k) -> unsigned { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0x100u; };
  unsigned c = b(0);
  if (c < 0x80) return 1;
  size_t need = 0;
  unsigned lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    if (bad) *bad = 1;
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    unsigned x = b(k);
    unsigned l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (x < l || x > h) {
      if (bad) *bad = k;
      return 0;
    }
  }
  return need + 1;
}

// True if s ends inside a UTF-8 sequence that further bytes could complete.
inline bool ends_incomplete(std::string_view s) {
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    unsigned c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte, look further back
    if (c < 0xC2 || c > 0xF4) return false;
    size_t bad = 0;
    return sequence_length(s, n - back, &bad) == 0 && bad == back;
  }
  return false;
}

inline bool is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

inline void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

inline constexpr std::string_view replacement_char = "\xEF\xBF\xBD";

// Replaces every ill-formed part by U+FFFD (same output as Rust's from_utf8_lossy).
inline std::string lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t bad = 0;
    size_t n = sequence_length(s, i, &bad);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.append(replacement_char);
      i += bad;
    }
  }
  return out;
}

// Decodes the code point at s[i] of a valid UTF-8 string; *len gets its length.
inline uint32_t decode(std::string_view s, size_t i, size_t* len) {
  unsigned c = static_cast<unsigned char>(s[i]);
  auto cont = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i + k]) & 0x3F); };
  if (c < 0x80 || i + 1 >= s.size()) {
    *len = 1;
    return c;
  }
  if (c < 0xE0) {
    *len = 2;
    return ((c & 0x1F) << 6) | cont(1);
  }
  if (c < 0xF0 && i + 2 < s.size()) {
    *len = 3;
    return ((c & 0x0F) << 12) | (cont(1) << 6) | cont(2);
  }
  if (i + 3 < s.size()) {
    *len = 4;
    return ((c & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
  }
  *len = 1;
  return c;
}

// Length of the character starting with lead byte c (valid input assumed).
inline size_t char_length(unsigned char c) {
  return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

// Rust's char::is_whitespace (the Unicode White_Space property).
inline bool is_whitespace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

}  // namespace reach::utf8
