#pragma once
// Hugging Face tokenizer.json, BPE models only:
//  - byte-level BPE (GPT-2, Llama 3, SmolLM2, Qwen2): ByteLevel / Split / Digits /
//    Metaspace pre-tokenizers, regexes run by PCRE2 exactly as written;
//  - SentencePiece-style BPE with byte fallback (Llama 2, Mistral).
// Token ids match the `tokenizers` package (checked against it by
// tests/test_tokenizer.cpp on data from tools/gen_tokenizer_tests.py).
// GGUF files' tokenizer.ggml.* metadata ("gpt2" byte-level BPE, "llama"
// SentencePiece by scores) builds the same state (runtime/text/tokenizer_gguf.cpp).
//
// A Tokenizer is cheap to copy (shared immutable state) and safe to use from
// several threads at once.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace reach {

struct TokenizerImpl;  // runtime/text/tokenizer_impl.hpp
class GgufFile;       // runtime/formats/gguf.hpp
class GgufMetaSink;   // runtime/formats/gguf_meta_sink.hpp

class Tokenizer {
 public:
  // `file` is a tokenizer.json or a directory holding one; a tokenizer_config.json beside it gives
  // chat_template().  Throws reach::Error: io (missing / unreadable), format (malformed JSON, missing
  // or bad keys, bad regex), unsupported (WordPiece, Unigram, ... models).
  static Tokenizer load(const std::filesystem::path& file);
  // Same from the JSON text; `origin` names it in error messages.
  static Tokenizer from_json(std::string_view json_text, const std::string& origin = "tokenizer.json");
  // From a GGUF file's tokenizer.ggml.* metadata (runtime/text/tokenizer_gguf.cpp).
  static Tokenizer from_gguf(const GgufFile& file);
  // Writes this tokenizer as tokenizer.ggml.* metadata (for GGUF files reach writes).  `rows`: the
  // embedding's rows when it has more than the tokenizer has ids (padded vocabularies); the token
  // list is padded to them with unused placeholders, as llama.cpp's converter does, since llama.cpp
  // takes the embedding's shape from the list's length.
  void to_gguf(GgufMetaSink& sink, size_t rows = 0) const;

  // Invalid UTF-8 in `text` is replaced by U+FFFD first.  add_special adds
  // what the post-processor adds (BOS for Llama, <s> ... </s> for RoBERTa).
  std::vector<int32_t> encode(std::string_view text, bool add_special = true) const;
  // skip_special drops special added tokens (BOS, EOS, <|im_start|>, ...).
  // Ill-formed byte sequences become U+FFFD, as in `tokenizers`.
  std::string decode(std::span<const int32_t> ids, bool skip_special = true) const;

  std::string token_text(int32_t id) const;  // raw vocab string, "" for an unknown id
  std::optional<int32_t> find(std::string_view token) const;
  int32_t vocab_size() const;  // max id + 1 over the vocab and the added tokens
  bool is_special(int32_t id) const;
  // The bytes each id appends to the text in the middle of a reply, as the decoder chain writes them
  // (ByteLevel characters back to bytes, U+2581 to a space, <0xNN> to its byte; a Strip after Fuse
  // only touches the start of the whole text, so not here).  Special tokens, and ids without a
  // vocab entry, get no bytes (runtime/text/token_bytes.cpp).
  std::vector<std::string> token_bytes() const;
  // Expires when the last copy of this tokenizer is gone: caches of tables derived from it key on it.
  std::weak_ptr<const void> lifetime() const { return impl_; }

  // Best guesses (post-processor, then well-known names of added tokens);
  // callers may override them from config.json / generation_config.json.
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  // What encode(..., add_special = true) puts before / after the text.
  std::span<const int32_t> special_prefix() const;
  std::span<const int32_t> special_suffix() const;
  bool adds_bos() const { return !special_prefix().empty(); }
  bool adds_eos() const { return !special_suffix().empty(); }
  // The model's Jinja chat template: a GGUF file's tokenizer.chat_template, or for load() the
  // chat_template of tokenizer_config.json beside tokenizer.json; empty when there is none.
  std::string_view chat_template() const;

  // Incremental detokenizer for generation: push() returns the text that is
  // final so far and never a split UTF-8 character; flush() returns the rest.
  class StreamDecoder {
   public:
    explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = true);
    std::string push(int32_t id);
    std::string flush();
    void reset();

   private:
    std::shared_ptr<const TokenizerImpl> impl_;
    bool skip_special_;
    std::vector<int32_t> ids_;  // context window: the last emitted token(s) + pending ones
    std::string prefix_;        // decode of ids_[0, prefix_count_)
    size_t prefix_count_ = 0;
  };

 private:
  explicit Tokenizer(std::shared_ptr<const TokenizerImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const TokenizerImpl> impl_;
};

}  // namespace reach
