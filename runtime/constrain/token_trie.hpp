#pragma once
// Every token's bytes in one byte trie, so that the allowed tokens of a JSON state are found by walking
// the trie with the state and cutting each branch at its first refused byte, instead of testing each of
// 50k-260k tokens.  Nodes are in depth-first order: a node's subtree is [i, end[i]), its first child is
// i + 1, so a walk is one pass over an array.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/text/tokenizer.hpp"

namespace reach {

struct ByteTrie {
  std::vector<uint32_t> end;        // per node: one past its subtree
  std::vector<uint8_t> label;       // per node: the byte of the edge into it (root: unused)
  std::vector<uint16_t> depth;      // per node: bytes from the root
  std::vector<uint32_t> first_id;   // per node + 1: its tokens are ids[first_id[i], first_id[i + 1])
  std::vector<int32_t> ids;
  size_t max_depth = 0;
  size_t size() const { return end.size(); }
};

// Marks every token of `trie` whose bytes `start` takes whole: a depth-first pass that skips a subtree
// at its first refused byte.  walk[d] holds the state after the first d bytes of the current path.
// State: copyable, with bool feed(uint8_t) (a JSON state, a tool-call form's candidate).
template <class State>
void walk_trie(const ByteTrie& trie, const State& start, std::vector<State>& walk, uint8_t* allowed) {
  if (walk.size() < trie.max_depth + 1) walk.resize(trie.max_depth + 1);
  walk[0] = start;
  for (size_t i = 1; i < trie.size();) {
    const size_t d = trie.depth[i];
    walk[d] = walk[d - 1];
    if (!walk[d].feed(trie.label[i])) {
      i = trie.end[i];
      continue;
    }
    for (uint32_t k = trie.first_id[i]; k < trie.first_id[i + 1]; ++k) allowed[trie.ids[k]] = 1;
    ++i;
  }
}

class TokenTrie {
 public:
  // bytes[id]: what the token appends (Tokenizer::token_bytes); empty: never allowed (special tokens).
  explicit TokenTrie(std::vector<std::string> bytes);
  // Built once per tokenizer and shared while any user holds it (a 262k vocabulary takes a moment).
  static std::shared_ptr<const TokenTrie> for_tokenizer(const Tokenizer& tokenizer);

  size_t vocab() const { return bytes_.size(); }
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
  const ByteTrie& all() const { return all_; }
  // The tokens that are not plain: the rest of the walk inside a string.
  const ByteTrie& not_plain() const { return not_plain_; }
  // Per id, 1 when a string between characters takes all its bytes and stays there (no '"', '\\',
  // control bytes or split UTF-8 characters): inside a string these pass without a walk.
  const std::vector<uint8_t>& plain() const { return plain_; }

 private:
  std::vector<std::string> bytes_;
  ByteTrie all_, not_plain_;
  std::vector<uint8_t> plain_;
};

}  // namespace reach
