// Encoding: normalizers, pre-tokenizers, BPE (added tokens: tokenizer_added.cpp).
// Each step follows the `tokenizers` (Rust) implementation closely; comments name
// the deviations.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <memory>
#include <queue>

#include "base/error.hpp"
#include "runtime/text/tokenizer_impl.hpp"
#include "runtime/text/utf8.hpp"

namespace reach {

// ---------------------------------------------------------------- Regex

namespace {
// tokenizers runs its regexes with Oniguruma, whose \s is exactly Unicode
// White_Space; PCRE2's \s with UCP also matches U+180E (it is in \h).  So \s
// and \S are spelled out as the White_Space list.
constexpr std::string_view white_space = "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

std::string onig_compatible(std::string_view p) {
  std::string out;
  bool in_class = false;
  size_t class_start = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char n = p[++i];
      if (n == 's') {
        out += in_class ? std::string(white_space) : "[" + std::string(white_space) + "]";
      } else if (n == 'S' && !in_class) {
        out += "[^" + std::string(white_space) + "]";
      } else {
        out += c;
        out += n;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      class_start = i + 1;
      if (class_start < p.size() && p[class_start] == '^') ++class_start;
    } else if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // [:alpha:]
      size_t end = p.find(":]", i + 2);
      if (end != std::string_view::npos) {
        out.append(p.substr(i, end + 2 - i));
        i = end + 1;
        continue;
      }
    } else if (in_class && c == ']' && i != class_start) {
      in_class = false;
    }
    out += c;
  }
  return out;
}
}  // namespace

Regex::Regex(std::string_view pattern_in, bool literal, const std::string& where)
    : where_(where), source_(pattern_in), literal_(literal) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  uint32_t flags = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  std::string pattern = literal ? std::string(pattern_in) : onig_compatible(pattern_in);
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), flags, &err, &offset,
                        nullptr);
  if (!code_) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    throw Error(ErrorCode::format, where + ": cannot compile regex \"" + std::string(pattern_in) + "\" at offset " +
                                       std::to_string(offset) + ": " + reinterpret_cast<char*>(buf));
  }
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // best effort: the interpreter is the fallback
}

Regex::~Regex() {
  if (code_) pcre2_code_free(code_);
}

Regex& Regex::operator=(Regex&& o) noexcept {
  if (this != &o) {
    if (code_) pcre2_code_free(code_);
    code_ = std::exchange(o.code_, nullptr);
    where_ = std::move(o.where_);
    source_ = std::move(o.source_);
    literal_ = o.literal_;
  }
  return *this;
}

