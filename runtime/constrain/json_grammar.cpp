#include "runtime/constrain/json_grammar.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "base/error.hpp"
#include "runtime/formats/json_parse.hpp"

namespace reach {

namespace {

// ordered: properties are written in the schema's own order.
using json = nlohmann::ordered_json;

const std::set<std::string, std::less<>> kAnnotations = {"description", "title", "$schema", "$id", "$comment",
                                                         "examples", "default"};
const std::set<std::string, std::less<>> kKeywords = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum", "const",
    "anyOf", "$ref", "$defs", "definitions"};

[[noreturn]] void refuse(const std::string& what, const std::string& where, const std::string& todo) {
  throw Error(ErrorCode::invalid_argument, "JSON schema: " + what + " at " + where + ": " + todo);
}

std::string pointer_part(const std::string& key) {   // JSON pointer escaping: ~ -> ~0, / -> ~1
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string unescape_pointer_part(const std::string& part) {
  std::string out;
  for (size_t i = 0; i < part.size(); ++i) {
    if (part[i] == '~' && i + 1 < part.size() && (part[i + 1] == '0' || part[i + 1] == '1')) {
      out += part[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      out += part[i];
    }
  }
  return out;
}

bool is_integral(const json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return d == double(int64_t(d));
}

bool has_type(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer") return is_integral(v);
  if (type == "boolean") return v.is_boolean();
  return v.is_null();   // "null"
}

constexpr const char* kNumberStart = "-0123456789";

}  // namespace

class SchemaCompiler {
 public:
  SchemaCompiler(const json& root, JsonWhitespace whitespace) : root_(root), g_(std::make_shared<JsonGrammar>()) {
    g_->whitespace_ = whitespace;
    builtins();
  }

  std::shared_ptr<const JsonGrammar> compile_root() {
    g_->root_ = compile(root_, "#");
    return g_;
  }
  std::shared_ptr<const JsonGrammar> any_object() {
    g_->root_ = object_;
    return g_;
  }

 private:
  int32_t add(SchemaNode n) {
    g_->nodes_.push_back(std::move(n));
    return int32_t(g_->nodes_.size() - 1);
  }
  SchemaNode& at(int32_t i) { return g_->nodes_[size_t(i)]; }

  int32_t literal(std::vector<std::string> texts) {
    SchemaNode n;
    n.kind = SchemaNode::literal;
    n.literals = std::move(texts);
    return add(std::move(n));
  }

  // Any JSON value: its string, number, keyword, object and array nodes, told apart by the first byte.
  void builtins() {
    SchemaNode s;
    s.kind = SchemaNode::string;
    string_ = add(s);
    s.kind = SchemaNode::number;
    number_ = add(s);
    s.kind = SchemaNode::integer;
    integer_ = add(s);
    keywords_ = literal({"true", "false", "null"});
    SchemaNode any;
    any.kind = SchemaNode::alternatives;
    g_->any_ = add(any);
    SchemaNode o;
    o.kind = SchemaNode::object;
    o.any_keys = true;
    o.next_required = {0};
    object_ = add(o);
    SchemaNode a;
    a.kind = SchemaNode::array;
    a.items = g_->any_;
    array_ = add(a);
    SchemaNode& table = at(g_->any_);
    table.by_first_byte.fill(-1);
    table.by_first_byte['{'] = object_;
    table.by_first_byte['['] = array_;
    table.by_first_byte['"'] = string_;
    for (const char* c = kNumberStart; *c; ++c) table.by_first_byte[uint8_t(*c)] = number_;
    for (char c : {'t', 'f', 'n'}) table.by_first_byte[uint8_t(c)] = keywords_;
  }

  void check_keywords(const json& s, const std::string& where) {
    for (const auto& [key, value] : s.items()) {
      if (kKeywords.count(key) || kAnnotations.count(key)) continue;
      refuse("the keyword '" + key + "'", where,
             "it is not supported (supported: type, properties, required, additionalProperties, items, minItems, "
             "maxItems, enum, const, anyOf, $ref, $defs); remove it");
    }
  }

  // Keywords besides the annotations, other than `except`.
  bool has_other(const json& s, const char* except) {
    for (const auto& [key, value] : s.items())
      if (key != except && !kAnnotations.count(key) && key != "$defs" && key != "definitions") return true;
    return false;
  }

  int32_t compile(const json& s, const std::string& where) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return g_->any_;
      refuse("the schema false", where, "it accepts no value; remove it");
    }
    if (!s.is_object()) refuse("a schema that is " + std::string(s.type_name()), where, "a schema is an object or a boolean");
    check_keywords(s, where);
    if (s.contains("$ref")) {
      if (has_other(s, "$ref")) refuse("$ref beside other keywords", where, "put the other keywords in the referenced schema");
      if (!s["$ref"].is_string()) refuse("$ref that is not a string", where + "/$ref", "write \"#/$defs/NAME\"");
      return reference(s["$ref"].get<std::string>(), where + "/$ref");
    }
    if (s.contains("anyOf")) {
      if (has_other(s, "anyOf")) refuse("anyOf beside other keywords", where, "move them into each alternative");
      const json& list = s["anyOf"];
      if (!list.is_array() || list.empty()) refuse("anyOf that is not a non-empty array", where + "/anyOf", "list the alternative schemas");
      std::vector<int32_t> alts;
      for (size_t i = 0; i < list.size(); ++i) alts.push_back(compile(list[i], where + "/anyOf/" + std::to_string(i)));
      return alternatives(alts, where + "/anyOf");
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array() && !t.empty()) {
        for (const json& e : t) {
          if (!e.is_string()) refuse("a type that is not a string", where + "/type", "list type names");
          types.push_back(e.get<std::string>());
        }
      } else {
        refuse("type that is neither a name nor a non-empty list of names", where + "/type", "write e.g. \"object\"");
      }
      for (const std::string& name : types)
        if (name != "object" && name != "array" && name != "string" && name != "number" && name != "integer" &&
            name != "boolean" && name != "null")
          refuse("the type '" + name + "'", where + "/type",
                 "the types are object, array, string, number, integer, boolean and null");
    }
    if (s.contains("enum") || s.contains("const")) return enumeration(s, types, where);
    if (types.empty()) {
      if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) types = {"object"};
      else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) types = {"array"};
      else return g_->any_;
    }
    std::vector<int32_t> alts;
    for (const std::string& t : types) {
      if (t == "object") alts.push_back(object(s, where));
      else if (t == "array") alts.push_back(array(s, where));
      else if (t == "string") alts.push_back(string_);
      else if (t == "number") alts.push_back(number_);
      else if (t == "integer") alts.push_back(integer_);
      else if (t == "boolean") alts.push_back(literal({"true", "false"}));
      else alts.push_back(literal({"null"}));
    }
    return alts.size() == 1 ? alts[0] : alternatives(alts, where + "/type");
  }

  int32_t enumeration(const json& s, const std::vector<std::string>& types, const std::string& where) {
    if (s.contains("enum") && s.contains("const")) refuse("enum beside const", where, "use one of them");
    std::vector<json> values;
    std::string at = where + (s.contains("enum") ? "/enum" : "/const");
    if (s.contains("const")) values.push_back(s["const"]);
    else {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) refuse("enum that is not a non-empty array", at, "list the allowed values");
      values.assign(e.begin(), e.end());
    }
    std::vector<std::string> texts;
    for (const json& v : values) {
      const bool typed = types.empty() || std::any_of(types.begin(), types.end(), [&](const std::string& t) { return has_type(v, t); });
      if (!typed) continue;   // the schema's type rules it out anyway
      std::string text = v.dump();
      if (std::find(texts.begin(), texts.end(), text) == texts.end()) texts.push_back(std::move(text));
    }
    if (texts.empty()) refuse("no value of the enum has the schema's type", at, "make the enum and the type agree");
    if (texts.size() > kMaxProperties)
      refuse("an enum of " + std::to_string(texts.size()) + " values", at,
             "at most " + std::to_string(kMaxProperties) + " are supported");
    return literal(std::move(texts));
  }

  int32_t object(const json& s, const std::string& where) {
    bool additional = true;
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (!a.is_boolean())
        refuse("additionalProperties that is a schema", where + "/additionalProperties", "only true or false are supported");
      additional = a.get<bool>();
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      const json& r = s["required"];
      if (!r.is_array()) refuse("required that is not an array", where + "/required", "list the property names");
      for (const json& name : r) {
        if (!name.is_string()) refuse("a required name that is not a string", where + "/required", "list the property names");
        required.insert(name.get<std::string>());
      }
    }
    const int32_t self = add(SchemaNode{});
    SchemaNode n;
    n.kind = SchemaNode::object;
    if (s.contains("properties")) {
      const json& props = s["properties"];
      if (!props.is_object()) refuse("properties that is not an object", where + "/properties", "map each name to its schema");
      if (props.size() > kMaxProperties)
        refuse(std::to_string(props.size()) + " properties", where + "/properties",
               "at most " + std::to_string(kMaxProperties) + " per object are supported");
      for (const auto& [name, sub] : props.items()) {
        SchemaNode::Property p;
        p.key = json(name).dump();
        p.required = required.count(name) > 0;
        p.value = compile(sub, where + "/properties/" + pointer_part(name));
        n.literals.push_back(p.key);
        n.properties.push_back(std::move(p));
      }
    } else if (additional) {
      n.any_keys = true;
    }
    for (const std::string& name : required) {
      const std::string key = json(name).dump();
      const bool listed = std::any_of(n.properties.begin(), n.properties.end(), [&](const auto& p) { return p.key == key; });
      if (!listed && !n.any_keys)
        refuse("the required property '" + name + "' that properties does not list", where + "/required",
               "describe it under properties");
      if (!listed)
        refuse("the required property '" + name + "' without properties", where + "/required",
               "describe the object's properties");
    }
    n.next_required.assign(n.properties.size() + 1, uint8_t(n.properties.size()));
    for (size_t i = n.properties.size(); i-- > 0;)
      n.next_required[i] = n.properties[i].required ? uint8_t(i) : n.next_required[i + 1];
    at(self) = std::move(n);
    return self;
  }

  uint32_t count(const json& s, const char* key, const std::string& where) {
    const json& v = s[key];
    if (!is_integral(v) || v.get<double>() < 0 || v.get<double>() > 1e9)
      refuse(std::string(key) + " that is not a non-negative integer", where + "/" + key, "write a count");
    return uint32_t(v.get<double>());
  }

  int32_t array(const json& s, const std::string& where) {
    const int32_t self = add(SchemaNode{});
    SchemaNode n;
    n.kind = SchemaNode::array;
    n.items = g_->any_;
    if (s.contains("items")) {
      if (s["items"].is_array()) refuse("items as a list (tuple)", where + "/items", "give one schema for every item");
      n.items = compile(s["items"], where + "/items");
    }
    if (s.contains("minItems")) n.min_items = count(s, "minItems", where);
    if (s.contains("maxItems")) n.max_items = count(s, "maxItems", where);
    if (n.min_items > n.max_items) refuse("minItems above maxItems", where, "no array fits; fix the bounds");
    at(self) = std::move(n);
    return self;
  }

  int32_t reference(const std::string& ref, const std::string& where) {
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    std::string name, section;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (ref.compare(0, p.size(), p) == 0) {
        name = unescape_pointer_part(ref.substr(p.size()));
        section = p.substr(2, p.size() - 3);
      }
    }
    if (section.empty() || name.find('/') != std::string::npos)
      refuse("the reference '" + ref + "'", where, "only \"#/$defs/NAME\" and \"#/definitions/NAME\" are supported");
    if (!root_.is_object() || !root_.contains(section) || !root_[section].is_object() || !root_[section].contains(name))
      refuse("the reference '" + ref + "' to a schema that does not exist", where, "define it under " + section);
    // A placeholder first: a schema that refers to itself (a tree) reaches this same node.
    const int32_t self = add(SchemaNode{});
    pending_.insert(self);
    refs_[ref] = self;
    const int32_t target = compile(root_[section][name], ref);
    at(self) = g_->nodes_[size_t(target)];
    pending_.erase(self);
    return self;
  }

  static std::string first_bytes(const SchemaNode& n) {
    switch (n.kind) {
      case SchemaNode::object: return "{";
      case SchemaNode::array: return "[";
      case SchemaNode::string: return "\"";
      default: return kNumberStart;
    }
  }

  // Whether a value of the non-literal node `n` could be the literal `text` (so the literal may go).
  bool contains(const SchemaNode& n, const std::string& text) {
    switch (n.kind) {
      case SchemaNode::string: return text[0] == '"';
      case SchemaNode::number: return true;
      case SchemaNode::integer: return text.find_first_of(".eE") == std::string::npos;
      case SchemaNode::object: return n.any_keys && n.properties.empty();
      case SchemaNode::array: return n.items == g_->any_ && n.min_items == 0 && n.max_items == UINT32_MAX;
      default: return false;
    }
  }

  int32_t alternatives(const std::vector<int32_t>& given, const std::string& where) {
    std::vector<int32_t> alts;
    for (int32_t a : given) {
      if (pending_.count(a))
        refuse("a schema that refers to itself outside an object or an array", where, "nest the recursion in properties or items");
      const SchemaNode& n = at(a);
      if (n.kind != SchemaNode::alternatives) { alts.push_back(a); continue; }
      for (int32_t b : n.by_first_byte)
        if (b >= 0 && std::find(alts.begin(), alts.end(), b) == alts.end()) alts.push_back(b);
    }
    const bool has_number = std::any_of(alts.begin(), alts.end(), [&](int32_t a) { return at(a).kind == SchemaNode::number; });
    std::vector<int32_t> typed;
    std::vector<std::string> literals;
    for (int32_t a : alts) {
      const SchemaNode& n = at(a);
      if (n.kind == SchemaNode::literal) {
        for (const std::string& t : n.literals)
          if (std::find(literals.begin(), literals.end(), t) == literals.end()) literals.push_back(t);
      } else if (!(n.kind == SchemaNode::integer && has_number) && std::find(typed.begin(), typed.end(), a) == typed.end()) {
        typed.push_back(a);
      }
    }
    SchemaNode table;
    table.kind = SchemaNode::alternatives;
    table.by_first_byte.fill(-1);
    for (int32_t a : typed) {
      for (char c : first_bytes(at(a))) {
        int32_t& slot = table.by_first_byte[uint8_t(c)];
        if (slot >= 0 && slot != a)
          refuse(std::string("two alternatives that both start with '") + c + "'", where,
                 "alternatives are told apart by their first character (one object, one array, one string, "
                 "one number schema at most): merge them");
        slot = a;
      }
    }
    std::vector<std::string> kept;
    for (const std::string& t : literals) {
      const int32_t owner = table.by_first_byte[uint8_t(t[0])];
      if (owner < 0) { kept.push_back(t); continue; }
      if (!contains(at(owner), t))
        refuse("the value " + t + " and another alternative that both start with '" + t.substr(0, 1) + "'", where,
               "alternatives are told apart by their first character: merge them");
    }
    if (kept.size() > kMaxProperties) refuse("more than " + std::to_string(kMaxProperties) + " values", where, "use fewer");
    if (!kept.empty()) {
      const int32_t lit = literal(kept);
      for (const std::string& t : kept) table.by_first_byte[uint8_t(t[0])] = lit;
      typed.push_back(lit);
    }
    if (typed.size() == 1) return typed[0];
    return add(std::move(table));
  }

  const json& root_;
  std::shared_ptr<JsonGrammar> g_;
  int32_t string_ = 0, number_ = 0, integer_ = 0, keywords_ = 0, object_ = 0, array_ = 0;
  std::map<std::string, int32_t> refs_;
  std::set<int32_t> pending_;
};

