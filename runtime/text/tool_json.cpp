// Python's json.dumps layout for the templates' tojson (see tool_json.hpp).
#include "runtime/text/tool_json.hpp"

#include <cstdint>
#include <cstdio>

#include "base/error.hpp"
#include "runtime/formats/json_parse.hpp"

namespace reach {

namespace {

// A tool's schema nests a few levels; the bound keeps a hostile one from recursing deep when dumped.
constexpr int kMaxToolDepth = 48;

void dump(const nlohmann::ordered_json& v, std::string& out, int indent, int level, bool ascii) {
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
      out += nlohmann::ordered_json(it.key()).dump(-1, ' ', ascii);
      out += ": ";
      dump(it.value(), out, indent, level + 1, ascii);
    }
    newline(level);
    out += '}';
  } else if (v.is_array() && !v.empty()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += sep;
      newline(level + 1);
      dump(v[i], out, indent, level + 1, ascii);
    }
    newline(level);
    out += ']';
  } else {
    // Scalars and empty containers ("{}", "[]"): nlohmann writes strings (ensure_ascii off), integers
    // and shortest round-trip floats as Python does ("1.0", "1e-05", "\u001f").
    out += v.dump(-1, ' ', ascii);
  }
}

// The code point of the UTF-8 sequence at s[i] (n: its length); invalid bytes as themselves.
uint32_t code_point(std::string_view s, size_t i, size_t& n) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  n = c < 0x80 ? 1 : c >> 5 == 6 ? 2 : c >> 4 == 14 ? 3 : c >> 3 == 30 ? 4 : 1;
  if (i + n > s.size()) n = 1;
  if (n == 1) return c;
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = cp << 6 | (b(k) & 0x3F);
  return cp;
}

bool printable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
      (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return false;
  return true;
}

// repr(str): single quotes unless the text holds ' and no ".
std::string python_repr(std::string_view s) {
  const char q = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out(1, q);
  for (size_t i = 0, n = 1; i < s.size(); i += n) {
    const uint32_t cp = code_point(s, i, n);
    char buf[16];
    if (cp == '\\' || cp == uint32_t(q))
      out.append(1, '\\').append(1, char(cp));
    else if (cp == '\n')
      out += "\\n";
    else if (cp == '\r')
      out += "\\r";
    else if (cp == '\t')
      out += "\\t";
    else if (printable(cp))
      out.append(s.substr(i, n));
    else {
      std::snprintf(buf, sizeof buf, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", unsigned(cp));
      out += buf;
    }
  }
  return out += q;
}

void str(const nlohmann::ordered_json& v, std::string& out) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += ", ";
      first = false;
      out += python_repr(it.key());
      out += ": ";
      str(it.value(), out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ", ";
      str(v[i], out);
    }
    out += ']';
  } else if (v.is_string()) {
    out += python_repr(v.get_ref<const std::string&>());
  } else if (v.is_boolean()) {
    out += v.get<bool>() ? "True" : "False";
  } else if (v.is_null()) {
    out += "None";
  } else {
    out += v.dump();  // numbers: as json.dumps writes them, which is Python's repr
  }
}

}  // namespace

std::string python_str(const nlohmann::ordered_json& value) {
  std::string out;
  str(value, out);
  return out;
}

std::string python_json(const nlohmann::ordered_json& value, int indent, bool ascii) {
  std::string out;
  dump(value, out, indent, 0, ascii);
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
