#include "tests/support/tokenizer_cases.hpp"

#include "tests/support/files.hpp"

namespace reach::test {

std::filesystem::path tokenizer_data_dir() { return source_root() / "tests" / "data" / "tokenizer"; }

nlohmann::json read_json(const std::filesystem::path& p) { return nlohmann::json::parse(read_text(p)); }

std::string show_ids(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

std::string json_quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace reach::test
