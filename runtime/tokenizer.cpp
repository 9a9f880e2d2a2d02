// Loading tokenizer.json, and the public Tokenizer API.
#include "runtime/tokenizer.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/error.hpp"
#include "runtime/tokenizer_impl.hpp"
#include "runtime/utf8.hpp"

namespace reach {

namespace {

using nlohmann::json;

const char* const supported_models =
    "reach supports BPE tokenizers: byte-level BPE (GPT-2, Llama 3, SmolLM2, Qwen2) and SentencePiece-style "
    "BPE with byte fallback (Llama 2, Mistral)";

// The GPT-2 regex that ByteLevel uses when use_regex is true.
const char* const gpt2_pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

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
  bool flag(const json& j, const char* key, bool fallback) const {
    if (!j.contains(key) || j.at(key).is_null()) return fallback;
    return j.at(key).get<bool>();
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
    for (const auto& [tok, id] : vocab.items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        fail("model.vocab[\"" + tok + "\"]", "expected a non-negative integer id");
      bpe.vocab[tok] = id.get<int32_t>();
    }
    auto id_of = [&](const std::string& tok, size_t i) {
      auto it = bpe.vocab.find(tok);
      if (it == bpe.vocab.end()) fail("model.merges[" + std::to_string(i) + "]", "token \"" + tok + "\" is not in the vocab");
      return it->second;
    };
    const json& merges = m.contains("merges") ? m["merges"] : json::array();
    if (!merges.is_array()) fail("model.merges", "expected an array");
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
    bpe.byte_fallback = flag(m, "byte_fallback", false);
    bpe.fuse_unk = flag(m, "fuse_unk", false);
    bpe.ignore_merges = flag(m, "ignore_merges", false);
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

  void normalizer(const json& j, const std::string& where) {
    if (j.is_null()) return;
    std::string type = type_of(j, where);
    NormalizerStep s;
    if (type == "Sequence") {
      const json& list = need(j, "normalizers", where);
      for (size_t i = 0; i < list.size(); ++i) normalizer(list[i], where + ".normalizers[" + std::to_string(i) + "]");
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
      s.left = flag(j, "strip_left", false);
      s.right = flag(j, "strip_right", false);
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

  void pre_tokenizer(const json& j, const std::string& where) {
    if (j.is_null()) return;
    std::string type = type_of(j, where);
    PreTokenizerStep s;
    if (type == "Sequence") {
      const json& list = need(j, "pretokenizers", where);
      for (size_t i = 0; i < list.size(); ++i)
        pre_tokenizer(list[i], where + ".pretokenizers[" + std::to_string(i) + "]");
      return;
    } else if (type == "Split") {
      s.kind = PreTokenizerStep::split;
      s.pattern = pattern(need(j, "pattern", where), where + ".pattern");
      s.behavior = behavior(str(j, "behavior", where), where);
      s.invert = flag(j, "invert", false);
    } else if (type == "ByteLevel") {
      s.kind = PreTokenizerStep::byte_level;
      s.add_prefix_space = flag(j, "add_prefix_space", true);
      if (flag(j, "use_regex", true)) s.pattern = gpt2_regex(where);
    } else if (type == "Digits") {
      s.kind = PreTokenizerStep::split;
      s.pattern = regex("\\p{N}", false, where);
      s.behavior = flag(j, "individual_digits", false) ? SplitBehavior::isolated : SplitBehavior::contiguous;
    } else if (type == "Whitespace") {
      s.kind = PreTokenizerStep::split;
      s.pattern = regex("\\w+|[^\\w\\s]+", false, where);
      s.behavior = SplitBehavior::removed;
      s.invert = true;
    } else if (type == "Punctuation") {  // Rust: is_ascii_punctuation || Unicode P*, one match per character
      s.kind = PreTokenizerStep::split;
      s.pattern = regex("[\\p{P}!-/:-@\\[-`{-~]", false, where);
      s.behavior = behavior(j.value("behavior", std::string("Isolated")), where);
    } else if (type == "WhitespaceSplit") {
      s.kind = PreTokenizerStep::split;
      s.pattern = regex("\\s+", false, where);
      s.behavior = SplitBehavior::removed;
    } else if (type == "Metaspace") {
      s.kind = PreTokenizerStep::metaspace;
      metaspace_options(j, where, s.replacement, s.prepend);
      s.split_on_replacement = flag(j, "split", true);
    } else {
      unsupported(where, type, "Sequence, Split, ByteLevel, Digits, Metaspace, Punctuation, Whitespace, WhitespaceSplit");
    }
    t_.pre_tokenizer.push_back(std::move(s));
  }

  void metaspace_options(const json& j, const std::string& where, std::string& replacement,
                         PreTokenizerStep::Prepend& prepend) const {
    replacement = j.contains("replacement") ? str(j, "replacement", where) : "\xE2\x96\x81";
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      std::string p = j["prepend_scheme"].get<std::string>();
      if (p == "always") prepend = PreTokenizerStep::always;
      else if (p == "first") prepend = PreTokenizerStep::first;
      else if (p == "never") prepend = PreTokenizerStep::never;
      else fail(where + ".prepend_scheme", "unknown value \"" + p + "\"");
    } else {  // older files: add_prefix_space
      prepend = flag(j, "add_prefix_space", true) ? PreTokenizerStep::always : PreTokenizerStep::never;
    }
  }

  std::shared_ptr<Regex> gpt2_regex(const std::string& where) {
    if (!gpt2_) gpt2_ = regex(gpt2_pattern, false, where);
    return gpt2_;
  }

  void decoder(const json& j, const std::string& where) {
    if (j.is_null()) return;
    t_.has_decoder = true;
    std::string type = type_of(j, where);
    DecoderStep s;
    if (type == "Sequence") {
      const json& list = need(j, "decoders", where);
      for (size_t i = 0; i < list.size(); ++i) decoder(list[i], where + ".decoders[" + std::to_string(i) + "]");
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
      s.text = str(j, "content", where);
      s.start = j.value("start", size_t{0});
      s.stop = j.value("stop", size_t{0});
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

  void post_processor(const json& j, const std::string& where) {
    if (j.is_null()) return;
    std::string type = type_of(j, where);
    if (type == "Sequence") {
      const json& list = need(j, "processors", where);
      for (size_t i = 0; i < list.size(); ++i)
        post_processor(list[i], where + ".processors[" + std::to_string(i) + "]");
    } else if (type == "ByteLevel") {
      // offsets only
    } else if (type == "TemplateProcessing") {
      const json& single = need(j, "single", where);
      const json& specials = j.contains("special_tokens") ? j["special_tokens"] : json::object();
      bool seen_sequence = false;
      for (const json& item : single) {
        if (item.contains("Sequence")) {
          seen_sequence = true;
          continue;
        }
        std::string name = str(need(item, "SpecialToken", where + ".single"), "id", where + ".single");
        if (!specials.contains(name)) fail(where + ".special_tokens", "no entry for \"" + name + "\"");
        for (const json& id : need(specials[name], "ids", where + ".special_tokens." + name))
          (seen_sequence ? t_.suffix : t_.prefix).push_back(id.get<int32_t>());
      }
    } else if (type == "RobertaProcessing" || type == "BertProcessing") {
      const json& cls = need(j, "cls", where);
      const json& sep = need(j, "sep", where);
      t_.prefix.push_back(cls.at(1).get<int32_t>());
      t_.suffix.push_back(sep.at(1).get<int32_t>());
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
      const json& id = need(e, "id", where);
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        fail(where + ".id", "expected a non-negative integer");
      a.id = id.get<int32_t>();
      a.content = str(e, "content", where);
      a.special = flag(e, "special", false);
      a.lstrip = flag(e, "lstrip", false);
      a.rstrip = flag(e, "rstrip", false);
      a.single_word = flag(e, "single_word", false);
      a.normalized = flag(e, "normalized", !a.special);
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

void finish(TokenizerImpl& t) {
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
  t.raw_added.build();
  t.normalized_added.build();

  if (!t.prefix.empty()) t.bos = t.prefix.front();
  else t.bos = first_known(t, {"<|begin_of_text|>", "<s>", "<bos>", "<|startoftext|>", "<|endoftext|>"});
  if (!t.suffix.empty()) t.eos = t.suffix.back();
  else
    t.eos = first_known(t, {"<|end_of_text|>", "</s>", "<eos>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>",
                            "<|end|>"});
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view text, const std::string& origin) {
  auto impl = std::make_shared<TokenizerImpl>();
  impl->origin = origin;
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw Error(ErrorCode::format, origin + ": malformed JSON (" + e.what() +
                                       "); replace it with the tokenizer.json of the model's Hugging Face repository");
  }
  try {
    if (!j.is_object()) throw Error(ErrorCode::format, origin + ": expected a JSON object at the top level");
    Loader l(*impl, origin);
    l.model(j.contains("model") ? j["model"] : json());
    l.added_tokens(j.value("added_tokens", json::array()));
    l.normalizer(j.value("normalizer", json()), "normalizer");
    l.pre_tokenizer(j.value("pre_tokenizer", json()), "pre_tokenizer");
    l.post_processor(j.value("post_processor", json()), "post_processor");
    l.decoder(j.value("decoder", json()), "decoder");
  } catch (const json::exception& e) {  // a key of the wrong type somewhere
    throw Error(ErrorCode::format, origin + ": unexpected content: " + e.what());
  }
  finish(*impl);
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::load(const std::filesystem::path& file) {
  std::error_code ec;
  std::filesystem::path path = file;
  if (std::filesystem::is_directory(path, ec)) path /= "tokenizer.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::string reason = std::strerror(errno);
    std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    throw Error(ErrorCode::io, "cannot open tokenizer file " + path.string() + " (" + reason +
                                   "); copy tokenizer.json from the model's Hugging Face repository into " +
                                   dir.string());
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(ErrorCode::io, "cannot read tokenizer file " + path.string());
  return from_json(ss.str(), path.string());
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
