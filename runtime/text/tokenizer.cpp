// Loading tokenizer.json, and the public Tokenizer API.
#include "runtime/text/tokenizer.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "runtime/formats/file_read.hpp"
#include "runtime/formats/json_parse.hpp"
#include "runtime/text/tokenizer_impl.hpp"
#include "runtime/text/utf8.hpp"

namespace reach {

namespace {

using nlohmann::json;

const char* const supported_models =
    "reach supports BPE tokenizers: byte-level BPE (GPT-2, Llama 3, SmolLM2, Qwen2) and SentencePiece-style "
    "BPE with byte fallback (Llama 2, Mistral)";

// A real tokenizer.json nests about 8 levels and one Sequence at most; tokenizers
// itself stops at 128 JSON levels (serde_json), i.e. 62 nested Sequences.  The
// limits keep a hostile file from exhausting the stack: nlohmann copies and the
// builders below recurse once per level.
constexpr int kMaxJsonDepth = 64;
constexpr int kMaxSequenceDepth = 16;
// A tokenizer.json holds ~2 values per token (a 256k vocabulary: ~1.5M); the
// limit keeps the parsed form of a hostile file of "[],[],..." near 0.6 GB.
constexpr size_t kMaxJsonValues = size_t{8} << 20;

class Loader {
 public:
  Loader(TokenizerImpl& t, const std::string& origin) : t_(t), origin_(origin) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw Error(ErrorCode::format, origin_ + ": " + where + ": " + what);
  }
  [[noreturn]] void unsupported(const std::string& where, const std::string& type, const char* supported) const {
    throw Error(ErrorCode::unsupported,
                origin_ + ": " + where + " type \"" + type + "\" is not supported; supported: " + supported);
  }

  const json& need(const json& j, const char* key, const std::string& where) const {
    if (!j.is_object() || !j.contains(key)) fail(where, std::string("missing key \"") + key + "\"");
    return j.at(key);
  }
  std::string str(const json& j, const char* key, const std::string& where) const {
    const json& v = need(j, key, where);
    if (!v.is_string()) fail(where + "." + key, "expected a string");
    return v.get<std::string>();
  }
  // The member `key` of an object, null when absent (no copy: see kMaxJsonDepth).
  static const json& member(const json& j, const char* key) {
    static const json null;
    if (!j.is_object()) return null;
    auto it = j.find(key);
    return it == j.end() ? null : *it;
  }
  const json& array(const json& j, const char* key, const std::string& where) const {
    const json& v = need(j, key, where);
    if (!v.is_array()) fail(where + "." + key, "expected an array");
    return v;
  }
  bool flag(const json& j, const char* key, bool fallback, const std::string& where) const {
    const json& v = member(j, key);
    if (v.is_null()) return fallback;
    if (!v.is_boolean()) fail(where + "." + key, "expected true or false, got " + short_dump(v));
    return v.get<bool>();
  }
  // A token id: an integer in [0, INT32_MAX] (tokenizers reads a u32; reach's ids are int32).
  int32_t token_id(const json& v, const std::string& where) const {
    if (v.is_number_unsigned() && v.get<uint64_t>() <= INT32_MAX) return static_cast<int32_t>(v.get<uint64_t>());
    if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX)
      return static_cast<int32_t>(v.get<int64_t>());
    fail(where, "expected a token id (an integer in [0, " + std::to_string(INT32_MAX) + "]), got " + short_dump(v));
  }
  // A count (tokenizers reads a usize): a non-negative integer.
  uint64_t count(const json& j, const char* key, const std::string& where) const {
    const json& v = member(j, key);
    if (v.is_null()) return 0;
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
    fail(where + "." + key, "expected a non-negative integer, got " + short_dump(v));
  }
  // Exactly one character (tokenizers reads a char: "" or "ab" does not load).
  std::string one_char(const json& j, const char* key, const std::string& where) const {
    std::string c = str(j, key, where);
    if (c.empty() || utf8::sequence_length(c, 0) != c.size())
      fail(where + "." + key, "expected exactly one character, got " + json(c).dump());
    return c;
  }
  static std::string short_dump(const json& v) {
    if (v.is_structured()) return v.is_array() ? "an array" : "an object";
    std::string d = v.dump();
    return d.size() > 40 ? d.substr(0, 37) + "..." : d;
  }
  // Sequences nest; each level recurses here.
  void check_depth(int depth, const std::string& where) const {
    if (depth > kMaxSequenceDepth)
      fail(where, "Sequence nested deeper than " + std::to_string(kMaxSequenceDepth) + " levels");
  }
  std::string type_of(const json& j, const std::string& where) const {
    if (!j.is_object()) fail(where, "expected an object");
    return str(j, "type", where);
  }

