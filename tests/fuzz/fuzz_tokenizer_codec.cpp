// Encode / decode (runtime/text/tokenizer_encode.cpp, tokenizer_decode.cpp) of
// arbitrary text and ids with fixed, valid tokenizers of every kind reach
// supports (tests/data/tokenizer: byte-level BPE with and without regex
// splits, SentencePiece-style with byte fallback, Metaspace, normalizers).
//
// Input: byte 0 picks the tokenizer, byte 1 the flags; the rest is the text to
// encode, and read again as little-endian int32 ids to decode.
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "runtime/text/tokenizer.hpp"

#ifndef REACH_SOURCE_ROOT
#error "REACH_SOURCE_ROOT must name the source tree (tests/data/tokenizer)"
#endif

namespace {

constexpr const char* kTokenizers[] = {"gpt2_bpe", "roberta_bpe", "llama3_bpe", "smollm_bpe",
                                       "edge_bpe", "llama2_sp", "mistral_sp",  "edge_sp"};
constexpr size_t kCount = sizeof kTokenizers / sizeof kTokenizers[0];

const std::vector<reach::Tokenizer>& tokenizers() {
  static const std::vector<reach::Tokenizer> all = [] {
    std::string root = REACH_SOURCE_ROOT;
    if (const char* env = std::getenv("REACH_SOURCE_ROOT")) root = env;
    std::vector<reach::Tokenizer> v;
    for (const char* name : kTokenizers)
      v.push_back(reach::Tokenizer::load(root + "/tests/data/tokenizer/" + name + ".json"));   // throws: a setup error
    return v;
  }();
  return all;
}

void check_ids(const std::vector<int32_t>& ids, int32_t vocab) {
  for (int32_t id : ids)
    if (id < 0 || id >= vocab) __builtin_trap();   // encode only emits ids of the vocabulary
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const reach::Tokenizer& tok = tokenizers()[data[0] % kCount];
  const uint8_t flags = data[1];
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  const int32_t vocab = tok.vocab_size();
  try {
    // Text -> ids -> text.
    const std::vector<int32_t> ids = tok.encode(text, flags & 1);
    check_ids(ids, vocab);
    const std::string back = tok.decode(ids, flags & 2);
    if (flags & 4) check_ids(tok.encode(back, false), vocab);

    // The same bytes as ids: negative, huge and special ids included.
    std::vector<int32_t> raw((size - 2) / 4);
    if (!raw.empty()) std::memcpy(raw.data(), data + 2, raw.size() * 4);
    if (flags & 8)   // mostly in range, so the decoders see real tokens
      for (int32_t& id : raw) id = static_cast<int32_t>(static_cast<uint32_t>(id) % static_cast<uint32_t>(vocab + 8));
    (void)tok.decode(raw, flags & 2);
    reach::Tokenizer::StreamDecoder stream(tok, flags & 16);
    std::string streamed;
    for (int32_t id : raw) streamed += stream.push(id);
    streamed += stream.flush();
    for (int32_t id : raw) {
      (void)tok.token_text(id);
      (void)tok.is_special(id);
    }
  } catch (const reach::Error&) {
    // A refusal with a message is fine; a crash, hang or other exception is not.
  }
  return 0;
}
