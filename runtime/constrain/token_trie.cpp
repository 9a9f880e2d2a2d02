#include "runtime/constrain/token_trie.hpp"

#include <algorithm>
#include <mutex>
#include <string_view>

#include "runtime/constrain/json_state.hpp"

namespace reach {

namespace {

ByteTrie build(const std::vector<std::string>& bytes, const std::vector<int32_t>& members) {
  std::vector<int32_t> order = members;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes[size_t(a)] < bytes[size_t(b)] || (bytes[size_t(a)] == bytes[size_t(b)] && a < b);
  });
  ByteTrie t;
  auto add_node = [&](uint8_t label, size_t depth) {
    t.end.push_back(0);
    t.label.push_back(label);
    t.depth.push_back(uint16_t(depth));
    t.max_depth = std::max(t.max_depth, depth);
    return uint32_t(t.end.size() - 1);
  };
  std::vector<uint32_t> path = {add_node(0, 0)};   // path[d]: the node at depth d of the last string
  std::vector<uint32_t> node_of;                   // per entry of order: its node
  std::string_view prev;
  for (int32_t id : order) {
    const std::string_view s = bytes[size_t(id)];
    size_t common = 0;
    while (common < s.size() && common < prev.size() && s[common] == prev[common]) ++common;
    while (path.size() > common + 1) {
      t.end[path.back()] = uint32_t(t.end.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) path.push_back(add_node(uint8_t(s[d]), d + 1));
    node_of.push_back(path.back());
    prev = s;
  }
  for (uint32_t n : path) t.end[n] = uint32_t(t.end.size());
  // Tokens come in node order (sorted strings visit nodes depth-first): a prefix sum gives the ranges.
  t.first_id.assign(t.end.size() + 1, 0);
  for (uint32_t n : node_of) ++t.first_id[n + 1];
  for (size_t i = 1; i < t.first_id.size(); ++i) t.first_id[i] += t.first_id[i - 1];
  t.ids = order;
  return t;
}

}  // namespace

TokenTrie::TokenTrie(std::vector<std::string> bytes) : bytes_(std::move(bytes)), plain_(bytes_.size(), 0) {
  // A string state decides plainness: the same rules as the walk, by construction.
  static const std::shared_ptr<const JsonGrammar> text = JsonGrammar::from_schema(nlohmann::ordered_json{{"type", "string"}});
  JsonState open(text.get());
  open.feed('"');
  std::vector<int32_t> all, not_plain;
  for (size_t id = 0; id < bytes_.size(); ++id) {
    const std::string& b = bytes_[id];
    if (b.empty()) continue;
    all.push_back(int32_t(id));
    JsonState s = open;
    bool plain = true;
    for (char c : b) plain = plain && uint8_t(c) != '"' && s.feed(uint8_t(c));
    plain = plain && s.in_plain_string();
    plain_[id] = plain;
    if (!plain) not_plain.push_back(int32_t(id));
  }
  all_ = build(bytes_, all);
  not_plain_ = build(bytes_, not_plain);
}

std::shared_ptr<const TokenTrie> TokenTrie::for_tokenizer(const Tokenizer& tokenizer) {
  static std::mutex mu;
  static std::vector<std::pair<std::weak_ptr<const void>, std::shared_ptr<const TokenTrie>>> cache;
  const std::weak_ptr<const void> key = tokenizer.lifetime();
  std::lock_guard lock(mu);
  std::erase_if(cache, [](const auto& e) { return e.first.expired(); });
  for (const auto& [owner, trie] : cache)
    if (!owner.owner_before(key) && !key.owner_before(owner)) return trie;
  auto trie = std::make_shared<const TokenTrie>(tokenizer.token_bytes());
  cache.emplace_back(key, trie);
  return trie;
}

}  // namespace reach