  std::shared_ptr<Regex> regex(const std::string& pattern, bool literal, const std::string& where) const {
    return std::make_shared<Regex>(pattern, literal, origin_ + ": " + where);
  }

  std::shared_ptr<Regex> pattern(const json& j, const std::string& where) const {
    if (j.is_string()) return regex(j.get<std::string>(), true, where);
    if (j.is_object() && j.contains("String")) return regex(str(j, "String", where), true, where);
    if (j.is_object() && j.contains("Regex")) return regex(str(j, "Regex", where), false, where);
    fail(where, "expected {\"String\": ...} or {\"Regex\": ...}");
  }

  void model(const json& m) {
    if (!m.is_object()) fail("model", "missing or not an object");
    std::string type = m.contains("type") ? str(m, "type", "model") : (m.contains("merges") ? "BPE" : "?");
    if (type != "BPE") unsupported("model", type, supported_models);
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (m.contains(key) && m[key].is_string() && !m[key].get<std::string>().empty())
        throw Error(ErrorCode::unsupported, origin_ + ": model." + key + " is not supported");
    BpeModel& bpe = t_.bpe;
    const json& vocab = need(m, "vocab", "model");
    if (!vocab.is_object()) fail("model.vocab", "expected an object of token: id");
    bpe.vocab.reserve(vocab.size());
    for (const auto& [tok, id] : vocab.items()) bpe.vocab[tok] = token_id(id, "model.vocab[" + json(tok).dump() + "]");
    auto id_of = [&](const std::string& tok, size_t i) {
      auto it = bpe.vocab.find(tok);
      if (it == bpe.vocab.end()) fail("model.merges[" + std::to_string(i) + "]", "token \"" + tok + "\" is not in the vocab");
      return it->second;
    };
    static const json no_merges = json::array();
    const json& merges = m.contains("merges") ? m["merges"] : no_merges;  // (both lvalues: no copy)
    if (!merges.is_array()) fail("model.merges", "expected an array");
    // The rank of a merge is its index (an int32; a 128 MiB file holds < 2^25 merges).
    if (merges.size() > INT32_MAX) fail("model.merges", "more than 2^31 merges");
    bpe.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const json& e = merges[i];
      std::string a, b;
      if (e.is_string()) {  // "a b"
        std::string s = e.get<std::string>();
        size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          fail("model.merges[" + std::to_string(i) + "]", "\"" + s + "\" is not two tokens separated by one space");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {  // ["a", "b"]
        a = e[0].get<std::string>();
        b = e[1].get<std::string>();
      } else {
        fail("model.merges[" + std::to_string(i) + "]", "expected \"a b\" or [\"a\", \"b\"]");
      }
      bpe.merges[BpeModel::key(id_of(a, i), id_of(b, i))] = {static_cast<int32_t>(i), id_of(a + b, i)};
    }
    bpe.byte_fallback = flag(m, "byte_fallback", false, "model");
    bpe.fuse_unk = flag(m, "fuse_unk", false, "model");
    bpe.ignore_merges = flag(m, "ignore_merges", false, "model");
    if (m.contains("unk_token") && m["unk_token"].is_string()) {
      auto it = bpe.vocab.find(m["unk_token"].get<std::string>());
      if (it != bpe.vocab.end()) bpe.unk = it->second;
    }
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      auto it = bpe.vocab.find(std::string_view(name));
      bpe.byte_tokens[b] = it == bpe.vocab.end() ? -1 : it->second;
    }
  }

  void normalizer(const json& j, const std::string& where, int depth = 0) {
    if (j.is_null()) return;
    check_depth(depth, where);
    std::string type = type_of(j, where);
    NormalizerStep s;
    s.where = where + " (" + type + ")";
    if (type == "Sequence") {
      const json& list = array(j, "normalizers", where);
      for (size_t i = 0; i < list.size(); ++i)
        normalizer(list[i], where + ".normalizers[" + std::to_string(i) + "]", depth + 1);
      return;
    } else if (type == "Prepend") {
      s.kind = NormalizerStep::prepend;
      s.text = str(j, "prepend", where);
    } else if (type == "Replace") {
      s.kind = NormalizerStep::replace;
      s.pattern = pattern(need(j, "pattern", where), where + ".pattern");
      s.text = str(j, "content", where);
    } else if (type == "Strip") {
      s.kind = NormalizerStep::strip;
      s.left = flag(j, "strip_left", false, where);
      s.right = flag(j, "strip_right", false, where);
    } else if (type == "NFC" || type == "NFKC") {
      // Unicode normalization is not implemented: exact for text that is
      // already in NFC (nearly all text), which Qwen2's NFC assumes anyway.
      s.kind = NormalizerStep::passthrough;
    } else {
      unsupported(where, type, "Sequence, Prepend, Replace, Strip, NFC (pass-through)");
    }
    t_.normalizer.push_back(std::move(s));
  }

  SplitBehavior behavior(const std::string& b, const std::string& where) const {
    if (b == "Removed") return SplitBehavior::removed;
    if (b == "Isolated") return SplitBehavior::isolated;
    if (b == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
    if (b == "MergedWithNext") return SplitBehavior::merged_with_next;
    if (b == "Contiguous") return SplitBehavior::contiguous;
    fail(where + ".behavior", "unknown value \"" + b + "\"");
  }

  void pre_tokenizer(const json& j, const std::string& where, int depth = 0) {
    if (j.is_null()) return;
    check_depth(depth, where);
    std::string type = type_of(j, where);
    PreTokenizerStep s;
    s.where = where + " (" + type + ")";
    if (type == "Sequence") {
      const json& list = array(j, "pretokenizers", where);
      for (size_t i = 0; i < list.size(); ++i)
        pre_tokenizer(list[i], where + ".pretokenizers[" + std::to_string(i) + "]", depth + 1);
      return;
    } else if (type == "Split") {
      s.kind = PreTokenizerStep::split;
      s.pattern = pattern(need(j, "pattern", where), where + ".pattern");
      s.behavior = behavior(str(j, "behavior", where), where);
      s.invert = flag(j, "invert", false, where);
    } else if (type == "ByteLevel") {
      s.kind = PreTokenizerStep::byte_level;
      s.add_prefix_space = flag(j, "add_prefix_space", true, where);
      if (flag(j, "use_regex", true, where)) s.pattern = gpt2_regex(where);
    } else if (type == "Digits") {
      s.kind = PreTokenizerStep::split;
      s.pattern = regex("\\p{N}", false, where);
      s.behavior =
          flag(j, "individual_digits", false, where) ? SplitBehavior::isolated : SplitBehavior::contiguous;
    } else if (type == "Whitespace") {
      s.kind = PreTokenizerStep::split;
      s.pattern = regex("\\w+|[^\\w\\s]+", false, where);
      s.behavior = SplitBehavior::removed;
      s.invert = true;
    } else if (type == "Punctuation") {  // Rust: is_ascii_punctuation || Unicode P*, one match per character
      s.kind = PreTokenizerStep::split;
      s.pattern = regex("[\\p{P}!-/:-@\\[-`{-~]", false, where);
      s.behavior = behavior(member(j, "behavior").is_null() ? "Isolated" : str(j, "behavior", where), where);
    } else if (type == "WhitespaceSplit") {
      s.kind = PreTokenizerStep::split;
      s.pattern = regex("\\s+", false, where);
      s.behavior = SplitBehavior::removed;
    } else if (type == "Metaspace") {
      s.kind = PreTokenizerStep::metaspace;
      metaspace_options(j, where, s.replacement, s.prepend);
      s.split_on_replacement = flag(j, "split", true, where);
    } else {
      unsupported(where, type, "Sequence, Split, ByteLevel, Digits, Metaspace, Punctuation, Whitespace, WhitespaceSplit");
    }
    t_.pre_tokenizer.push_back(std::move(s));
  }

  void metaspace_options(const json& j, const std::string& where, std::string& replacement,
                         PreTokenizerStep::Prepend& prepend) const {
    // One character: splitting on "" would never advance (tokenizers reads a char).
    replacement = j.contains("replacement") ? one_char(j, "replacement", where) : "\xE2\x96\x81";
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      std::string p = j["prepend_scheme"].get<std::string>();
      if (p == "always") prepend = PreTokenizerStep::always;
      else if (p == "first") prepend = PreTokenizerStep::first;
      else if (p == "never") prepend = PreTokenizerStep::never;
      else fail(where + ".prepend_scheme", "unknown value \"" + p + "\"");
    } else {  // older files: add_prefix_space
      prepend = flag(j, "add_prefix_space", true, where) ? PreTokenizerStep::always : PreTokenizerStep::never;
    }
  }

  std::shared_ptr<Regex> gpt2_regex(const std::string& where) {
    if (!gpt2_) gpt2_ = regex(kGpt2Pattern, false, where);
    return gpt2_;
  }

  void decoder(const json& j, const std::string& where, int depth = 0) {
    if (j.is_null()) return;
    check_depth(depth, where);
    t_.has_decoder = true;
    std::string type = type_of(j, where);
    DecoderStep s;
    s.where = where + " (" + type + ")";
    if (type == "Sequence") {
      const json& list = array(j, "decoders", where);
      for (size_t i = 0; i < list.size(); ++i)
        decoder(list[i], where + ".decoders[" + std::to_string(i) + "]", depth + 1);
      return;
    } else if (type == "ByteLevel") {
      s.kind = DecoderStep::byte_level;
    } else if (type == "Replace") {
      s.kind = DecoderStep::replace;
      s.pattern = pattern(need(j, "pattern", where), where + ".pattern");
      s.text = str(j, "content", where);
    } else if (type == "ByteFallback") {
      s.kind = DecoderStep::byte_fallback;
    } else if (type == "Fuse") {
      s.kind = DecoderStep::fuse;
    } else if (type == "Strip") {
      s.kind = DecoderStep::strip;
      s.text = one_char(j, "content", where);  // "" would strip nothing forever
      s.start = count(j, "start", where);
      s.stop = count(j, "stop", where);
    } else if (type == "Metaspace") {
      s.kind = DecoderStep::metaspace;
      PreTokenizerStep::Prepend p;
      metaspace_options(j, where, s.text, p);
      s.prepend = p != PreTokenizerStep::never;
    } else {
      unsupported(where, type, "Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace");
    }
    t_.decoder.push_back(std::move(s));
  }

  void post_processor(const json& j, const std::string& where, int depth = 0) {
    if (j.is_null()) return;
    check_depth(depth, where);
    std::string type = type_of(j, where);
    if (type == "Sequence") {
      const json& list = array(j, "processors", where);
      for (size_t i = 0; i < list.size(); ++i)
        post_processor(list[i], where + ".processors[" + std::to_string(i) + "]", depth + 1);
    } else if (type == "ByteLevel") {
      // offsets only
    } else if (type == "TemplateProcessing") {
      const json& single = array(j, "single", where);
      const json& specials = member(j, "special_tokens");
      if (!specials.is_null() && !specials.is_object()) fail(where + ".special_tokens", "expected an object");
      bool seen_sequence = false;
      for (size_t i = 0; i < single.size(); ++i) {
        const json& item = single[i];
        const std::string at = where + ".single[" + std::to_string(i) + "]";
        if (item.is_object() && item.contains("Sequence")) {
          seen_sequence = true;
          continue;
        }
        std::string name = str(need(item, "SpecialToken", at), "id", at + ".SpecialToken");
        const json& entry = member(specials, name.c_str());
        if (entry.is_null()) fail(where + ".special_tokens", "no entry for " + json(name).dump());
        const std::string key = where + ".special_tokens[" + json(name).dump() + "].ids";
        const json& ids = array(entry, "ids", where + ".special_tokens[" + json(name).dump() + "]");
        for (size_t k = 0; k < ids.size(); ++k)
          (seen_sequence ? t_.suffix : t_.prefix).push_back(token_id(ids[k], key + "[" + std::to_string(k) + "]"));
      }
    } else if (type == "RobertaProcessing" || type == "BertProcessing") {
      auto id_of = [&](const char* key) {  // "cls": ["<s>", 0]: the token and its id
        const json& pair = need(j, key, where);
        if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string())
          fail(where + "." + key, "expected [\"token\", id]");
        return token_id(pair[1], where + "." + key + "[1]");
      };
      t_.prefix.push_back(id_of("cls"));
      t_.suffix.push_back(id_of("sep"));
    } else {
      unsupported(where, type, "Sequence, TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing");
    }
  }

  void added_tokens(const json& list) {
    if (list.is_null()) return;
    if (!list.is_array()) fail("added_tokens", "expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      const json& e = list[i];
      std::string where = "added_tokens[" + std::to_string(i) + "]";
      AddedToken a;
      a.id = token_id(need(e, "id", where), where + ".id");
      a.content = str(e, "content", where);
      a.special = flag(e, "special", false, where);
      a.lstrip = flag(e, "lstrip", false, where);
      a.rstrip = flag(e, "rstrip", false, where);
      a.single_word = flag(e, "single_word", false, where);
      a.normalized = flag(e, "normalized", !a.special, where);
      t_.added.push_back(std::move(a));
    }
  }

 private:
  TokenizerImpl& t_;
  const std::string& origin_;
  std::shared_ptr<Regex> gpt2_;
};

