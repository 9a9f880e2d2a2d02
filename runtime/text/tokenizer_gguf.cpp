// Tokenizers from and to GGUF metadata (tokenizer.ggml.*).  Both directions
// go through the state tokenizer.json builds (TokenizerImpl), so encode,
// decode and streaming are the same code whatever the source:
//  - "gpt2": byte-level BPE with ranked merges and a named pre-tokenizer;
//  - "llama": SentencePiece BPE merged by score (BpeModel::tokenize_spm),
//    spaces as U+2581 with a leading one, byte fallback through <0xNN>.
// Token types (ggml's numbering): control and unknown tokens become special
// added tokens, user-defined ones non-special added tokens, as
// tokenizer.json lists them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>

#include "base/error.hpp"
#include "runtime/formats/gguf.hpp"
#include "runtime/formats/gguf_meta_sink.hpp"
#include "runtime/text/tokenizer.hpp"
#include "runtime/text/tokenizer_impl.hpp"

namespace reach {

namespace {

constexpr const char* kModel = "tokenizer.ggml.model";
constexpr const char* kPre = "tokenizer.ggml.pre";
constexpr const char* kTokens = "tokenizer.ggml.tokens";
constexpr const char* kScores = "tokenizer.ggml.scores";
constexpr const char* kTokenType = "tokenizer.ggml.token_type";
constexpr const char* kMerges = "tokenizer.ggml.merges";
constexpr const char* kBos = "tokenizer.ggml.bos_token_id";
constexpr const char* kEos = "tokenizer.ggml.eos_token_id";
constexpr const char* kUnk = "tokenizer.ggml.unknown_token_id";
constexpr const char* kPad = "tokenizer.ggml.padding_token_id";
constexpr const char* kAddBos = "tokenizer.ggml.add_bos_token";
constexpr const char* kAddEos = "tokenizer.ggml.add_eos_token";
constexpr const char* kAddSpacePrefix = "tokenizer.ggml.add_space_prefix";
constexpr const char* kRemoveExtraSpaces = "tokenizer.ggml.remove_extra_whitespaces";
constexpr const char* kChatTemplate = "tokenizer.chat_template";

// ggml's token types.
enum TokenType : int64_t { kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5,
                           kByte = 6 };

constexpr const char* kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|)"
    R"(\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|)"
    R"(\s+(?!\S)|\s+)";
// o200k's split (GPT-4o; Phi-4-mini's tokenizer): words keep their case run and a trailing contraction.
const char* const kGpt4oPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kKnownPre = "smollm, gpt2, gpt-2, phi-2, default, llama-bpe, llama3, dbrx, qwen2, gpt-4o";

// The pre-tokenizer pipelines of the byte-level models reach knows, as the
// models' tokenizer.json spell them.  False for an unknown name.
bool known_pre_tokenizer(std::string_view pre, const std::string& origin, std::vector<PreTokenizerStep>& steps,
                         bool& ignore_merges) {
  const std::string where = std::string(kPre) + " '" + std::string(pre) + "'";
  auto split = [&](const char* pattern, SplitBehavior behavior, const char* what) {
    PreTokenizerStep s;
    s.kind = PreTokenizerStep::split;
    s.where = where + " (" + what + ")";
    s.pattern = std::make_shared<Regex>(pattern, false, origin + ": " + s.where);
    s.behavior = behavior;
    steps.push_back(std::move(s));
  };
  auto byte_level = [&](bool use_regex) {
    PreTokenizerStep s;
    s.kind = PreTokenizerStep::byte_level;
    s.where = where + " (ByteLevel)";
    if (use_regex) s.pattern = std::make_shared<Regex>(kGpt2Pattern, false, origin + ": " + s.where);
    steps.push_back(std::move(s));
  };
  steps.clear();
  ignore_merges = false;
  if (pre == "smollm") {  // SmolLM / SmolLM2: Digits(individual_digits) + ByteLevel
    split("\\p{N}", SplitBehavior::isolated, "Digits");
    byte_level(true);
  } else if (pre == "gpt2" || pre == "gpt-2" || pre == "phi-2" || pre == "default") {
    // llama.cpp names GPT-2's own pre-tokenizer "gpt-2" (and "phi-2" for Phi-2's copy of it).
    byte_level(true);
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "dbrx") {   // dbrx: cl100k's, the same split
    split(kLlama3Pattern, SplitBehavior::isolated, "Split");
    byte_level(false);
    ignore_merges = true;
  } else if (pre == "qwen2") {
    split(kQwen2Pattern, SplitBehavior::isolated, "Split");
    byte_level(false);
  } else if (pre == "gpt-4o") {
    split(kGpt4oPattern, SplitBehavior::isolated, "Split");
    byte_level(false);
  } else {
    return false;
  }
  return true;
}

// What a pre-tokenizer pipeline does, for comparing pipelines.
std::string signature(const std::vector<PreTokenizerStep>& steps) {
  std::string s;
  for (const auto& p : steps) {
    s += std::to_string(p.kind) + '\x1f';
    if (p.pattern) s += (p.pattern->literal() ? "L:" : "R:") + p.pattern->source();
    s += '\x1f' + std::to_string(static_cast<int>(p.behavior)) + std::to_string(p.invert) +
         std::to_string(p.add_prefix_space) + p.replacement + std::to_string(p.prepend) +
         std::to_string(p.split_on_replacement) + '\x1e';
  }
  return s;
}

int parse_byte_token(std::string_view t) {  // "<0xNN>" -> NN, else -1
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::shared_ptr<Regex> literal(const char* text, const std::string& where) {
  return std::make_shared<Regex>(text, true, where);
}

class GgufReader {
 public:
  GgufReader(const GgufFile& f, TokenizerImpl& t) : f_(f), t_(t) {}

  [[noreturn]] void unsupported(const std::string& what) const {
    throw Error(ErrorCode::unsupported, t_.origin + ": " + what);
  }

  void read() {
    const std::string model(f_.get_string(kModel));
    const bool spm = model == "llama";
    if (!spm && model != "gpt2")
      unsupported("key '" + std::string(kModel) + "' is '" + model +
                  "'; reach reads \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece BPE) tokenizers");
    if (f_.opt_bool(kRemoveExtraSpaces).value_or(false))
      unsupported("key '" + std::string(kRemoveExtraSpaces) + "' is true; reach does not collapse whitespace");

    tokens_ = f_.get_string_array(kTokens);
    const size_t n = tokens_.size();
    if (n == 0) f_.fail("key '" + std::string(kTokens) + "' is empty");
    if (n > static_cast<size_t>(INT32_MAX)) f_.fail("key '" + std::string(kTokens) + "' holds more than 2^31 tokens");
    std::vector<int64_t> types(n, kNormal);
    if (f_.has(kTokenType)) {
      types = f_.get_int_array(kTokenType);
      same_length(kTokenType, types.size());
      for (size_t i = 0; i < n; ++i)
        if (types[i] < kUndefined || types[i] > kByte)
          f_.fail("key '" + std::string(kTokenType) + "'[" + std::to_string(i) + "] is " + std::to_string(types[i]) +
                  ", not a token type (0..6)");
    }
    if (spm || f_.has(kScores)) {
      std::vector<float> scores = f_.get_f32_array(kScores);
      same_length(kScores, scores.size());
      for (size_t i = 0; i < n; ++i)
        if (std::isnan(scores[i]))  // NaN has no order: the merge queue needs one
          f_.fail("key '" + std::string(kScores) + "'[" + std::to_string(i) + "] is NaN");
      if (spm) t_.bpe.scores = std::move(scores);
    }

    BpeModel& bpe = t_.bpe;
    bpe.vocab.reserve(n);
    texts_.resize(n);
    bpe.byte_tokens.fill(-1);
    for (size_t i = 0; i < n; ++i) {
      const auto id = static_cast<int32_t>(i);
      // llama.cpp names an empty token so; an empty text could never be matched anyway.
      texts_[i] = tokens_[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : std::string(tokens_[i]);
      bpe.vocab[texts_[i]] = id;  // a repeated text: the last id wins, as in llama.cpp
      if (types[i] == kControl || types[i] == kUnknown || types[i] == kUserDefined) {
        AddedToken a;
        a.id = id;
        a.content = texts_[i];
        a.special = types[i] != kUserDefined;
        t_.added.push_back(std::move(a));
      }
      if (spm && types[i] == kByte) {
        int b = parse_byte_token(texts_[i]);
        if (b < 0)
          f_.fail("key '" + std::string(kTokens) + "'[" + std::to_string(i) + "] \"" + texts_[i].substr(0, 40) +
                  "\" has token type 6 (byte) but is not a <0xNN> token");
        bpe.byte_tokens[b] = id;
      }
    }
    if (spm && !f_.has(kTokenType))  // no types: byte tokens by name, as tokenizer.json does
      for (size_t i = 0; i < n; ++i)
        if (int b = parse_byte_token(texts_[i]); b >= 0) bpe.byte_tokens[b] = static_cast<int32_t>(i);

    if (spm) read_spm();
    else read_gpt2();

    bos_ = token_id(kBos);
    eos_ = token_id(kEos);
    unk_ = token_id(kUnk);
    t_.pad = token_id(kPad);
    if (!spm) t_.unk_meta = unk_;
    if (spm) {  // the unknown token stands for bytes without a <0xNN> token
      if (unk_) bpe.unk = unk_;
      else if (auto it = bpe.vocab.find(std::string_view("<unk>")); it != bpe.vocab.end()) bpe.unk = it->second;
    }
    // llama.cpp's defaults: SentencePiece vocabularies add BOS, byte-level ones nothing.
    if (f_.opt_bool(kAddBos).value_or(spm)) {
      if (!bos_) f_.fail("key '" + std::string(kAddBos) + "' asks for a BOS token but '" + kBos + "' is missing");
      t_.prefix.push_back(*bos_);
    }
    if (f_.opt_bool(kAddEos).value_or(false)) {
      if (!eos_) f_.fail("key '" + std::string(kAddEos) + "' asks for an EOS token but '" + kEos + "' is missing");
      t_.suffix.push_back(*eos_);
    }
    if (auto tmpl = f_.opt_string(kChatTemplate)) t_.chat_template = std::string(*tmpl);
  }

  // After finish_tokenizer: the file's ids override the guesses, and every id
  // shows its own text (a repeated text maps to one id only).
  void finish() {
    if (bos_) t_.bos = bos_;
    if (eos_) t_.eos = eos_;
    for (size_t i = 0; i < texts_.size() && i < t_.id_to_token.size(); ++i)
      if (t_.id_to_token[i].empty()) t_.id_to_token[i] = texts_[i];
  }

 private:
  void same_length(const char* key, size_t size) const {
    if (size != tokens_.size())
      f_.fail("key '" + std::string(key) + "' has " + std::to_string(size) + " entries but '" + kTokens + "' has " +
              std::to_string(tokens_.size()) + "; the file is damaged");
  }

  std::optional<int32_t> token_id(const char* key) const {
    std::optional<int64_t> v = f_.opt_i64(key);
    if (!v) return std::nullopt;
    if (*v < 0 || static_cast<uint64_t>(*v) >= tokens_.size())
      f_.fail("key '" + std::string(key) + "' is " + std::to_string(*v) + ", not a token id (the vocabulary has " +
              std::to_string(tokens_.size()) + " tokens)");
    return static_cast<int32_t>(*v);
  }

  void read_spm() {
    const bool prefix_space = f_.opt_bool(kAddSpacePrefix).value_or(true);
    const std::string where = std::string(kModel) + " 'llama'";
    if (prefix_space) {
      NormalizerStep p;
      p.kind = NormalizerStep::prepend;
      p.where = std::string(kAddSpacePrefix) + " (Prepend)";
      p.text = kSpace;
      t_.normalizer.push_back(std::move(p));
    }
    NormalizerStep r;
    r.kind = NormalizerStep::replace;
    r.where = where + " (Replace)";
    r.pattern = literal(" ", t_.origin + ": " + r.where);
    r.text = kSpace;
    t_.normalizer.push_back(std::move(r));
    t_.bpe.byte_fallback = true;

    t_.has_decoder = true;
    DecoderStep d;
    d.kind = DecoderStep::replace;
    d.where = where + " (decoder Replace)";
    d.pattern = literal(kSpace, t_.origin + ": " + d.where);
    d.text = " ";
    t_.decoder.push_back(std::move(d));
    t_.decoder.push_back(DecoderStep{DecoderStep::byte_fallback, where + " (decoder ByteFallback)"});
    t_.decoder.push_back(DecoderStep{DecoderStep::fuse, where + " (decoder Fuse)"});
    if (prefix_space) {
      DecoderStep s;
      s.kind = DecoderStep::strip;
      s.where = where + " (decoder Strip)";
      s.text = " ";
      s.start = 1;
      t_.decoder.push_back(std::move(s));
    }
  }

  void read_gpt2() {
    const std::string pre(f_.opt_string(kPre).value_or("default"));
    if (!known_pre_tokenizer(pre, t_.origin, t_.pre_tokenizer, t_.bpe.ignore_merges))
      unsupported("key '" + std::string(kPre) + "' is '" + pre + "', a pre-tokenizer reach does not know (it knows " +
                  kKnownPre + ")");
    if (f_.opt_bool(kAddSpacePrefix).value_or(false))
      for (auto& s : t_.pre_tokenizer)
        if (s.kind == PreTokenizerStep::byte_level) s.add_prefix_space = true;

    const std::vector<std::string_view> merges = f_.get_string_array(kMerges);
    if (merges.size() > static_cast<size_t>(INT32_MAX)) f_.fail("key '" + std::string(kMerges) + "': more than 2^31");
    BpeModel& bpe = t_.bpe;
    bpe.merges.reserve(merges.size());
    std::string joined;
    for (size_t i = 0; i < merges.size(); ++i) {
      const std::string at = "key '" + std::string(kMerges) + "'[" + std::to_string(i) + "] ";
      std::string_view m = merges[i];
      // As llama.cpp: the first space after the first byte separates the two tokens.
      const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
      if (sp == std::string_view::npos) f_.fail(at + "is not two tokens separated by a space");
      auto id_of = [&](std::string_view tok) {
        auto it = bpe.vocab.find(tok);
        if (it == bpe.vocab.end())
          f_.fail(at + "names \"" + std::string(tok.substr(0, 40)) + "\", which is not in '" + kTokens + "'");
        return it->second;
      };
      const int32_t a = id_of(m.substr(0, sp)), b = id_of(m.substr(sp + 1));
      joined.assign(m.substr(0, sp));
      joined.append(m.substr(sp + 1));
      // The first of a repeated pair keeps its rank, as in llama.cpp.
      bpe.merges.emplace(BpeModel::key(a, b), std::make_pair(static_cast<int32_t>(i), id_of(joined)));
    }

    t_.has_decoder = true;
    t_.decoder.push_back(DecoderStep{DecoderStep::byte_level, std::string(kModel) + " 'gpt2' (decoder ByteLevel)"});
  }

  const GgufFile& f_;
  TokenizerImpl& t_;
  std::vector<std::string_view> tokens_;
  std::vector<std::string> texts_;
  std::optional<int32_t> bos_, eos_, unk_;
};

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& file) {
  auto impl = std::make_shared<TokenizerImpl>();
  impl->origin = "gguf (" + file.path().string() + ")";
  GgufReader reader(file, *impl);
  reader.read();
  finish_tokenizer(*impl);
  reader.finish();
  return Tokenizer(std::move(impl));
}

std::string_view Tokenizer::chat_template() const { return impl_->chat_template; }

namespace {

class GgufExporter {
 public:
  GgufExporter(const TokenizerImpl& t, size_t rows) : t_(t), rows_(rows) {}

  [[noreturn]] void unsupported(const std::string& what) const {
    throw Error(ErrorCode::unsupported, t_.origin + ": cannot be written as GGUF tokenizer metadata: " + what);
  }

  void write(GgufMetaSink& sink) const {
    const BpeModel& bpe = t_.bpe;
    bool prefix_space = false;
    std::string pre;
    const bool spm = is_spm(prefix_space);
    if (!spm) pre = gpt2_pre(prefix_space);
    for (const auto& a : t_.added)
      if (a.lstrip || a.rstrip || a.single_word)
        unsupported("added token \"" + a.content.substr(0, 40) +
                    "\" strips spaces or matches single words only, which GGUF cannot say");

    const size_t n = std::max(t_.id_to_token.size(), rows_);
    std::vector<std::string> tokens(n);
    std::vector<int32_t> types(n, kNormal);
    for (size_t i = 0; i < n; ++i) {
      if (i < t_.id_to_token.size()) tokens[i] = t_.id_to_token[i];
      if (tokens[i].empty()) {  // an id no token has: a placeholder, as llama.cpp's converter writes
        tokens[i] = "[PAD" + std::to_string(i) + "]";
        types[i] = kUnused;
      }
    }
    if (spm)
      for (int32_t id : bpe.byte_tokens)
        if (id >= 0) types[static_cast<size_t>(id)] = kByte;
    for (const auto& a : t_.added) types[static_cast<size_t>(a.id)] = a.special ? kControl : kUserDefined;
    if (bpe.unk) types[static_cast<size_t>(*bpe.unk)] = kUnknown;

    sink.put_string(kModel, spm ? "llama" : "gpt2");
    sink.put_string(kPre, spm ? "default" : pre);
    sink.put_string_array(kTokens, tokens);
    if (spm) sink.put_f32_array(kScores, scores(n));
    sink.put_i32_array(kTokenType, types);
    if (!spm) sink.put_string_array(kMerges, merges());
    auto put_id = [&](const char* key, std::optional<int32_t> id) {
      if (id) sink.put_u32(key, static_cast<uint32_t>(*id));
    };
    put_id(kBos, t_.bos);
    put_id(kEos, t_.eos);
    put_id(kUnk, bpe.unk ? bpe.unk : t_.unk_meta);
    put_id(kPad, t_.pad);
    sink.put_bool(kAddBos, adds(t_.prefix, t_.bos, "before", "BOS"));
    sink.put_bool(kAddEos, adds(t_.suffix, t_.eos, "after", "EOS"));
    sink.put_bool(kAddSpacePrefix, prefix_space);
    if (!t_.chat_template.empty()) sink.put_string(kChatTemplate, t_.chat_template);
  }

 private:
  // SentencePiece-style: U+2581 for spaces (after an optional leading one), no
  // pre-tokenizer, byte fallback, and the decoder that undoes exactly that.
  bool is_spm(bool& prefix_space) const {
    const auto& norm = t_.normalizer;
    auto is_space_replace = [](const NormalizerStep& s) {
      return s.kind == NormalizerStep::replace && s.pattern->literal() && s.pattern->source() == " " &&
             s.text == kSpace;
    };
    const bool spaces = (norm.size() == 1 && is_space_replace(norm[0])) ||
                        (norm.size() == 2 && norm[0].kind == NormalizerStep::prepend && norm[0].text == kSpace &&
                         is_space_replace(norm[1]));
    if (!t_.bpe.byte_fallback && t_.bpe.scores.empty()) return false;
    if (!spaces || !t_.pre_tokenizer.empty())
      unsupported("a byte-fallback tokenizer must turn spaces into U+2581 in its normalizer (Prepend + Replace, as "
                  "Llama 2's tokenizer.json) and have no pre-tokenizer to match GGUF's \"llama\" model");
    prefix_space = norm.size() == 2;
    const auto& dec = t_.decoder;
    const bool decodes = dec.size() == (prefix_space ? 4u : 3u) && dec[0].kind == DecoderStep::replace &&
                         dec[0].pattern->literal() && dec[0].pattern->source() == kSpace && dec[0].text == " " &&
                         dec[1].kind == DecoderStep::byte_fallback && dec[2].kind == DecoderStep::fuse &&
                         (!prefix_space || (dec[3].kind == DecoderStep::strip && dec[3].text == " " &&
                                            dec[3].start == 1 && dec[3].stop == 0));
    if (!decodes)
      unsupported("the decoder is not Replace(U+2581, ' '), ByteFallback, Fuse" +
                  std::string(prefix_space ? ", Strip(' ', 1, 0)" : "") + " as GGUF's \"llama\" model decodes");
    if (t_.bpe.ignore_merges) unsupported("ignore_merges is set, which GGUF's \"llama\" model cannot say");
    return true;
  }

  // Byte-level BPE: the pre-tokenizer must be one of the named pipelines.
  std::string gpt2_pre(bool& prefix_space) const {
    for (const auto& s : t_.normalizer)
      if (s.kind != NormalizerStep::passthrough)
        unsupported("normalizer step " + s.where + " has no GGUF equivalent for a byte-level BPE tokenizer");
    if (t_.decoder.size() != 1 || t_.decoder[0].kind != DecoderStep::byte_level)
      unsupported("GGUF's \"gpt2\" model decodes with ByteLevel alone; this decoder differs");
    for (const auto& s : t_.pre_tokenizer)
      if (s.kind == PreTokenizerStep::byte_level) prefix_space = s.add_prefix_space;
    const std::string mine = signature(t_.pre_tokenizer);
    for (const char* name : {"smollm", "gpt-2", "llama-bpe", "qwen2", "gpt-4o"}) {
      std::vector<PreTokenizerStep> steps;
      bool ignore_merges = false;
      known_pre_tokenizer(name, t_.origin, steps, ignore_merges);
      for (auto& s : steps)
        if (s.kind == PreTokenizerStep::byte_level) s.add_prefix_space = prefix_space;
      if (signature(steps) != mine) continue;
      if (ignore_merges != t_.bpe.ignore_merges)
        unsupported(std::string("the pre-tokenizer is ") + name + "'s but ignore_merges is " +
                    (t_.bpe.ignore_merges ? "set" : "not set") + ", unlike that model");
      return name;
    }
    unsupported("the pre-tokenizer is none that GGUF names (reach writes smollm, gpt2, llama-bpe, qwen2, gpt-4o)");
  }

  // Merges in rank order, "a b".
  std::vector<std::string> merges() const {
    std::vector<std::tuple<int32_t, int32_t, int32_t>> ranked;  // rank, a, b
    ranked.reserve(t_.bpe.merges.size());
    for (const auto& [key, v] : t_.bpe.merges)
      ranked.emplace_back(v.first, static_cast<int32_t>(key >> 32), static_cast<int32_t>(key & 0xFFFFFFFFu));
    std::sort(ranked.begin(), ranked.end());
    std::vector<std::string> out;
    out.reserve(ranked.size());
    for (const auto& [rank, a, b] : ranked) {
      const std::string& x = t_.id_to_token[static_cast<size_t>(a)];
      const std::string& y = t_.id_to_token[static_cast<size_t>(b)];
      if (x.empty() || x.find(' ', 1) != std::string::npos)
        unsupported("merge " + std::to_string(rank) + " (\"" + x + "\", \"" + y +
                    "\") has a space GGUF's \"a b\" merges cannot separate");
      out.push_back(x + " " + y);
    }
    return out;
  }

  // SentencePiece scores equivalent to the merge ranks: a token scores minus
  // the rank of the first merge that makes it, so higher scores merge first;
  // tokens no merge makes score below all of them.
  std::vector<float> scores(size_t n) const {
    if (!t_.bpe.scores.empty()) {  // read from a GGUF file: as they were (padding scores lowest)
      std::vector<float> out = t_.bpe.scores;
      out.resize(std::max(out.size(), n), -1e9f);
      return out;
    }
    std::vector<float> out(n, -1e9f);
    std::vector<int32_t> first(n, INT32_MAX);
    for (const auto& [key, v] : t_.bpe.merges) {
      auto id = static_cast<size_t>(v.second);
      first[id] = std::min(first[id], v.first);
    }
    for (size_t i = 0; i < n; ++i)
      if (first[i] != INT32_MAX) out[i] = -static_cast<float>(first[i]);
    return out;
  }

  bool adds(const std::vector<int32_t>& ids, std::optional<int32_t> token, const char* where, const char* name) const {
    if (ids.empty()) return false;
    if (ids.size() == 1 && token && ids[0] == *token) return true;
    unsupported("the post-processor adds " + std::to_string(ids.size()) + " token(s) " + where +
                " the text; GGUF can only say whether the " + name + " token is added");
  }

  const TokenizerImpl& t_;
  size_t rows_;
};

}  // namespace

void Tokenizer::to_gguf(GgufMetaSink& sink, size_t rows) const { GgufExporter(*impl_, rows).write(sink); }

}  // namespace reach
