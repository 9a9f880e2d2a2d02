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
