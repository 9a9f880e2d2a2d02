#include "runtime/json_parse.hpp"

#include <string>

namespace reach {

JsonTooDeep::JsonTooDeep(int limit)
    : std::runtime_error("nests deeper than " + std::to_string(limit) + " levels"), limit_(limit) {}

nlohmann::json parse_json_bounded(std::string_view text, int max_depth) {
  return nlohmann::json::parse(text.begin(), text.end(), [max_depth](int depth, nlohmann::json::parse_event_t,
                                                                      nlohmann::json&) {
    if (depth > max_depth) throw JsonTooDeep(max_depth);
    return true;
  });
}

}  // namespace reach