std::optional<int32_t> first_known(const TokenizerImpl& t, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto it = t.token_to_id.find(std::string_view(n));
    if (it != t.token_to_id.end()) return it->second;
  }
  return std::nullopt;
}

}  // namespace

void finish_tokenizer(TokenizerImpl& t) {
  int64_t size = 0;
  for (const auto& [tok, id] : t.bpe.vocab) size = std::max<int64_t>(size, int64_t{id} + 1);
  for (const auto& a : t.added) size = std::max<int64_t>(size, int64_t{a.id} + 1);
  // Real vocabularies are dense; refuse a huge sparse id before allocating for it.
  int64_t entries = static_cast<int64_t>(t.bpe.vocab.size() + t.added.size());
  if (size > 4 * entries + 65536)
    throw Error(ErrorCode::format, t.origin + ": token id " + std::to_string(size - 1) + " is far beyond the " +
                                       std::to_string(entries) + " tokens defined; the file is damaged");
  t.id_to_token.assign(static_cast<size_t>(size), std::string());
  t.special.assign(static_cast<size_t>(size), 0);
  t.token_to_id = t.bpe.vocab;
  for (const auto& [tok, id] : t.bpe.vocab) t.id_to_token[id] = tok;
  for (const auto& a : t.added) {
    t.id_to_token[a.id] = a.content;
    t.special[a.id] = a.special;
    t.token_to_id[a.content] = a.id;
  }
  // Normalized added tokens are matched on normalized text, so normalize them.
  for (auto& a : t.added) {
    if (a.normalized) {
      t.normalize(a.content);
      t.normalized_added.tokens.push_back(&a);
    } else {
      t.raw_added.tokens.push_back(&a);
    }
  }
  try {
    t.raw_added.build();
    t.normalized_added.build();
  } catch (const Error& e) {
    throw Error(e.code(), t.origin + ": " + e.what());
  }

  // The post-processor's ids go straight to the model: each must be a token.
  for (const std::vector<int32_t>* ids : {&t.prefix, &t.suffix})
    for (int32_t id : *ids)
      if (id >= size)
        throw Error(ErrorCode::format, t.origin + ": post_processor: special token id " + std::to_string(id) +
                                           " is not in the vocabulary (" + std::to_string(size) +
                                           " tokens); the file is damaged");
  if (!t.prefix.empty()) t.bos = t.prefix.front();
  else t.bos = first_known(t, {"<|begin_of_text|>", "<s>", "<bos>", "<|startoftext|>", "<|endoftext|>"});
  if (!t.suffix.empty()) t.eos = t.suffix.back();
  else
    t.eos = first_known(t, {"<|end_of_text|>", "</s>", "<eos>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>",
                            "<|end|>"});
}

