#include "runtime/constrain/json_state.hpp"

#include <algorithm>

namespace reach {

namespace {

enum ObjectPhase : uint8_t { kOpen, kKey, kColon, kValue, kComma };
enum ArrayPhase : uint8_t { kArrayOpen, kArrayValue, kArrayComma };
enum StringPhase : uint8_t { kPlain, kEscape, kHex, kUtf8 };
enum NumberPhase : uint8_t { kStart, kMinus, kZero, kInt, kDot, kFrac, kExp, kExpSign, kExpDigits };

constexpr uint32_t kMaxDigits = 15, kMaxExpDigits = 2;

bool is_space(uint8_t c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

constexpr uint8_t kNewline = 0x80;   // Frame::gap: the gap began with a newline; the low bits count its spaces
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// The range of a UTF-8 continuation byte by the rule its lead byte set (no overlong forms, no surrogates,
// nothing above U+10FFFF).
bool continuation_ok(uint8_t c, uint8_t rule) {
  switch (rule) {
    case 1: return c >= 0xA0 && c <= 0xBF;   // after E0
    case 2: return c >= 0x80 && c <= 0x9F;   // after ED
    case 3: return c >= 0x90 && c <= 0xBF;   // after F0
    case 4: return c >= 0x80 && c <= 0x8F;   // after F4
    default: return c >= 0x80 && c <= 0xBF;
  }
}

}  // namespace

JsonState::JsonState(const JsonGrammar* grammar) : g_(grammar) {
  if (!g_) return;
  frames_[0] = Frame{0, 0, g_->root(), root, 0, 0, 0};
  depth_ = 1;
}

JsonState& JsonState::operator=(const JsonState& o) {
  g_ = o.g_;
  depth_ = o.depth_;
  for (uint32_t i = 0; i < depth_; ++i) frames_[i] = o.frames_[i];
  return *this;
}

bool JsonState::in_plain_string() const {
  return depth_ > 0 && frames_[depth_ - 1].kind == string && frames_[depth_ - 1].phase == kPlain;
}

int JsonState::gap(Frame& f, uint8_t c, Slot slot) const {
  if (!is_space(c)) return -1;
  const bool pretty = g_->whitespace() == JsonWhitespace::pretty;
  if (c == '\n') {
    if (f.gap != 0 || !pretty || (slot != kEdge && slot != kAfterComma)) return 0;
    f.gap = kNewline;
    return 1;
  }
  if (c != ' ') return 0;   // tabs and carriage returns: never
  if (f.gap == 0 && (slot == kAfterColon || slot == kAfterComma)) {
    f.gap = 1;   // the one space of compact JSON
    return 1;
  }
  // Indentation: kIndentPerLevel spaces for each open object or array (the frames above the root).
  const uint32_t spaces = f.gap & ~kNewline, level = uint32_t(&f - frames_);
  if (!(f.gap & kNewline) || spaces >= kIndentPerLevel * level) return 0;
  ++f.gap;
  return 1;
}

const std::vector<std::string>& JsonState::texts(const Frame& f) const { return g_->node(f.node).literals; }

bool JsonState::push(Frame f) {
  if (depth_ >= sizeof frames_ / sizeof frames_[0]) return false;
  frames_[depth_++] = f;
  return true;
}

bool JsonState::start_value(int32_t id, uint8_t c) {
  const SchemaNode* n = &g_->node(id);
  while (n->kind == SchemaNode::alternatives) {
    id = n->by_first_byte[c];
    if (id < 0) return false;
    n = &g_->node(id);
  }
  const bool container_room = depth_ - 1 < uint32_t(kMaxNesting);   // the frames below are the root and containers
  switch (n->kind) {
    case SchemaNode::object: return c == '{' && container_room && push({0, 0, id, object, kOpen, 0, 0});
    case SchemaNode::array: return c == '[' && container_room && push({0, 0, id, array, kArrayOpen, 0, 0});
    case SchemaNode::string: return c == '"' && push({0, 0, id, string, kPlain, 0, 0});
    case SchemaNode::number:
    case SchemaNode::integer: return push({0, 0, id, number, kStart, 0, 0}) && feed_number(frames_[depth_ - 1], c) == 1;
    case SchemaNode::literal: {
      const size_t n_texts = n->literals.size();
      const uint64_t all = n_texts >= 64 ? ~uint64_t(0) : (uint64_t(1) << n_texts) - 1;
      return push({all, 0, id, literal, 0, 0, 0}) && feed_literal(frames_[depth_ - 1], c) == 1;
    }
    default: return false;
  }
}

bool JsonState::feed(uint8_t c) {
  while (depth_ > 0) {
    Frame& f = frames_[depth_ - 1];
    int r = 0;
    switch (f.kind) {
      case root: r = feed_root(f, c); break;
      case object: r = feed_object(f, c); break;
      case array: r = feed_array(f, c); break;
      case string: r = feed_string(f, c); break;
      case number: r = feed_number(f, c); break;
      case literal: r = feed_literal(f, c); break;
    }
    if (r >= 0) return r == 1;   // else the frame ended before c: its parent takes c
  }
  return false;
}

int JsonState::feed_root(Frame& f, uint8_t c) {
  if (f.phase != 0) return 0;   // the document is whole: nothing may follow
  if (is_space(c)) return 0;    // nor precede it
  f.phase = 1;
  return start_value(g_->root(), c) ? 1 : 0;
}

int JsonState::feed_object(Frame& f, uint8_t c) {
  const SchemaNode& n = g_->node(f.node);
  const size_t count = n.properties.size();
  const Slot slot = f.phase == kKey ? kTight : f.phase == kColon ? kAfterColon : f.phase == kComma ? kAfterComma : kEdge;
  if (const int s = gap(f, c, slot); s >= 0) return s;
  switch (f.phase) {
    case kOpen:
    case kComma:
      if (c == '}' && f.phase == kOpen && (n.any_keys || n.next_required[0] == count)) {
        --depth_;
        return 1;
      }
      if (c != '"') return 0;
      f.phase = kKey;
      f.gap = 0;
      if (n.any_keys) return push({0, 0, f.node, string, kPlain, 0, 0}) ? 1 : 0;
      {
        // The properties from the next one up to the first required one: those in between may be left out.
        if (f.aux >= count) return 0;
        const size_t last = std::min<size_t>(n.next_required[f.aux], count - 1);
        uint64_t mask = 0;
        for (size_t i = f.aux; i <= last; ++i) mask |= uint64_t(1) << i;
        if (!push({mask, 0, f.node, literal, 0, 0, 1})) return 0;
        return feed_literal(frames_[depth_ - 1], c);
      }
    case kKey:
      if (c != ':') return 0;
      f.phase = kColon;
      f.gap = 0;
      return 1;
    case kColon:
      f.phase = kValue;
      f.gap = 0;
      return start_value(n.any_keys ? g_->any() : n.properties[f.aux - 1].value, c) ? 1 : 0;
    case kValue:
      if (c == ',' && (n.any_keys || f.aux < count)) {
        f.phase = kComma;
        f.gap = 0;
        return 1;
      }
      if (c == '}' && (n.any_keys || n.next_required[f.aux] == count)) {
        --depth_;
        return 1;
      }
      return 0;
  }
  return 0;
}

int JsonState::feed_array(Frame& f, uint8_t c) {
  const SchemaNode& n = g_->node(f.node);
  if (const int s = gap(f, c, f.phase == kArrayComma ? kAfterComma : kEdge); s >= 0) return s;
  switch (f.phase) {
    case kArrayOpen:
    case kArrayComma:
      if (c == ']' && f.phase == kArrayOpen) {
        if (n.min_items > 0) return 0;
        --depth_;
        return 1;
      }
      if (f.count >= n.max_items) return 0;
      ++f.count;
      f.phase = kArrayValue;
      f.gap = 0;
      return start_value(n.items, c) ? 1 : 0;
    case kArrayValue:
      if (c == ',' && f.count < n.max_items) {
        f.phase = kArrayComma;
        f.gap = 0;
        return 1;
      }
      if (c == ']' && f.count >= n.min_items) {
        --depth_;
        return 1;
      }
      return 0;
  }
  return 0;
}

int JsonState::feed_string(Frame& f, uint8_t c) {
  switch (f.phase) {
    case kPlain:
      if (c == '"') {
        --depth_;
        return 1;
      }
      if (c == '\\') { f.phase = kEscape; return 1; }
      if (c < 0x20) return 0;
      if (c < 0x80) return 1;
      f.aux = 0;
      if (c >= 0xC2 && c <= 0xDF) f.count = 1;
      else if (c >= 0xE0 && c <= 0xEF) {
        f.count = 2;
        f.aux = c == 0xE0 ? 1 : c == 0xED ? 2 : 0;
      } else if (c >= 0xF0 && c <= 0xF4) {
        f.count = 3;
        f.aux = c == 0xF0 ? 3 : c == 0xF4 ? 4 : 0;
      } else {
        return 0;
      }
      f.phase = kUtf8;
      return 1;
    case kEscape:
      if (c == 'u') {
        f.phase = kHex;
        f.count = 0;
        return 1;
      }
      for (char e : {'"', '\\', '/', 'b', 'f', 'n', 'r', 't'})
        if (c == uint8_t(e)) { f.phase = kPlain; return 1; }
      return 0;
    case kHex:
      if (!is_hex(c) || (f.count == 0 && (c == 'd' || c == 'D'))) return 0;   // no \uD800-\uDFFF
      if (++f.count == 4) f.phase = kPlain;
      return 1;
    case kUtf8:
      if (!continuation_ok(c, f.aux)) return 0;
      f.aux = 0;
      if (--f.count == 0) f.phase = kPlain;
      return 1;
  }
  return 0;
}

int JsonState::feed_number(Frame& f, uint8_t c) {
  const bool integer = g_->node(f.node).kind == SchemaNode::integer;
  const bool point = !integer && c == '.', exponent = !integer && (c == 'e' || c == 'E');
  auto end = [&] {   // a byte that is no part of the number: it ends here if it may
    --depth_;
    return -1;
  };
  switch (f.phase) {
    case kStart:
    case kMinus:
      if (c == '-' && f.phase == kStart) f.phase = kMinus;
      else if (c == '0') f.phase = kZero;
      else if (is_digit(c)) { f.phase = kInt; f.count = 1; }
      else return 0;
      return 1;
    case kZero:
      if (point) { f.phase = kDot; return 1; }
      if (exponent) { f.phase = kExp; return 1; }
      return is_digit(c) ? 0 : end();
    case kInt:
      if (is_digit(c)) return f.count < kMaxDigits ? (++f.count, 1) : 0;
      if (point) { f.phase = kDot; return 1; }
      if (exponent) { f.phase = kExp; return 1; }
      return end();
    case kDot:
      if (!is_digit(c)) return 0;
      f.phase = kFrac;
      f.count = 1;
      return 1;
    case kFrac:
      if (is_digit(c)) return f.count < kMaxDigits ? (++f.count, 1) : 0;
      if (exponent) { f.phase = kExp; return 1; }
      return end();
    case kExp:
    case kExpSign:
      if ((c == '+' || c == '-') && f.phase == kExp) { f.phase = kExpSign; return 1; }
      if (!is_digit(c)) return 0;
      f.phase = kExpDigits;
      f.count = 1;
      return 1;
    case kExpDigits:
      if (is_digit(c)) return f.count < kMaxExpDigits ? (++f.count, 1) : 0;
      return end();
  }
  return 0;
}

bool JsonState::literal_complete(const Frame& f, int* which) const {
  const auto& t = texts(f);
  for (size_t i = 0; i < t.size() && i < 64; ++i)
    if ((f.candidates >> i & 1) && t[i].size() == f.count) {
      if (which) *which = int(i);
      return true;
    }
  return false;
}

bool JsonState::literal_must_end(const Frame& f) const {
  const auto& t = texts(f);
  bool complete = false;
  for (size_t i = 0; i < t.size() && i < 64; ++i) {
    if (!(f.candidates >> i & 1)) continue;
    if (t[i].size() > f.count) return false;
    complete = true;
  }
  return complete;
}

void JsonState::pop_literal() {
  const Frame& f = frames_[depth_ - 1];
  int which = 0;
  literal_complete(f, &which);
  if (f.aux == 1) frames_[depth_ - 2].aux = uint8_t(which + 1);   // an object key: the object's next property
  --depth_;
}

int JsonState::feed_literal(Frame& f, uint8_t c) {
  const auto& t = texts(f);
  uint64_t next = 0;
  for (size_t i = 0; i < t.size() && i < 64; ++i)
    if ((f.candidates >> i & 1) && t[i].size() > f.count && uint8_t(t[i][f.count]) == c) next |= uint64_t(1) << i;
  if (!next) {
    if (!literal_complete(f, nullptr)) return 0;
    pop_literal();   // a value that a longer one extends (1 of 1 and 12) ends at a byte that is no part of either
    return -1;
  }
  f.candidates = next;
  ++f.count;
  if (literal_must_end(f)) pop_literal();
  return 1;
}

bool JsonState::can_end() const {
  if (!g_ || depth_ == 0) return false;
  JsonState s(*this);
  for (;;) {
    const Frame& f = s.frames_[s.depth_ - 1];
    if (f.kind == root) return f.phase == 1;
    if (f.kind == number && (f.phase == kZero || f.phase == kInt || f.phase == kFrac || f.phase == kExpDigits)) {
      --s.depth_;
    } else if (f.kind == literal && s.literal_complete(f, nullptr)) {
      s.pop_literal();
    } else {
      return false;
    }
  }
}

}  // namespace reach
