#pragma once
// Where a JSON text stands in a JsonGrammar, byte by byte: a pushdown automaton whose stack holds one
// frame per open value (object, array, string, number, literal).  feed() says whether a byte may come
// next and takes it; the token mask copies states freely (a few dozen bytes each), so a state is a
// fixed array and nothing is allocated.
#include <cstdint>
#include <memory>

#include "runtime/constrain/json_grammar.hpp"

namespace reach {

class JsonState {
 public:
  explicit JsonState(const JsonGrammar* grammar = nullptr);

  // false (and the state unspecified) when no accepted text continues with this byte.
  bool feed(uint8_t byte);
  // The text so far is a whole document (a number may still go on).
  bool can_end() const;
  // A whole document that no byte may extend.
  bool finished() const { return depth_ == 1 && frames_[0].phase == 1; }
  // Inside a string, between characters: any byte but '"', '\\' and controls keeps it there (the mask's fast path).
  bool in_plain_string() const;

  JsonState(const JsonState& o) { *this = o; }
  JsonState& operator=(const JsonState& o);   // copies the live frames only

 private:
  enum Kind : uint8_t { root, object, array, string, number, literal };
  struct Frame {
    uint64_t candidates;   // literal: the values still matching
    uint32_t count;        // array: items; literal: bytes matched; number: digits of this part; string: hex digits
    int32_t node;
    Kind kind;
    uint8_t phase;
    uint8_t gap;           // the current gap's whitespace: 0, or 1 space, or kNewline | its spaces
    uint8_t aux;           // object: the next property index; literal: 1 for an object key; string: UTF-8 rule
  };

  bool start_value(int32_t node, uint8_t byte);
  bool push(Frame f);
  // Where a gap lies: between a key and its ':' (none), after ':', after ',', or after an opening
  // bracket / before a closing one (an edge: only pretty JSON's newlines and indentation).
  enum Slot : uint8_t { kTight, kAfterColon, kAfterComma, kEdge };
  // 1: a whitespace byte the gap may take (taken); 0: whitespace it may not; -1: not whitespace.
  int gap(Frame& f, uint8_t byte, Slot slot) const;
  // Each returns 1: taken, 0: refused, -1: the frame ended before this byte (popped: feed it to the parent).
  int feed_root(Frame& f, uint8_t byte);
  int feed_object(Frame& f, uint8_t byte);
  int feed_array(Frame& f, uint8_t byte);
  int feed_string(Frame& f, uint8_t byte);
  int feed_number(Frame& f, uint8_t byte);
  int feed_literal(Frame& f, uint8_t byte);
  void pop_literal();
  bool literal_complete(const Frame& f, int* which) const;
  bool literal_must_end(const Frame& f) const;
  const std::vector<std::string>& texts(const Frame& f) const;

  const JsonGrammar* g_;
  uint32_t depth_ = 0;
  Frame frames_[kMaxNesting + 4];   // root, containers, and a string / number / literal on top
};

}  // namespace reach
