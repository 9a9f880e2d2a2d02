#pragma once
// Parsing untrusted JSON (config.json, tokenizer.json, safetensors headers).
// nlohmann's parser is iterative, but copying, comparing and dumping a value
// recurse once per level: a file of deeply nested arrays would overflow the
// stack later.  So nesting is refused while parsing, before anything is built.
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>

namespace reach {

// Thrown by parse_json_bounded; what(): "nests deeper than N levels".
class JsonTooDeep : public std::runtime_error {
 public:
  explicit JsonTooDeep(int limit);
  int limit() const { return limit_; }

 private:
  int limit_;
};

// Throws JsonTooDeep beyond max_depth levels (the top-level value is depth 0),
// nlohmann::json::exception when the text is not JSON.
nlohmann::json parse_json_bounded(std::string_view text, int max_depth);

}  // namespace reach