void Regex::find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const {
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> data(
      pcre2_match_data_create_from_pattern(code_, nullptr), pcre2_match_data_free);
  pcre2_match_data* md = data.get();
  if (!md) throw Error(ErrorCode::out_of_memory, "tokenizer: pcre2_match_data_create failed");
  auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0;
  // Terminates: every turn moves pos forward (past a non-empty match, or one
  // character past an empty one) or leaves the loop.
  while (pos <= s.size()) {
    // The subject was made valid UTF-8 by encode(), so skip PCRE2's check.
    int rc = pcre2_match(code_, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0) {
      if (rc == PCRE2_ERROR_NOMATCH) break;
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(rc, buf, sizeof buf);
      throw Error(ErrorCode::format, where_ + ": the regex gives up on this text (" + reinterpret_cast<char*>(buf) +
                                         "); it backtracks too much to be a real tokenizer's pattern");
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    out.emplace_back(b, e);
    if (e > b) {
      pos = e;
    } else {  // empty match: step over one character
      if (b >= s.size()) break;
      pos = b + utf8::char_length(static_cast<unsigned char>(s[b]));
    }
  }
}

bool Regex::replace_all(std::string_view s, std::string_view with, size_t max_size, std::string& out) const {
  std::vector<std::pair<size_t, size_t>> m;
  find_all(s, m);
  size_t matched = 0;
  for (auto [b, e] : m) matched += e - b;
  // The size is known before building.  The first test keeps the product below from overflowing.
  if (!m.empty() && with.size() > (max_size + matched) / m.size()) return false;
  if (s.size() - matched + m.size() * with.size() > max_size) return false;
  out.clear();
  out.reserve(s.size() - matched + m.size() * with.size());
  size_t prev = 0;
  for (auto [b, e] : m) {
    out.append(s.substr(prev, b - prev));
    out.append(with);
    prev = e;
  }
  out.append(s.substr(prev));
  return true;
}

void split_by_matches(std::string_view s, const std::vector<std::pair<size_t, size_t>>& matches,
                      SplitBehavior behavior, bool invert, std::vector<std::pair<size_t, size_t>>& out) {
  struct P {
    size_t b, e;
    bool match;
  };
  std::vector<P> all;
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (prev != b) all.push_back({prev, b, false});
    all.push_back({b, e, true});
    prev = e;
  }
  if (prev != s.size()) all.push_back({prev, s.size(), false});
  if (invert)
    for (auto& p : all) p.match = !p.match;

  std::vector<P> res;
  switch (behavior) {
    case SplitBehavior::removed:
      for (auto& p : all)
        if (!p.match) res.push_back(p);
      break;
    case SplitBehavior::isolated:
      res.swap(all);
      break;
    case SplitBehavior::merged_with_previous: {
      bool prev_match = false;
      for (auto& p : all) {
        if (p.match && !prev_match && !res.empty())
          res.back().e = p.e;
        else
          res.push_back(p);
        prev_match = p.match;
      }
      break;
    }
    case SplitBehavior::merged_with_next: {
      bool prev_match = false;
      for (size_t i = all.size(); i-- > 0;) {
        auto& p = all[i];
        if (p.match && !prev_match && !res.empty())
          res.back().b = p.b;
        else
          res.push_back(p);
        prev_match = p.match;
      }
      std::reverse(res.begin(), res.end());
      break;
    }
    case SplitBehavior::contiguous: {
      bool prev_match = false;
      for (auto& p : all) {
        if (p.match == prev_match && !res.empty())
          res.back().e = p.e;
        else
          res.push_back(p);
        prev_match = p.match;
      }
      break;
    }
  }
  for (auto& p : res)
    if (p.e > p.b) out.emplace_back(p.b, p.e);
}

// ---------------------------------------------------------------- byte level

namespace {
struct ByteTable {
  std::array<std::string, 256> to_unicode;
  std::unordered_map<uint32_t, int> from_unicode;
  ByteTable() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      uint32_t cp = keep ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
      utf8::append(to_unicode[b], cp);
      from_unicode[cp] = b;
    }
  }
};
const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}
}  // namespace

const std::array<std::string, 256>& byte_to_unicode() { return byte_table().to_unicode; }

int byte_from_unicode(uint32_t cp) {
  auto& m = byte_table().from_unicode;
  auto it = m.find(cp);
  return it == m.end() ? -1 : it->second;
}

void throw_growth(const std::string& origin, const std::string& where, size_t input) {
  throw Error(ErrorCode::format, origin + ": " + where + " grows a text of " + std::to_string(input) +
                                     " bytes beyond " + std::to_string(max_grown_size(input)) + " bytes (" +
                                     std::to_string(kMaxGrowth) +
                                     "x + 64 KiB; real tokenizers grow it ~3x): the file is damaged");
}

// ---------------------------------------------------------------- normalizer

void TokenizerImpl::normalize(std::string& s) const {
  const size_t input = s.size(), limit = max_grown_size(input);
  std::string replaced;
  for (const auto& step : normalizer) {
    switch (step.kind) {
      case NormalizerStep::prepend:
        if (s.empty()) break;
        if (s.size() + step.text.size() > limit) throw_growth(origin, step.where, input);
        s.insert(0, step.text);
        break;
      case NormalizerStep::replace:
        if (!step.pattern->replace_all(s, step.text, limit, replaced)) throw_growth(origin, step.where, input);
        s.swap(replaced);
        break;
      case NormalizerStep::strip: {
        // Both loops move b up or e down by at least one byte per turn, within [0, size].
        size_t b = 0, e = s.size();
        if (step.left) {
          while (b < e) {
            size_t len = 0;
            if (!utf8::is_whitespace(utf8::decode(s, b, &len))) break;
            b += len;
          }
        }
        if (step.right) {
          while (e > b) {
            size_t k = e - 1;
            while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
            size_t len = 0;
            if (!utf8::is_whitespace(utf8::decode(s, k, &len))) break;
            e = k;
          }
        }
        s = s.substr(b, e - b);
        break;
      }
      case NormalizerStep::passthrough:
        break;
    }
  }
}

// ---------------------------------------------------------------- pre-tokenizers

