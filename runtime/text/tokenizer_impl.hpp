#pragma once
// Private to runtime/tokenizer*.cpp: the parsed tokenizer.json.
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/text/tokenizer.hpp"

typedef struct pcre2_real_code_8 pcre2_code_8;

namespace reach {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// A compiled PCRE2 pattern (UTF + UCP), move-only.
class Regex {
 public:
  Regex() = default;
  // `where` names the JSON key for the error message.  Throws Error(format).
  Regex(std::string_view pattern, bool literal, const std::string& where);
  ~Regex();
  Regex(Regex&& o) noexcept
      : code_(std::exchange(o.code_, nullptr)), where_(std::move(o.where_)), source_(std::move(o.source_)),
        literal_(o.literal_) {}
  Regex& operator=(Regex&& o) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Appends the [begin, end) of every non-overlapping match, left to right.
  // Throws Error(format) naming the key when PCRE2 gives up (its match, depth
  // and heap limits bound the cost of a pattern that backtracks without end).
  void find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const;
  // Replaces every match by `with` into `out`; false (out unspecified) when the
  // result would be longer than max_size: an empty pattern matches between all
  // characters, so a long `with` could multiply the text.
  bool replace_all(std::string_view s, std::string_view with, size_t max_size, std::string& out) const;
  // The pattern as written and whether it is a literal (GGUF export recognizes known pipelines by them).
  const std::string& source() const { return source_; }
  bool literal() const { return literal_; }

 private:
  pcre2_code_8* code_ = nullptr;
  std::string where_;
  std::string source_;
  bool literal_ = false;
};

enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

// A piece of text between pipeline stages; at_start: it begins at offset 0 of
// the input (Metaspace's prepend_scheme "first" needs that).
struct Piece {
  std::string text;
  bool at_start = false;
};

// The JSON key of a step, for messages ("normalizer.normalizers[1]").
struct NormalizerStep {
  enum Kind { prepend, replace, strip, passthrough } kind = passthrough;
  std::string where;
  std::string text;     // prepend: what; replace: the replacement
  std::shared_ptr<Regex> pattern;  // replace
  bool left = false, right = false;  // strip
};

struct PreTokenizerStep {
  enum Kind { split, byte_level, metaspace } kind = split;
  std::string where;
  std::shared_ptr<Regex> pattern;  // split; byte_level with use_regex
  SplitBehavior behavior = SplitBehavior::isolated;
  bool invert = false;
  bool add_prefix_space = false;  // byte_level
  std::string replacement;        // metaspace: exactly one character (checked at load)
  enum Prepend { always, first, never } prepend = always;
  bool split_on_replacement = true;  // metaspace "split"
};

struct DecoderStep {
  enum Kind { byte_level, replace, byte_fallback, fuse, strip, metaspace } kind = fuse;
  std::string where;
  std::shared_ptr<Regex> pattern;  // replace
  std::string text;                // replace: replacement; strip / metaspace: one character
  uint64_t start = 0, stop = 0;    // strip
  bool prepend = true;             // metaspace: prepend_scheme != never
};

struct AddedToken {
  int32_t id = 0;
  std::string content;  // as matched (normalized when `normalized`)
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

// Leftmost-longest matching of added tokens (like aho-corasick's LeftmostLongest),
// linear in the text: an Aho-Corasick automaton over the reversed contents
// (runtime/text/tokenizer_added.cpp).  Contents total at most kMaxAddedBytes.
constexpr size_t kMaxAddedBytes = size_t{16} << 20;
class AddedMatcher {
 public:
  std::vector<const AddedToken*> tokens;
  void build();  // after `tokens` is filled; throws Error(format) past kMaxAddedBytes
  bool empty() const { return tokens.empty(); }
  // longest[i]: the index in `tokens` of the longest content that s[i:] starts with, or -1.
  void longest_at(std::string_view s, std::vector<int32_t>& longest) const;

