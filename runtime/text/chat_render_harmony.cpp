// gpt-oss's tools as its template writes them into the developer message: the "functions" namespace,
// each tool a TypeScript-like signature (the template's render_tool_namespace and
// render_typescript_type macros, byte for byte, their stray newlines and indentation included).
#include <string>

#include "base/error.hpp"
#include "runtime/text/chat_render.hpp"
#include "runtime/text/tool_json.hpp"

namespace reach::chat {

namespace {

using ojson = nlohmann::ordered_json;

// Jinja's truth of a value: null, false, 0, "" and empty lists and objects are false.
bool truthy(const ojson& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

// spec.key as Jinja reads it from a mapping: null where it is absent (undefined, false as null is).
const ojson& field(const ojson& spec, const char* key) {
  static const ojson none;
  return spec.is_object() && spec.contains(key) ? spec[key] : none;
}

bool type_is(const ojson& spec, const char* name) {
  const ojson& t = field(spec, "type");
  return t.is_string() && t.get<std::string>() == name;
}

// str() of a value where the template joins or concatenates it: strings as they are.
std::string text_of(const ojson& v) { return v.is_string() ? v.get<std::string>() : python_str(v); }

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool required(const ojson& spec, const std::string& name) {
  const ojson& r = field(spec, "required");
  if (!r.is_array()) return false;
  for (const ojson& x : r)
    if (x.is_string() && x.get<std::string>() == name) return true;
  return false;
}

// The template's "string" + default (concatenation: Jinja raises for a value that is not a string).
std::string concat_default(const ojson& d, const std::string& origin) {
  if (!d.is_string()) raise(origin, "a default of an enum or oneOf parameter that is not a string (the template raises)");
  return d.get<std::string>();
}

// render_typescript_type.
std::string ts_type(const ojson& spec) {
  const ojson& type = field(spec, "type");
  if (type_is(spec, "array")) {
    std::string out;
    if (spec.contains("items")) {
      const ojson& items = spec["items"];
      if (type_is(items, "string")) out = "string[]";
      else if (type_is(items, "number") || type_is(items, "integer")) out = "number[]";
      else if (type_is(items, "boolean")) out = "boolean[]";
      else {
        const std::string inner = ts_type(items);
        out = inner == "object | object" || code_points(inner) > 50 ? "any[]" : inner + "[]";
      }
    } else {
      out = "any[]";
    }
    if (truthy(field(spec, "nullable"))) out += " | null";
    return out;
  }
  if (type.is_array() && !type.empty()) {
    std::string out;
    for (size_t i = 0; i < type.size(); ++i) out += (i ? " | " : "") + text_of(type[i]);
    return out;
  }
  if (truthy(field(spec, "oneOf"))) {
    // The template's test for object variants sets its flag inside the loop, where Jinja's scoping
    // loses it: every variant is written.
    const ojson& variants = spec["oneOf"];
    std::string out;
    for (size_t i = 0; i < variants.size(); ++i) {
      const ojson& v = variants[i];
      out += ts_type(v);
      if (truthy(field(v, "description"))) out += "// " + text_of(v["description"]);
      if (v.is_object() && v.contains("default")) out += std::string(20, ' ') + "// default: " + python_json(v["default"]);
      if (i + 1 < variants.size()) out += " | \n";
    }
    return out;
  }
  if (type_is(spec, "string")) {
    const ojson& e = field(spec, "enum");
    if (truthy(e)) {
      std::string out = "\"";
      for (size_t i = 0; i < e.size(); ++i) out += (i ? "\" | \"" : "") + text_of(e[i]);
      return out + "\"";
    }
    return truthy(field(spec, "nullable")) ? "string | null" : "string";
  }
  if (type_is(spec, "number") || type_is(spec, "integer")) return "number";
  if (type_is(spec, "boolean")) return "boolean";
  if (type_is(spec, "object")) {
    const ojson& props = field(spec, "properties");
    if (!truthy(props) || !props.is_object()) return "object";
    std::string out = "{\n";
    size_t i = 0;
    for (auto it = props.begin(); it != props.end(); ++it, ++i) {
      out += it.key() + (required(spec, it.key()) ? "" : "?") + ": \n" + std::string(16, ' ') + ts_type(it.value());
      if (i + 1 < props.size()) out += ", ";
    }
    return out + "}";
  }
  return "any";
}

}  // namespace

std::string harmony_tools(std::span<const ChatTool> tools, const std::string& origin) {
  std::string out = "## functions\n\nnamespace functions {\n\n";
  for (const ChatTool& tool : tools) {
    const ojson entry = parse_tool_json(tool.json, origin + ": tool '" + tool.name + "'");
    const ojson& fn = entry.contains("function") ? entry["function"] : entry;
    // The template writes "// " + description and raises without one; a tool without a description is
    // written without the comment line, as openai_harmony's renderer writes it.
    if (fn.contains("description") && fn["description"].is_string())
      out += "// " + fn["description"].get<std::string>() + "\n";
    out += "type " + tool.name + " = ";
    const ojson& params = field(fn, "parameters");
    const ojson& props = field(params, "properties");
    if (!truthy(params) || !truthy(props) || !props.is_object()) {
      out += "() => any;\n\n";
      continue;
    }
    out += "(_: {\n";
    for (auto it = props.begin(); it != props.end(); ++it) {
      const ojson& spec = it.value();
      if (truthy(field(spec, "description"))) out += "// " + text_of(spec["description"]) + "\n";
      out += it.key() + (required(params, it.key()) ? "" : "?") + ": " + ts_type(spec);
      if (spec.is_object() && spec.contains("default")) {
        if (truthy(field(spec, "enum")))
          out += ", // default: " + concat_default(spec["default"], origin);
        else if (truthy(field(spec, "oneOf")))
          out += "// default: " + concat_default(spec["default"], origin);
        else
          out += ", // default: " + python_json(spec["default"]);
      }
      out += ",\n";
    }
    out += "}) => any;\n\n";
  }
  return out + "} // namespace functions";
}

}  // namespace reach::chat
