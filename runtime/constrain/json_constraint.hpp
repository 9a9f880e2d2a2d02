#pragma once
// Constrained sampling to JSON: before each sample the tokens whose bytes cannot continue the document
// get -inf logits; the chosen token's bytes then advance the document's state.  The end-of-reply ids
// are allowed once the document is whole, and then nothing else; special tokens never.
//
//   auto c = std::make_shared<JsonConstraint>(JsonGrammar::from_schema_text(schema),
//                                            TokenTrie::for_tokenizer(*model.tokenizer()));
//   generation.set_constraint(c);   // runtime/session/generation.hpp applies it
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/constrain/json_grammar.hpp"
#include "runtime/constrain/json_state.hpp"
#include "runtime/constrain/token_trie.hpp"
#include "runtime/constrain/tool_constraint.hpp"

namespace reach {

// What a reply must be, for one vocabulary: immutable, shared by the replies that use it.  Either one
// JSON document (grammar), or free text with tool calls constrained in it (tools: tool_constraint.hpp).
struct JsonConstraint {
  JsonConstraint(std::shared_ptr<const JsonGrammar> g, std::shared_ptr<const TokenTrie> t)
      : grammar(std::move(g)), trie(std::move(t)) {}
  JsonConstraint(std::shared_ptr<const ToolCallForms> f, std::shared_ptr<const TokenTrie> t)
      : trie(std::move(t)), tools(std::move(f)) {}
  std::shared_ptr<const JsonGrammar> grammar;
  std::shared_ptr<const TokenTrie> trie;
  std::shared_ptr<const ToolCallForms> tools;
};

// One reply's way through a JsonConstraint.
class ConstrainedReply {
 public:
  explicit ConstrainedReply(std::shared_ptr<const JsonConstraint> constraint);
  void restart();   // a new document

  // allowed[id] = 1 for each id that may come next (ids at or past the vocabulary: 0).
  void allowed(std::span<const int32_t> stop_ids, size_t count, std::vector<uint8_t>& allowed) const;
  // `logits` with the ids allowed() refuses at -inf, into `out`.  Throws Error(invalid_argument) when no
  // id is allowed (a vocabulary without the bytes the document needs, or a model without end ids).
  void mask(std::span<const float> logits, std::span<const int32_t> stop_ids, std::vector<float>& out);
  // Takes the chosen token.  Throws Error(invalid_argument) for a token the state refuses (chosen
  // without the mask).
  void advance(int32_t id, bool stop);

  const JsonState& state() const { return state_; }
  bool ended() const { return tools_ ? tools_->ended() : ended_; }   // an end id was taken
  const ToolCallReply* tools() const { return tools_.get(); }      // the tool mode's state; null without
  // Time spent in mask() and how many times (for `reach run`'s report).
  double mask_seconds() const { return mask_seconds_; }
  uint64_t masks() const { return masks_; }

 private:
  std::shared_ptr<const JsonConstraint> c_;
  std::unique_ptr<ToolCallReply> tools_;   // JsonConstraint::tools: free text with calls
  JsonState state_;
  bool ended_ = false;
  std::vector<uint8_t> allowed_;
  mutable std::vector<JsonState> walk_;   // one state per trie depth
  double mask_seconds_ = 0;
  uint64_t masks_ = 0;
};

}  // namespace reach
