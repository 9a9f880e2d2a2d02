#pragma once
// JSON as the chat templates write it: transformers' tojson filter is Python's json.dumps(x,
// ensure_ascii=False) (", " and ": " between items, keys in their given order, non-ASCII text as it
// is), which differs from nlohmann's compact dump.  Tools and tool-call arguments are written so.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace reach {

// json.dumps(value, ensure_ascii=False), or with indent >= 0 json.dumps(value, ensure_ascii=False,
// indent=indent) (items on their own lines, "," and ": " between them; Llama 3.1's tojson(indent=4)).
// ascii: json.dumps's default ensure_ascii=True (non-ASCII text as \uXXXX escapes).
std::string python_json(const nlohmann::ordered_json& value, int indent = -1, bool ascii = false);

// Python's str() of the parsed value (SmolLM3's template writes each tool with `tool | string`): dicts
// as {'key': value}, True / False / None, strings in repr quotes with repr's escapes.  Which characters
// repr escapes as not printable follows str.isprintable for the ASCII and Latin-1 ranges and the common
// spaces and format characters above them (U+1680, U+2000..U+200F, U+2028..U+202F, U+205F..U+206F,
// U+3000, U+FEFF); other rare ones (unassigned code points, private use) are written as they are.
std::string python_str(const nlohmann::ordered_json& value);

// A tool's JSON or a call's arguments, parsed with their keys in order (bounded as untrusted input).
// Throws Error(invalid_argument) "`what`: ..." when the text is not JSON or nests too deep.
nlohmann::ordered_json parse_tool_json(std::string_view text, const std::string& what);

}  // namespace reach
