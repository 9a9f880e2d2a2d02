#pragma once
// A JSON Schema (a subset) compiled into the grammar that constrained sampling follows
// (runtime/constrain/json_state.hpp walks it byte by byte).
//
// Supported keywords: type (one or a list: object, array, string, number, integer, boolean, null),
// properties, required, additionalProperties (false, true or absent), items, minItems, maxItems,
// enum, const, anyOf, $ref to "#/$defs/NAME" or "#/definitions/NAME", $defs, definitions; description,
// title, $schema, $id, $comment, examples and default are ignored.  Any other keyword is refused,
// naming the keyword and where it is (a JSON pointer), rather than producing output that could break it.
//
// What the grammar produces, by design:
//  - an object with properties writes them in the schema's order; a property not in `required` may be
//    left out; no other keys are written, whatever additionalProperties says (valid either way);
//    an object schema without properties takes any keys with any JSON values;
//  - alternatives (a list of types, anyOf) are told apart by their first byte ({ [ " digit t f n):
//    two alternatives that could start alike (two object schemas) are refused, except where one
//    contains the other (integer within number, a string enum within string);
//  - numbers: at most 15 digits before and after the point and 2 in the exponent; integers: no point,
//    no exponent; strings: any UTF-8, escapes \" \\ \/ \b \f \n \r \t and \uXXXX except \uD800-\uDFFF
//    (lone surrogates are not text);
//  - whitespace by JsonWhitespace: compact (the default) allows one space after ':' and ',' and nothing
//    else; pretty also allows, after '{' '[' ',' and before '}' ']', a newline and then at most
//    kIndentPerLevel spaces per open object or array.  Nothing before or after the document, and at most
//    kMaxNesting open objects and arrays: a model cannot spend its tokens on whitespace or brackets (at
//    temperature 1 a looser rule let a small model write gaps until it ran out of tokens).
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace reach {

constexpr int kIndentPerLevel = 4;
constexpr int kMaxNesting = 24;
constexpr size_t kMaxProperties = 64;   // per object schema (and values per enum)

struct SchemaNode {
  enum Kind : uint8_t { object, array, string, number, integer, literal, alternatives };
  Kind kind = object;
  // object: the properties in schema order, their keys as JSON text ("\"name\"").
  struct Property {
    std::string key;
    int32_t value = 0;
    bool required = false;
  };
  std::vector<Property> properties;
  bool any_keys = false;                  // no properties listed: any keys, any values
  std::vector<uint8_t> next_required;     // [i]: the first required property at or after i (size n + 1)
  // array
  int32_t items = 0;
  uint32_t min_items = 0, max_items = UINT32_MAX;
  // literal: the allowed values as compact JSON text (enum, const, true, false, null); object: the keys
  std::vector<std::string> literals;
  // alternatives: the node each first byte starts, -1 for none
  std::array<int32_t, 256> by_first_byte{};
};

// Where the document may hold whitespace (see above).  Tool-call arguments follow the same rule.
enum class JsonWhitespace : uint8_t { compact, pretty };
// "compact" or "pretty"; anything else throws Error(invalid_argument) naming the value and the choices.
JsonWhitespace json_whitespace_from_name(const std::string& name);

class JsonGrammar {
 public:
  // Throws Error(invalid_argument): "JSON schema: <what> at <pointer>: <what to do>".
  static std::shared_ptr<const JsonGrammar> from_schema(const nlohmann::ordered_json& schema,
                                                        JsonWhitespace whitespace = JsonWhitespace::compact);
  // Parses the text first (an error names the JSON syntax problem); 64 levels at most.
  static std::shared_ptr<const JsonGrammar> from_schema_text(const std::string& schema_json,
                                                             JsonWhitespace whitespace = JsonWhitespace::compact);
  // Any JSON object (OpenAI's response_format json_object).
  static std::shared_ptr<const JsonGrammar> any_object(JsonWhitespace whitespace = JsonWhitespace::compact);

  const SchemaNode& node(int32_t i) const { return nodes_[size_t(i)]; }
  int32_t root() const { return root_; }
  int32_t any() const { return any_; }   // any JSON value: the values of an object without properties
  JsonWhitespace whitespace() const { return whitespace_; }

 private:
  friend class SchemaCompiler;
  std::vector<SchemaNode> nodes_;
  int32_t root_ = 0, any_ = 0;
  JsonWhitespace whitespace_ = JsonWhitespace::compact;
};

}  // namespace reach
