// SentencePiece BPE by scores, for GGUF "llama" vocabularies (which carry
// scores, not merges).  The algorithm of llama.cpp's SPM tokenizer: start from
// the word's characters, repeatedly merge the adjacent pair whose concatenation
// is a token with the highest score (the leftmost among equal scores), then
// emit each symbol's token, or its bytes as <0xNN> tokens when it is none.
#include <queue>

#include "base/error.hpp"
#include "runtime/text/tokenizer_impl.hpp"
#include "runtime/text/utf8.hpp"

namespace reach {

void BpeModel::tokenize_spm(std::string_view w, std::vector<int32_t>& out) const {
  if (w.empty()) return;
  if (w.size() > static_cast<size_t>(INT32_MAX))
    throw Error(ErrorCode::invalid_argument, "tokenizer: a text of " + std::to_string(w.size()) +
                                                 " bytes (more than 2^31) cannot be encoded");
  // Symbols are adjacent byte ranges of w, so a pair's text is one substring.
  struct Symbol {
    int32_t begin, size;  // size 0: merged into its left neighbour
    int32_t prev, next;
  };
  std::vector<Symbol> sym;
  sym.reserve(w.size());
  for (size_t i = 0; i < w.size();) {  // i grows by len >= 1 each turn
    size_t len = std::min(utf8::char_length(static_cast<unsigned char>(w[i])), w.size() - i);
    int32_t n = static_cast<int32_t>(sym.size());
    sym.push_back({static_cast<int32_t>(i), static_cast<int32_t>(len), n - 1, n + 1});
    i += len;
  }
  sym.back().next = -1;

  struct Bigram {
    float score;
    int32_t left, right, size;
    bool operator<(const Bigram& o) const {  // priority_queue top: highest score, then leftmost
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::vector<Bigram> storage;
  storage.reserve(sym.size());
  std::priority_queue<Bigram> queue(std::less<Bigram>(), std::move(storage));
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t size = sym[left].size + sym[right].size;
    auto it = vocab.find(w.substr(static_cast<size_t>(sym[left].begin), static_cast<size_t>(size)));
    if (it == vocab.end() || static_cast<size_t>(it->second) >= scores.size()) return;
    queue.push({scores[static_cast<size_t>(it->second)], left, right, size});
  };
  for (size_t k = 1; k < sym.size(); ++k) try_add(static_cast<int32_t>(k - 1), static_cast<int32_t>(k));
  // Terminates: each merge empties one symbol and pushes at most two bigrams,
  // so at most n - 1 merges and 3n pops for n symbols.
  while (!queue.empty()) {
    Bigram b = queue.top();
    queue.pop();
    Symbol& left = sym[b.left];
    Symbol& right = sym[b.right];
    if (left.size == 0 || right.size == 0 || left.size + right.size != b.size) continue;  // stale
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = b.left;
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    std::string_view text = w.substr(static_cast<size_t>(sym[i].begin), static_cast<size_t>(sym[i].size));
    auto it = vocab.find(text);
    if (it != vocab.end()) {
      out.push_back(it->second);
      continue;
    }
    for (unsigned char c : text) {  // byte fallback; the unknown token when the byte has none
      if (byte_tokens[c] >= 0) out.push_back(byte_tokens[c]);
      else if (unk) out.push_back(*unk);
    }
  }
}

}  // namespace reach
