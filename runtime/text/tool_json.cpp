// Python's json.dumps layout for the templates' tojson (see tool_json.hpp).
#include "runtime/text/tool_json.hpp"

#include "base/error.hpp"
#include "runtime/formats/json_parse.hpp"

namespace reach {

namespace {

// A tool's schema nests a few levels; the bound keeps a hostile one from recursing deep when dumped.
constexpr int kMaxToolDepth = 48;

void dump(const nlohmann::ordered_json& v, std::string& out, int indent, int level) {
  // Between items: ", " on one line; ",\n" and the next level's indent with indent >= 0.
  auto newline = [&](int at) {
    if (indent >= 0) out.append("\n").append(size_t(indent) * size_t(at), ' ');
  };
  const char* sep = indent >= 0 ? "," : ", ";
  if (v.is_object() && !v.empty()) {
    out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += sep;
      first = false;
      newline(level + 1);
      out += nlohmann::ordered_json(it.key()).dump(-1, ' ', false);
      out += ": ";
      dump(it.value(), out, indent, level + 1);
    }
    newline(level);
    out += '}';
  } else if (v.is_array() && !v.empty()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += sep;
      newline(level + 1);
      dump(v[i], out, indent, level + 1);
    }
    newline(level);
    out += ']';
  } else {
    // Scalars and empty containers ("{}", "[]"): nlohmann writes strings (ensure_ascii off), integers
    // and shortest round-trip floats as Python does ("1.0", "1e-05", "\u001f").
    out += v.dump(-1, ' ', false);
  }
}

}  // namespace

std::string python_json(const nlohmann::ordered_json& value, int indent) {
  std::string out;
  dump(value, out, indent, 0);
  return out;
}

nlohmann::ordered_json parse_tool_json(std::string_view text, const std::string& what) {
  try {
    (void)parse_json_bounded(text, kMaxToolDepth, size_t(1) << 20);
    return nlohmann::ordered_json::parse(text);
  } catch (const JsonTooLarge& e) {
    throw Error(ErrorCode::invalid_argument, what + " " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::invalid_argument, what + " is not valid JSON: " + e.what());
  }
}

}  // namespace reach
