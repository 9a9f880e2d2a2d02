// tokenizer.json (runtime/tokenizer*): Tokenizer::from_json on arbitrary bytes;
// a tokenizer that loads then encodes and decodes a few fixed texts and ids,
// so parameters that only bite at use (a loop that does not advance) show too.
#include <algorithm>
#include <climits>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "runtime/text/tokenizer.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace {

constexpr std::string_view kTexts[] = {
    "", " ", "Hello, world!", "  two  spaces\n\tand tabs ", "123 4567 ünïcödé 日本語 🙂",
    "<s></s><|endoftext|>",
    "\xff\xfe invalid \xc3", "▁metaspace▁text",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const reach::Tokenizer tok =
        reach::Tokenizer::from_json(std::string_view(reinterpret_cast<const char*>(data), size));
    const int32_t vocab = tok.vocab_size();
    if (vocab < 0) __builtin_trap();
    for (std::string_view text : kTexts) {
      for (bool add_special : {false, true}) {
        const std::vector<int32_t> ids = tok.encode(text, add_special);
        for (int32_t id : ids)
          if (id < 0 || id >= vocab) __builtin_trap();   // encode only emits ids of the vocabulary
        (void)tok.decode(ids, true);
        (void)tok.decode(ids, false);
      }
    }
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < vocab && id < 64; ++id) ids.push_back(id);
    for (int64_t id : {int64_t{-1}, int64_t{vocab}, int64_t{vocab} + 1, int64_t{INT_MAX}, int64_t{INT_MIN}})
      if (id <= INT_MAX) ids.push_back(static_cast<int32_t>(id));
    (void)tok.decode(ids, false);
    reach::Tokenizer::StreamDecoder stream(tok, false);
    for (int32_t id : ids) (void)stream.push(id);
    (void)stream.flush();
    (void)tok.bos_id();
    (void)tok.eos_id();
  } catch (const reach::Error&) {
    // Rejected (or an id refused) with a message: what a hostile tokenizer.json should get.
  }
  return 0;
}
