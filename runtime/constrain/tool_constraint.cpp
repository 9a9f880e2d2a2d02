// Tool calls constrained inside a free reply (see tool_constraint.hpp).
#include "runtime/constrain/tool_constraint.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace reach {

namespace {

using Cand = ToolCallReply::Cand;

bool is_blank(uint8_t b) { return b == ' ' || b == '\n' || b == '\r' || b == '\t'; }

void enter_segment(const ToolCallForms& f, Cand& c) {
  const auto& segs = f.calls[c.tool];
  c.pos = 0;
  if (c.seg < segs.size() && segs[c.seg].kind == ToolCallSegment::json) c.json = JsonState(segs[c.seg].grammar.get());
}

bool done(const ToolCallForms& f, const Cand& c) { return c.seg >= f.calls[c.tool].size(); }

// One byte through a candidate form: false when it refuses it (a finished call takes no more bytes).
bool feed(const ToolCallForms& f, Cand& c, uint8_t b) {
  const auto& segs = f.calls[c.tool];
  if (c.seg >= segs.size()) return false;
  const ToolCallSegment& s = segs[c.seg];
  switch (s.kind) {
    case ToolCallSegment::text:
      if (uint8_t(s.bytes[c.pos]) != b) return false;
      if (++c.pos == s.bytes.size()) {
        ++c.seg;
        enter_segment(f, c);
      }
      return true;
    case ToolCallSegment::special: return false;   // a special token is its own token, never bytes
    case ToolCallSegment::json:
      if (!c.json.feed(b)) return false;
      if (c.json.finished()) {
        ++c.seg;
        enter_segment(f, c);
      }
      return true;
  }
  return false;
}

// A candidate as the trie walk copies it.
struct WalkState {
  const ToolCallForms* f = nullptr;
  Cand c;
  bool feed(uint8_t b) { return reach::feed(*f, c, b); }
};

}  // namespace

ToolCallReply::ToolCallReply(std::shared_ptr<const ToolCallForms> forms, std::shared_ptr<const TokenTrie> trie)
    : f_(std::move(forms)), trie_(std::move(trie)) {
  const std::string& o = f_->opener;
  if (f_->calls.empty()) throw Error(ErrorCode::invalid_argument, "tool call constraint: no tools to call");
  // KMP over the opener, and per state the tokens that complete it.
  fail_.assign(o.size(), 0);
  for (size_t i = 1, k = 0; i < o.size(); ++i) {
    while (k > 0 && o[i] != o[k]) k = fail_[k - 1];
    if (o[i] == o[k]) ++k;
    fail_[i] = uint32_t(k);
  }
  completes_.resize(o.size());
  for (size_t id = 0; !o.empty() && id < trie_->vocab(); ++id) {
    const std::string& b = trie_->bytes(int32_t(id));
    if (b.find(o.back()) == std::string::npos) continue;   // no token completes it without its last byte
    for (size_t k0 = 0; k0 < o.size(); ++k0) {
      size_t k = k0;
      for (size_t p = 0; p < b.size(); ++p) {
        if (f_->at_start) {   // blanks before it, then the opener's bytes in a row
          if (k == 0 && is_blank(uint8_t(b[p]))) continue;
          if (o[k] != b[p]) break;
          ++k;
        } else {
          while (k > 0 && o[k] != b[p]) k = fail_[k - 1];
          if (o[k] == b[p]) ++k;
        }
        if (k == o.size()) {
          completes_[k0].push_back({int32_t(id), uint32_t(p + 1)});
          break;
        }
      }
    }
  }
  restart();
}

void ToolCallReply::restart() {
  k_ = 0;
  at_start_ = true;
  in_header_ = true;
  cands_.clear();
  after_call_ = ended_ = false;
  calls_ = 0;
  if (f_->in_call) open_call();
}

void ToolCallReply::open_call() {
  cands_.clear();
  in_header_ = false;   // the call's form closes its header (harmony's <|message|>): what follows is text
  for (uint32_t t = 0; t < f_->calls.size(); ++t) {
    Cand c;
    c.tool = t;
    enter_segment(*f_, c);
    cands_.push_back(c);
  }
}

bool ToolCallReply::feed_free(uint8_t b) {
  const std::string& o = f_->opener;
  if (o.empty()) return false;
  if (!f_->header_open_ids.empty() && !in_header_) return false;   // message text: never a call's opener
  if (f_->at_start) {
    if (!at_start_ || (k_ == 0 && is_blank(b))) return false;
    if (uint8_t(o[k_]) != b) {
      at_start_ = false;
      return false;
    }
    if (++k_ < o.size()) return false;
    at_start_ = false;
    k_ = 0;
    open_call();
    return true;
  }
  while (k_ > 0 && uint8_t(o[k_]) != b) k_ = fail_[k_ - 1];
  if (uint8_t(o[k_]) == b) ++k_;
  if (k_ < o.size()) return false;
  k_ = 0;
  open_call();
  return true;
}