JsonWhitespace json_whitespace_from_name(const std::string& name) {
  if (name == "compact") return JsonWhitespace::compact;
  if (name == "pretty") return JsonWhitespace::pretty;
  throw Error(ErrorCode::invalid_argument, "JSON whitespace '" + name + "' is not known: use \"compact\" (one space "
                                           "after ':' and ',') or \"pretty\" (newlines and indentation)");
}

std::shared_ptr<const JsonGrammar> JsonGrammar::from_schema(const nlohmann::ordered_json& schema, JsonWhitespace ws) {
  return SchemaCompiler(schema, ws).compile_root();
}

std::shared_ptr<const JsonGrammar> JsonGrammar::from_schema_text(const std::string& text, JsonWhitespace ws) {
  json schema;
  try {
    parse_json_bounded(text, 64, 1 << 20);   // the bounds; then again in order
    schema = json::parse(text);
  } catch (const JsonTooLarge& e) {
    throw Error(ErrorCode::invalid_argument, std::string("JSON schema: the text ") + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::invalid_argument, std::string("JSON schema: the text is not valid JSON: ") + e.what());
  }
  return from_schema(schema, ws);
}

std::shared_ptr<const JsonGrammar> JsonGrammar::any_object(JsonWhitespace ws) {
  return SchemaCompiler(json::object(), ws).any_object();
}

}  // namespace reach