 private:
  struct Node {
    int32_t first_child = 0;  // children are nodes_[first_child, first_child + n_children), by label
    int32_t fail = 0;         // the longest proper suffix of this path that is a path too
    int32_t token = -1;       // a content whose reverse ends here
    int32_t output = -1;      // the longest such content here or along `fail`
    uint16_t n_children = 0;
    unsigned char label = 0;  // the byte of the edge into this node
  };
  int32_t child(int32_t node, unsigned char c) const;  // -1 when none
  std::vector<Node> nodes_;
};

struct BpeModel {
  TokenMap vocab;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;  // (a, b) -> (rank, new id)
  std::optional<int32_t> unk;
  bool byte_fallback = false, fuse_unk = false, ignore_merges = false;
  std::array<int32_t, 256> byte_tokens{};  // id of <0xNN>, -1 if absent
  // SentencePiece scores per id (GGUF "llama" vocabularies).  When set, tokenize()
  // merges by score as llama.cpp's SPM tokenizer does, and `merges` is unused.
  std::vector<float> scores;
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;
  void tokenize_spm(std::string_view word, std::vector<int32_t>& out) const;  // runtime/text/tokenizer_spm.cpp
};

struct TokenizerImpl {
  std::string origin;  // the file, for messages
  BpeModel bpe;
  std::vector<AddedToken> added;
  AddedMatcher raw_added, normalized_added;
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> pre_tokenizer;
  bool has_decoder = false;
  std::vector<DecoderStep> decoder;
  std::vector<int32_t> prefix, suffix;  // post-processor
  std::vector<std::string> id_to_token;  // model vocab overlaid with added tokens
  std::vector<uint8_t> special;          // per id
  TokenMap token_to_id;                  // model vocab + added tokens
  std::optional<int32_t> bos, eos;
  std::optional<int32_t> pad;       // from GGUF metadata; kept for export
  std::optional<int32_t> unk_meta;  // GGUF's unknown_token_id where the model does not use it (byte-level BPE)
  std::string chat_template;   // GGUF tokenizer.chat_template or tokenizer_config.json; empty when unknown

  void normalize(std::string& s) const;
  void pre_tokenize(std::vector<Piece>& pieces) const;
  void split_added(const AddedMatcher& m, const Piece& in, std::vector<std::pair<Piece, int32_t>>& out) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;  // cached BPE
  std::vector<int32_t> encode(std::string_view text, bool add_special) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special) const;

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache;
};

// The GPT-2 regex that ByteLevel uses when use_regex is true.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Fills the id tables and added-token matchers once model, added tokens,
// normalizer and post-processor are set (runtime/text/tokenizer.cpp); guesses bos/eos.
void finish_tokenizer(TokenizerImpl& t);

// A tokenizer.json may chain steps that each grow the text (64 Replace "a" ->
// "aa" would double it 64 times).  Real pipelines grow it at most ~3x per stage
// (" " -> "\u2581"), so each stage (normalizers, pre-tokenizers, decoders) keeps
// its output within this bound of its input, else Error(format) naming the step.
constexpr size_t kMaxGrowth = 32, kGrowthSlack = 65536;
inline size_t max_grown_size(size_t input) { return kMaxGrowth * input + kGrowthSlack; }
[[noreturn]] void throw_growth(const std::string& origin, const std::string& where, size_t input);

// The GPT-2 byte <-> unicode table of ByteLevel.
const std::array<std::string, 256>& byte_to_unicode();
int byte_from_unicode(uint32_t code_point);  // -1 when not in the table

// The decoder steps on one token, shared by decode (tokenizer_decode.cpp) and token_bytes:
// ByteLevel's characters back to bytes (a token with a character outside the table stays as is);
// "<0xNN>" -> NN, else -1; Strip's up to `start` leading and `stop` trailing copies of `c` removed;
// every `what` replaced by `with`.
std::string byte_level_token(const std::string& t);
int parse_byte_token(const std::string& t);
std::string strip_token(const std::string& t, const std::string& c, uint64_t start, uint64_t stop);
void replace_literal(std::string& t, const std::string& what, const std::string& with);

// Splits [0, s.size()) into pieces by the matches (tokenizers' Pattern +
// SplitDelimiterBehavior), empty pieces dropped.
void split_by_matches(std::string_view s, const std::vector<std::pair<size_t, size_t>>& matches,
                      SplitBehavior behavior, bool invert, std::vector<std::pair<size_t, size_t>>& out);

}  // namespace reach