bool ToolCallReply::feed_call(uint8_t b) {
  std::erase_if(cands_, [&](Cand& c) { return !feed(*f_, c, b); });
  if (cands_.empty()) return false;
  if (std::any_of(cands_.begin(), cands_.end(), [&](const Cand& c) { return done(*f_, c); })) {
    cands_.clear();
    ++calls_;
    after_call_ = f_->end_after_call;
    k_ = 0;
    at_start_ = false;
  }
  return true;
}

void ToolCallReply::allowed(std::span<const int32_t> stop_ids, size_t count, std::vector<uint8_t>& allowed) const {
  const TokenTrie& t = *trie_;
  const size_t vocab = std::min(count, t.vocab());
  allowed.assign(count, 0);
  if (ended_) return;
  auto allow_stops = [&] {
    for (int32_t id : stop_ids)
      if (id >= 0 && size_t(id) < count) allowed[size_t(id)] = 1;
  };
  if (after_call_) return allow_stops();
  if (cands_.empty()) {
    // Free text: anything, but a token that opens a call must go on as one of the forms.
    std::fill(allowed.begin(), allowed.begin() + ptrdiff_t(vocab), 1);
    allow_stops();
    auto check = [&](const std::vector<std::pair<int32_t, uint32_t>>& list) {
      std::vector<Cand> cs;
      for (const auto& [id, off] : list) {
        if (size_t(id) >= vocab) continue;
        cs.clear();
        for (uint32_t tool = 0; tool < f_->calls.size(); ++tool) {
          cs.emplace_back().tool = tool;   // (clang refuses {tool, 0, 0, {}}: JsonState's initializer)
          enter_segment(*f_, cs.back());
        }
        const std::string& b = t.bytes(id);
        for (size_t p = off; !cs.empty() && p < b.size(); ++p)
          std::erase_if(cs, [&](Cand& c) { return !feed(*f_, c, uint8_t(b[p])); });
        if (cs.empty()) allowed[size_t(id)] = 0;
      }
    };
    const bool may_open = (!f_->at_start || at_start_) && (f_->header_open_ids.empty() || in_header_);
    if (!completes_.empty() && may_open) check(completes_[k_]);
    return;
  }
  // In a call: the union of what each candidate form takes next.
  scratch_.assign(t.vocab(), 0);
  std::vector<WalkState> walk;
  for (const Cand& c : cands_) {
    const ToolCallSegment& s = f_->calls[c.tool][c.seg];
    if (s.kind == ToolCallSegment::special) {
      if (s.id >= 0 && size_t(s.id) < count) allowed[size_t(s.id)] = 1;
      continue;
    }
    const WalkState start{f_.get(), c};
    if (s.kind == ToolCallSegment::json && c.json.in_plain_string()) {
      // Inside a string most tokens keep it so: taken wholesale; the walk covers the others.
      for (size_t i = 0; i < t.vocab(); ++i) scratch_[i] |= t.plain()[i];
      walk_trie(t.not_plain(), start, walk, scratch_.data());
    } else {
      walk_trie(t.all(), start, walk, scratch_.data());
    }
  }
  for (size_t i = 0; i < vocab; ++i) allowed[i] |= scratch_[i];
}

void ToolCallReply::advance(int32_t id, bool stop) {
  auto refuse = [&] {
    throw Error(ErrorCode::invalid_argument,
                "token " + std::to_string(id) + " does not continue the tool call (sample with the mask)");
  };
  if (ended_) refuse();
  if (stop) {
    if (!cands_.empty()) throw Error(ErrorCode::invalid_argument, "an end token came inside a tool call");
    ended_ = true;
    return;
  }
  const TokenTrie& t = *trie_;
  const bool known = id >= 0 && size_t(id) < t.vocab();
  const std::string empty;
  const std::string& b = known ? t.bytes(id) : empty;
  if (b.empty()) {   // a special token (or one without bytes)
    if (after_call_) refuse();
    if (!cands_.empty()) {
      std::erase_if(cands_, [&](Cand& c) {
        const ToolCallSegment& s = f_->calls[c.tool][c.seg];
        if (s.kind != ToolCallSegment::special || s.id != id) return true;
        ++c.seg;
        enter_segment(*f_, c);
        return false;
      });
      if (cands_.empty()) refuse();
      if (std::any_of(cands_.begin(), cands_.end(), [&](const Cand& c) { return done(*f_, c); })) {
        cands_.clear();
        ++calls_;
        after_call_ = f_->end_after_call;
      }
      return;
    }
    const bool may_open = !f_->at_start || (at_start_ && k_ == 0);
    k_ = 0;
    at_start_ = false;
    auto has = [id](const std::vector<int32_t>& ids) { return std::find(ids.begin(), ids.end(), id) != ids.end(); };
    if (has(f_->header_open_ids)) in_header_ = true;
    if (has(f_->header_close_ids)) in_header_ = false;
    if (may_open && std::find(f_->opener_ids.begin(), f_->opener_ids.end(), id) != f_->opener_ids.end()) open_call();
    return;
  }
  for (char ch : b) {
    const uint8_t byte = uint8_t(ch);
    if (after_call_) refuse();
    if (!cands_.empty()) {
      if (!feed_call(byte)) refuse();
    } else {
      feed_free(byte);
    }
  }
}

}  // namespace reach