namespace {

std::shared_ptr<TokenizerImpl> build_from_json(std::string_view text, const std::string& origin) {
  auto impl = std::make_shared<TokenizerImpl>();
  impl->origin = origin;
  json j;
  try {
    j = parse_json_bounded(text, kMaxJsonDepth, kMaxJsonValues);
  } catch (const JsonTooLarge& e) {
    throw Error(ErrorCode::format, origin + ": JSON " + e.what() +
                                       " (a tokenizer.json nests about 8 and holds ~2 per token); the file is damaged");
  } catch (const json::exception& e) {
    throw Error(ErrorCode::format, origin + ": malformed JSON (" + e.what() +
                                       "); replace it with the tokenizer.json of the model's Hugging Face repository");
  }
  try {
    if (!j.is_object()) throw Error(ErrorCode::format, origin + ": expected a JSON object at the top level");
    Loader l(*impl, origin);
    l.model(Loader::member(j, "model"));
    l.added_tokens(Loader::member(j, "added_tokens"));
    l.normalizer(Loader::member(j, "normalizer"), "normalizer");
    l.pre_tokenizer(Loader::member(j, "pre_tokenizer"), "pre_tokenizer");
    l.post_processor(Loader::member(j, "post_processor"), "post_processor");
    l.decoder(Loader::member(j, "decoder"), "decoder");
  } catch (const json::exception& e) {  // a key of the wrong type somewhere
    throw Error(ErrorCode::format, origin + ": unexpected content: " + e.what());
  }
  finish_tokenizer(*impl);
  return impl;
}

// The chat template of tokenizer_config.json next to tokenizer.json: a string, or Hugging Face's list
// of {"name", "template"} of which reach takes "default".  Empty when the file or the key is absent.
std::string read_chat_template(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return {};
  const std::string text = read_file(file, file_kinds::tokenizer_config_json);
  const std::string fix = "; fix or delete " + file.string() + " (reach reads only its chat_template)";
  json j;
  try {
    j = parse_json_bounded(text, kMaxJsonDepth, kMaxJsonValues);
  } catch (const std::exception& e) {  // malformed (json::exception) or too large (JsonTooLarge)
    throw Error(ErrorCode::format, file.string() + ": malformed JSON (" + e.what() + ")" + fix);
  }
  const json& t = Loader::member(j, "chat_template");
  if (t.is_null()) return {};
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array())
    for (const json& e : t)
      if (Loader::member(e, "name") == "default" && Loader::member(e, "template").is_string())
        return Loader::member(e, "template").get<std::string>();
  if (t.is_array()) return {};  // named templates only (tool_use, rag, ...): none for plain chat
  throw Error(ErrorCode::format, file.string() + ": chat_template is " + Loader::short_dump(t) +
                                     ", expected a string or a list of {\"name\", \"template\"}" + fix);
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view text, const std::string& origin) {
  return Tokenizer(build_from_json(text, origin));
}

