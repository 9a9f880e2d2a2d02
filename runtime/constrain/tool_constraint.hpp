#pragma once
// Tool calls constrained inside a free reply (tool_choice "auto"): the reply is free text until it writes
// the chat family's call opener ("<tool_call>", "[TOOL_CALLS]", harmony's "to=functions."); from there
// the call follows one of the tools' forms, a list of segments (literal text with the function's name,
// special tokens, the arguments under the tool's JSON schema).  Every tool's form is a candidate at the
// opener; the bytes the model writes drop the candidates they do not fit, so the name it writes picks
// the schema its arguments follow, and only the tools' names can be written.  After the form's last
// segment the reply is free again (or, for a forced call, may only end).
//
// A token that would complete the opener is allowed only when the bytes it has after the opener fit a
// candidate; tokens may not run past the end of a call (the next token continues the free text).
// ConstrainedReply (json_constraint.hpp) walks these forms when its JsonConstraint holds them.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/constrain/json_grammar.hpp"
#include "runtime/constrain/json_state.hpp"
#include "runtime/constrain/token_trie.hpp"

namespace reach {

struct ToolCallSegment {
  enum Kind : uint8_t { text, special, json };
  Kind kind = text;
  std::string bytes;                          // text: what must be written
  int32_t id = -1;                            // special: the token
  std::shared_ptr<const JsonGrammar> grammar; // json: the arguments' schema
};

struct ToolCallForms {
  // The text that opens a call (its bytes, whatever tokens write them), and special tokens that are the
  // opener by themselves (Mistral's [TOOL_CALLS]).
  std::string opener;
  std::vector<int32_t> opener_ids;
  // The opener counts only as the reply's first non-blank text (Llama 3.1: a reply that starts with "{"
  // is the call; Mistral's and Phi-4-mini's list of calls is the reply).
  bool at_start = false;
  // Where the opener counts only inside a message header (harmony: from <|start|> or <|channel|> to
  // <|message|>; the reply starts in one): the special tokens that open and close a header.  Empty: anywhere.
  std::vector<int32_t> header_open_ids, header_close_ids;
  std::vector<std::vector<ToolCallSegment>> calls;   // per tool: what follows the opener
  bool in_call = false;          // the reply starts just after an opener (the prompt wrote it: a forced call)
  bool end_after_call = false;   // after one call only an end id may come (a forced call)
};

// One reply's way through ToolCallForms (ConstrainedReply's tool mode).
class ToolCallReply {
 public:
  ToolCallReply(std::shared_ptr<const ToolCallForms> forms, std::shared_ptr<const TokenTrie> trie);
  void restart();
  // As ConstrainedReply::allowed / advance.
  void allowed(std::span<const int32_t> stop_ids, size_t count, std::vector<uint8_t>& allowed) const;
  void advance(int32_t id, bool stop);
  bool ended() const { return ended_; }
  bool in_call() const { return !cands_.empty(); }
  size_t calls() const { return calls_; }   // calls completed so far

  // One candidate form, where it stands.
  struct Cand {
    uint32_t tool = 0, seg = 0, pos = 0;
    JsonState json;
  };

 private:
  // Feeds one byte of free text; true when it completed the opener (the candidates are set).
  bool feed_free(uint8_t byte);
  void open_call();
  // Feeds one byte to the open call: false when no candidate takes it.
  bool feed_call(uint8_t byte);

  std::shared_ptr<const ToolCallForms> f_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<uint32_t> fail_;   // the opener's KMP failure table
  // Per opener state k (bytes of it matched): the tokens that complete it from there and where their
  // bytes after it start.
  std::vector<std::vector<std::pair<int32_t, uint32_t>>> completes_;

  uint32_t k_ = 0;           // free text: opener bytes matched (at_start: in a row, after blanks)
  bool at_start_ = true;     // free text: only blanks so far
  bool in_header_ = true;    // free text: inside a message header (ToolCallForms::header_open_ids)
  std::vector<Cand> cands_;  // in a call: the forms still possible
  bool after_call_ = false;  // end_after_call: the call is written
  bool ended_ = false;
  size_t calls_ = 0;
  mutable std::vector<uint8_t> scratch_;
};

}  // namespace reach
