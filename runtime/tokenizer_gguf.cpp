#include <string>

#include "engine/error.hpp"
#include "runtime/gguf.hpp"
#include "runtime/tokenizer.hpp"

namespace reach {

Tokenizer Tokenizer::from_gguf(const GgufFile& file) {
  throw Error(ErrorCode::unsupported, "gguf (" + file.path().string() + "): reading the tokenizer is not available yet");
}

void Tokenizer::to_gguf(GgufMetaSink&) const {
  throw Error(ErrorCode::unsupported, "writing a tokenizer to GGUF metadata is not available yet");
}

}  // namespace reach
