// Added tokens: leftmost-longest matching (tokenizers' AddedVocabulary, which
// runs aho-corasick with MatchKind::LeftmostLongest) and the split around them.
#include <algorithm>
#include <deque>

#include "base/error.hpp"
#include "runtime/text/tokenizer_impl.hpp"
#include "runtime/text/utf8.hpp"

namespace reach {

// The automaton is built over the *reversed* contents and run from the end of
// the text to its start.  After reading text[s:] backwards its state is the
// longest suffix of reverse(text[s:]) that is a path of the trie, and the
// output of that state (its own token, else the one of its suffix links) is the
// longest content that text[s:] starts with.  So one pass gives the longest
// match at every position, whatever the number and length of the tokens: the
// matching is linear in the text (a scan per position and per token was not).
void AddedMatcher::build() {
  nodes_.assign(1, Node{});
  size_t total = 0;
  std::vector<std::string> rev;  // reversed contents, by token index
  std::vector<int32_t> order;    // non-empty contents, sorted by reversed content, then index
  rev.reserve(tokens.size());
  for (size_t k = 0; k < tokens.size(); ++k) {
    rev.emplace_back(tokens[k]->content.rbegin(), tokens[k]->content.rend());
    total += rev.back().size();
    if (!rev.back().empty()) order.push_back(static_cast<int32_t>(k));
  }
  if (total > kMaxAddedBytes)
    throw Error(ErrorCode::format, "added_tokens hold " + std::to_string(total) + " bytes of content, more than " +
                                       std::to_string(kMaxAddedBytes >> 20) + " MiB (real ones: ~100 kB)");
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return rev[a] < rev[b]; });

  // Breadth-first: a node is the range of `order` whose reversed contents share
  // its path; its children, one per next byte, are contiguous in nodes_.
  struct Range {
    size_t lo, hi, depth;
  };
  std::deque<Range> queue{{0, order.size(), 0}};  // the front is nodes_[id]
  for (size_t id = 0; !queue.empty(); ++id) {
    auto [lo, hi, depth] = queue.front();
    queue.pop_front();
    // The shortest content sorts first: a token ending here (the first of equal ones, as before).
    if (lo < hi && rev[order[lo]].size() == depth) nodes_[id].token = order[lo];
    while (lo < hi && rev[order[lo]].size() == depth) ++lo;
    nodes_[id].first_child = static_cast<int32_t>(nodes_.size());
    while (lo < hi) {  // one child per distinct byte at `depth`; each turn advances lo
      const unsigned char c = static_cast<unsigned char>(rev[order[lo]][depth]);
      size_t end = lo;
      while (end < hi && static_cast<unsigned char>(rev[order[end]][depth]) == c) ++end;
      Node child;
      child.label = c;
      nodes_.push_back(child);
      queue.push_back({lo, end, depth + 1});
      ++nodes_[id].n_children;
      lo = end;
    }
  }
  // Suffix links in breadth-first order (a link points to a shallower node).
  for (size_t u = 0; u < nodes_.size(); ++u) {
    for (int32_t v = nodes_[u].first_child; v < nodes_[u].first_child + nodes_[u].n_children; ++v) {
      int32_t f = 0;
      if (u != 0) {
        f = nodes_[u].fail;
        while (f != 0 && child(f, nodes_[v].label) < 0) f = nodes_[f].fail;
        const int32_t g = child(f, nodes_[v].label);
        f = g >= 0 && g != v ? g : 0;
      }
      nodes_[v].fail = f;
    }
    nodes_[u].output = nodes_[u].token >= 0 ? nodes_[u].token : u == 0 ? -1 : nodes_[nodes_[u].fail].output;
  }
}

int32_t AddedMatcher::child(int32_t node, unsigned char c) const {
  const Node& n = nodes_[node];
  auto first = nodes_.begin() + n.first_child, last = first + n.n_children;
  auto it = std::lower_bound(first, last, c, [](const Node& a, unsigned char b) { return a.label < b; });
  return it != last && it->label == c ? static_cast<int32_t>(it - nodes_.begin()) : -1;
}

void AddedMatcher::longest_at(std::string_view s, std::vector<int32_t>& longest) const {
  longest.assign(s.size(), -1);
  int32_t state = 0;
  // Each byte moves one edge down or follows suffix links up (each to a shallower
  // node), so the pass is amortized linear.
  for (size_t i = s.size(); i-- > 0;) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    for (;;) {
      const int32_t g = child(state, c);
      if (g >= 0) {
        state = g;
        break;
      }
      if (state == 0) break;
      state = nodes_[state].fail;
    }
    longest[i] = nodes_[state].output;
  }
}

namespace {
bool is_word_char(uint32_t c) {  // tokenizers checks single_word with the regex \w
  static const Regex word("\\w", false, "single_word");
  std::string s;
  utf8::append(s, c);
  std::vector<std::pair<size_t, size_t>> m;
  word.find_all(s, m);
  return !m.empty();
}
uint32_t last_char(std::string_view s, size_t end) {
  size_t k = end - 1;
  while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  size_t len = 0;
  return utf8::decode(s, k, &len);
}
}  // namespace

// tokenizers' AddedVocabulary::find_matches + split_with_indices.
void TokenizerImpl::split_added(const AddedMatcher& m, const Piece& in,
                                std::vector<std::pair<Piece, int32_t>>& out) const {
  const std::string& s = in.text;
  if (m.empty()) {
    out.push_back({in, -1});
    return;
  }
  std::vector<int32_t> longest;
  m.longest_at(s, longest);
  size_t start_offset = 0;
  size_t i = 0;
  // Terminates: i grows by one byte, or past a match of a non-empty token (the
  // matcher holds no empty content).  The strip loops below move by >= 1 byte a turn.
  while (i < s.size()) {
    if (longest[i] < 0) {
      ++i;
      continue;
    }
    const AddedToken* hit = m.tokens[static_cast<size_t>(longest[i])];
    size_t start = i, stop = i + hit->content.size();
    i = stop;  // the match iterator resumes after the raw match
    if (hit->single_word) {
      bool start_ok = start == 0 || !is_word_char(last_char(s, start));
      size_t len = 0;
      bool stop_ok = stop == s.size() || !is_word_char(utf8::decode(s, stop, &len));
      if (!start_ok || !stop_ok) continue;
    }
    if (hit->lstrip) {
      size_t b = start;
      while (b > 0) {
        size_t k = b - 1;
        while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        size_t len = 0;
        if (!utf8::is_whitespace(utf8::decode(s, k, &len))) break;
        b = k;
      }
      start = std::max(b, start_offset);
    }
    if (hit->rstrip) {
      while (stop < s.size()) {
        size_t len = 0;
        if (!utf8::is_whitespace(utf8::decode(s, stop, &len))) break;
        stop += len;
      }
    }
    if (start_offset < start)
      out.push_back({Piece{s.substr(start_offset, start - start_offset), in.at_start && start_offset == 0}, -1});
    out.push_back({Piece{s.substr(start, stop - start), false}, hit->id});
    start_offset = stop;
  }
  if (start_offset < s.size())
    out.push_back({Piece{s.substr(start_offset), in.at_start && start_offset == 0}, -1});
}

}  // namespace reach