void TokenizerImpl::pre_tokenize(std::vector<Piece>& pieces) const {
  std::vector<Piece> next;
  std::vector<std::pair<size_t, size_t>> matches, spans;
  const auto& table = byte_to_unicode();
  size_t input = 0;
  for (const auto& p : pieces) input += p.text.size();
  const size_t limit = max_grown_size(input);
  for (const auto& step : pre_tokenizer) {
    next.clear();
    for (auto& piece : pieces) {
      std::string& t = piece.text;
      auto emit_split = [&](const Regex& re, SplitBehavior behavior, bool invert) {
        matches.clear();
        spans.clear();
        re.find_all(t, matches);
        split_by_matches(t, matches, behavior, invert, spans);
        for (auto [b, e] : spans) next.push_back({t.substr(b, e - b), piece.at_start && b == 0});
      };
      switch (step.kind) {
        case PreTokenizerStep::split:
          emit_split(*step.pattern, step.behavior, step.invert);
          break;
        case PreTokenizerStep::byte_level: {
          if (step.add_prefix_space && (t.empty() || t[0] != ' ')) {
            std::string spaced;  // (not t.insert(0, " "): GCC 12 warns falsely, PR105329)
            spaced.reserve(t.size() + 1);
            spaced += ' ';
            spaced += t;
            t.swap(spaced);
          }
          size_t first = next.size();
          if (step.pattern)
            emit_split(*step.pattern, SplitBehavior::isolated, false);
          else if (!t.empty())
            next.push_back({t, piece.at_start});
          for (size_t i = first; i < next.size(); ++i) {
            std::string mapped;
            mapped.reserve(next[i].text.size() * 2);
            for (unsigned char c : next[i].text) mapped += table[c];
            next[i].text = std::move(mapped);
          }
          break;
        }
        case PreTokenizerStep::metaspace: {
          std::string r;
          r.reserve(t.size() + 3);
          for (char c : t) {
            if (c == ' ')
              r += step.replacement;
            else
              r += c;
          }
          bool starts = r.compare(0, step.replacement.size(), step.replacement) == 0;
          if (!starts && (step.prepend == PreTokenizerStep::always ||
                          (step.prepend == PreTokenizerStep::first && piece.at_start)))
            r.insert(0, step.replacement);
          if (!step.split_on_replacement) {
            if (!r.empty()) next.push_back({std::move(r), piece.at_start});
            break;
          }
          // split on the replacement, MergedWithNext.  Terminates: the
          // replacement is one character (checked at load), so p advances.
          matches.clear();
          spans.clear();
          for (size_t p = r.find(step.replacement); p != std::string::npos;
               p = r.find(step.replacement, p + step.replacement.size()))
            matches.emplace_back(p, p + step.replacement.size());
          split_by_matches(r, matches, SplitBehavior::merged_with_next, false, spans);
          for (auto [b, e] : spans) next.push_back({r.substr(b, e - b), piece.at_start && b == 0});
          break;
        }
      }
    }
    // One step grows a piece at most 4x + 4 bytes (Metaspace's "\u2581" for " "),
    // but steps can be chained without end.
    size_t total = 0;
    for (const auto& p : next) total += p.text.size();
    if (total > limit) throw_growth(origin, step.where, input);
    pieces.swap(next);
  }
}

// ---------------------------------------------------------------- BPE

