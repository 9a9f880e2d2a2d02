#pragma once
// Parsing untrusted JSON (config.json, tokenizer.json, safetensors headers).
// nlohmann's parser is iterative, but copying, comparing and dumping a value
// recurse once per level: a file of deeply nested arrays would overflow the
// stack later.  And a parsed value costs 16 bytes and often a heap block: a file
// of "[],[],..." takes ~25x its size.  So both are refused while parsing,
// before anything is built.
#include <cstddef>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>

namespace reach {

// Thrown by parse_json_bounded; what(): "nests deeper than N levels" or
// "holds more than N values".
class JsonTooLarge : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws JsonTooLarge beyond max_depth levels (the top-level value is depth 0)
// or max_values values, nlohmann::json::exception when the text is not JSON.
nlohmann::json parse_json_bounded(std::string_view text, int max_depth,
                                  size_t max_values = std::numeric_limits<size_t>::max());

}  // namespace reach
