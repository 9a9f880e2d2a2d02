#include "runtime/config/config_reader.hpp"

namespace reach::config_detail {

std::string describe_value(const json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  std::string d = v.dump();
  if (d.size() > 40) d = d.substr(0, 37) + "...";
  const char* t = v.is_string() ? "a string" : v.is_boolean() ? "a boolean" : v.is_null() ? "null" : "a number";
  return std::string(t) + " (" + d + ")";
}

std::vector<int32_t> parse_token_ids(const Reader& r, const char* key, int64_t vocab_size) {
  std::vector<int32_t> out;
  const json* v = r.find(key);
  if (!v) return out;
  auto one = [&](const json& e) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= vocab_size)
      r.fail(ErrorCode::format, std::string("'") + key + "' holds " + describe_value(e) +
                                    ", expected token ids in [0, vocab_size=" + std::to_string(vocab_size) + ")");
    out.push_back(static_cast<int32_t>(e.get<int64_t>()));
  };
  if (v->is_array()) {
    for (const auto& e : *v) one(e);
  } else if (v->is_number()) {
    one(*v);
  } else {
    r.wrong_type(key, *v, "a token id, a list of token ids, or null");
  }
  return out;
}

}  // namespace reach::config_detail
