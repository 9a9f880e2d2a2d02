#pragma once
// Helpers of the tokenizer suites (tokenizer, tokenizer_gguf, tokenizer_hostile):
// the oracle fixtures in tests/data/tokenizer and how ids and texts are shown
// in failure messages.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace reach::test {

// tests/data/tokenizer: <name>.json tokenizers and <name>.expect.json ids from the tokenizers package.
std::filesystem::path tokenizer_data_dir();
nlohmann::json read_json(const std::filesystem::path& p);
// "[1,2,3]"
std::string show_ids(const std::vector<int32_t>& ids);
// A string as a JSON literal, so control characters and invalid UTF-8 print visibly.
std::string json_quoted(const std::string& s);

}  // namespace reach::test