void BpeModel::tokenize(std::string_view w, std::vector<int32_t>& out) const {
  if (w.empty()) return;
  if (!scores.empty()) {
    tokenize_spm(w, out);
    return;
  }
  if (ignore_merges) {
    auto it = vocab.find(w);
    if (it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Symbols are linked by int32 indices.
  if (w.size() > static_cast<size_t>(INT32_MAX))
    throw Error(ErrorCode::invalid_argument, "tokenizer: a word of " + std::to_string(w.size()) +
                                                 " bytes (more than 2^31) cannot be encoded");
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool live;
  };
  std::vector<Symbol> sym;
  sym.reserve(w.size());
  auto add = [&](int32_t id) {
    int32_t n = static_cast<int32_t>(sym.size());
    sym.push_back({id, n - 1, n + 1, true});
  };
  std::optional<int32_t> pending_unk;
  for (size_t i = 0; i < w.size();) {  // i grows by len >= 1 each turn
    size_t len = std::min(utf8::char_length(static_cast<unsigned char>(w[i])), w.size() - i);
    std::string_view c = w.substr(i, len);
    i += len;
    auto it = vocab.find(c);
    if (it != vocab.end()) {
      if (pending_unk) add(*std::exchange(pending_unk, std::nullopt));
      add(it->second);
      continue;
    }
    if (byte_fallback) {
      bool all = true;
      for (unsigned char b : c) all = all && byte_tokens[b] >= 0;
      if (all) {  // (tokenizers leaves a pending <unk> after these; so do we)
        for (unsigned char b : c) add(byte_tokens[b]);
        continue;
      }
    }
    if (unk) {
      if (pending_unk && !fuse_unk) add(*pending_unk);
      pending_unk = *unk;
    }
    // no unk token: the character is dropped, as tokenizers does
  }
  if (pending_unk) add(*pending_unk);
  if (sym.empty()) return;
  sym.back().next = -1;

  struct Merge {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator<(const Merge& o) const {  // priority_queue top = lowest rank, then leftmost
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<Merge> storage;
  storage.reserve(sym.size());
  std::priority_queue<Merge> queue(std::less<Merge>(), std::move(storage));
  auto lookup = [&](int32_t a, int32_t b) -> const std::pair<int32_t, int32_t>* {
    auto it = merges.find(key(a, b));
    return it == merges.end() ? nullptr : &it->second;
  };
  for (size_t k = 0; k + 1 < sym.size(); ++k)
    if (auto m = lookup(sym[k].id, sym[k + 1].id)) queue.push({m->first, static_cast<int32_t>(k), m->second});
  // Terminates: each merge kills one live symbol and pushes at most two entries,
  // so at most n - 1 merges and 3n pops for n symbols.
  while (!queue.empty()) {
    Merge top = queue.top();
    queue.pop();
    Symbol& cur = sym[top.pos];
    if (!cur.live || cur.next < 0) continue;
    Symbol& right = sym[cur.next];
    auto m = lookup(cur.id, right.id);
    if (!m || m->second != top.new_id) continue;  // stale entry
    cur.id = top.new_id;
    right.live = false;
    cur.next = right.next;
    if (cur.next >= 0) sym[cur.next].prev = top.pos;
    if (cur.prev >= 0)
      if (auto pm = lookup(sym[cur.prev].id, cur.id)) queue.push({pm->first, cur.prev, pm->second});
    if (cur.next >= 0)
      if (auto nm = lookup(cur.id, sym[cur.next].id)) queue.push({nm->first, top.pos, nm->second});
  }
  for (const auto& s : sym)
    if (s.live) out.push_back(s.id);
}

void TokenizerImpl::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  constexpr size_t max_cached_length = 256, max_cache_entries = 1 << 16;
  if (word.size() > max_cached_length) {
    bpe.tokenize(word, out);
    return;
  }
  {
    std::lock_guard lock(cache_mutex);
    auto it = cache.find(word);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t first = out.size();
  bpe.tokenize(word, out);
  std::lock_guard lock(cache_mutex);
  if (cache.size() >= max_cache_entries) cache.clear();
  cache.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
}

std::vector<int32_t> TokenizerImpl::encode(std::string_view input, bool add_special) const {
  std::string text = utf8::is_valid(input) ? std::string(input) : utf8::lossy(input);
  std::vector<int32_t> ids;
  if (add_special) ids = prefix;

  // 1. added tokens matched on the raw text; 2. normalize the rest, then match
  // the normalized added tokens; 3. pre-tokenize; 4. BPE.
  std::vector<std::pair<Piece, int32_t>> raw, segs;
  split_added(raw_added, Piece{std::move(text), true}, raw);
  for (auto& [piece, id] : raw) {
    if (id >= 0) {
      segs.push_back({std::move(piece), id});
      continue;
    }
    normalize(piece.text);
    split_added(normalized_added, piece, segs);
  }
  std::vector<Piece> pieces;
  for (auto& [piece, id] : segs) {
    if (id >= 0) {
      ids.push_back(id);
      continue;
    }
    if (piece.text.empty()) continue;
    pieces.clear();
    pieces.push_back(std::move(piece));
    pre_tokenize(pieces);
    for (const auto& p : pieces) encode_word(p.text, ids);
  }
  if (add_special) ids.insert(ids.end(), suffix.begin(), suffix.end());
  return ids;
}

}  // namespace reach
