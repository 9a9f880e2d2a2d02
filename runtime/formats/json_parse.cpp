#include "runtime/formats/json_parse.hpp"

#include <string>

namespace reach {

nlohmann::json parse_json_bounded(std::string_view text, int max_depth, size_t max_values) {
  size_t values = 0;
  using Event = nlohmann::json::parse_event_t;
  return nlohmann::json::parse(text.begin(), text.end(), [&](int depth, Event event, nlohmann::json&) {
    if (depth > max_depth) throw JsonTooLarge("nests deeper than " + std::to_string(max_depth) + " levels");
    // Every value is announced once: as a scalar, or when its array / object starts.
    if ((event == Event::value || event == Event::array_start || event == Event::object_start) &&
        ++values > max_values)
      throw JsonTooLarge("holds more than " + std::to_string(max_values) + " values");
    return true;
  });
}

}  // namespace reach
