#pragma once
// The request field response_format: {"type": "text"} (no constraint), {"type": "json_object"} (any
// JSON object) or {"type": "json_schema", "json_schema": {"name", "schema", "strict", "description"}};
// with either JSON type, the extension "whitespace": "compact" (the default) or "pretty" (newlines and
// indentation, bounded: runtime/constrain/json_grammar.hpp).
// The grammar it gives is what the sampler follows (runtime/constrain/json_grammar.hpp lists the schema
// keywords it supports; any other is a 400 that names it and where it is).
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/constrain/json_grammar.hpp"

namespace reach::server {

// `value` is the parsed field; `body_text` the whole request body, read again in order so that the
// schema's properties keep the order they were written in.  Null for "text".  Throws ApiError (400)
// naming the field at fault.
std::shared_ptr<const JsonGrammar> parse_response_format(const nlohmann::json& value, const std::string& body_text);

}  // namespace reach::server