Tokenizer Tokenizer::load(const std::filesystem::path& file) {
  std::error_code ec;
  std::filesystem::path path = file;
  // A path named tokenizer.json is the file itself, even when it is (wrongly) a
  // directory: read_file says what it is rather than looking inside it.
  if (path.filename() != "tokenizer.json" && std::filesystem::is_directory(path, ec)) path /= "tokenizer.json";
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  const std::string text = read_file(path, file_kinds::tokenizer_json,
                                     "; copy tokenizer.json from the model's Hugging Face repository into " +
                                         dir.string());
  std::shared_ptr<TokenizerImpl> impl = build_from_json(text, path.string());
  impl->chat_template = read_chat_template(dir);
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  return impl_->encode(text, add_special);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  return impl_->decode(ids, skip_special);
}

std::string Tokenizer::token_text(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_token.size()) return {};
  return impl_->id_to_token[id];
}

std::optional<int32_t> Tokenizer::find(std::string_view token) const {
  auto it = impl_->token_to_id.find(token);
  if (it == impl_->token_to_id.end()) return std::nullopt;
  return it->second;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_to_token.size()); }

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->special.size() && impl_->special[id];
}

std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }
std::span<const int32_t> Tokenizer::special_prefix() const { return impl_->prefix; }
std::span<const int32_t> Tokenizer::special_suffix() const { return impl_->suffix; }

}  // namespace reach
