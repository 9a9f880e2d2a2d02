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

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const reach::Tokenizer tok =
        reach::Tokenizer::from_json(std::string_view(reinterpret_cast<const char*>(data), size));
    reach::fuzz::exercise_tokenizer(tok);
  } catch (const reach::Error&) {
    // Rejected (or an id refused) with a message: what a hostile tokenizer.json should get.
  }
  return 0;
}
