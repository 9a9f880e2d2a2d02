#pragma once
// Typed, checked access to the keys of a config.json object, shared by the parsers of runtime/config
// (model_config.cpp: the model's keys; scheme_config.cpp: rope_scaling and reach_attention;
// family_config.cpp: the keys one family adds).  Every message names where the key is and what to do.
#include <cstdint>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"

namespace reach::config_detail {

using nlohmann::json;

// Sizes and positions are 32-bit in the kernels (and far above any real model).
inline constexpr int64_t kMaxDimension = INT32_MAX;

// A short description of a JSON value for "wrong type" messages.  Containers
// are never dumped (they could be huge or deeply nested).
std::string describe_value(const json& v);

// Typed access to the keys of one JSON object; `where` prefixes messages.
struct Reader {
  const json& obj;
  std::string where;

  [[noreturn]] void fail(ErrorCode code, const std::string& msg) const { throw Error(code, where + ": " + msg); }

  // nullptr when absent or null (null means "use the default" in HF configs).
  const json* find(const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const char* key) const { return find(key) != nullptr; }

  [[noreturn]] void missing(const char* key, const std::string& hint) const {
    fail(ErrorCode::format, std::string("missing key '") + key + "' - " + hint);
  }
  [[noreturn]] void wrong_type(const char* key, const json& v, const char* expected) const {
    fail(ErrorCode::format, std::string("key '") + key + "' is " + describe_value(v) + ", expected " + expected +
                                " - fix the value in the file");
  }

  std::optional<int64_t> opt_int(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (v->is_number_integer() && !v->is_number_unsigned()) return v->get<int64_t>();
    if (v->is_number_unsigned()) {
      uint64_t u = v->get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(u);
    }
    if (v->is_number_float()) {   // 4096.0 is accepted; 4096.5 is not
      double d = v->get<double>();
      if (std::floor(d) == d && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
    }
    wrong_type(key, *v, "an integer");
  }
  int64_t req_int(const char* key, const std::string& hint) const {
    auto v = opt_int(key);
    if (!v) missing(key, hint);
    return *v;
  }
  std::optional<double> opt_num(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) wrong_type(key, *v, "a number");
    // The JSON parser refuses NaN and overflow; objects built in code (the flag overrides) may not.
    if (!std::isfinite(v->get<double>())) wrong_type(key, *v, "a finite number");
    return v->get<double>();
  }
  double req_num(const char* key, const std::string& hint) const {
    auto v = opt_num(key);
    if (!v) missing(key, hint);
    return *v;
  }
  std::optional<bool> opt_bool(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) wrong_type(key, *v, "true or false");
    return v->get<bool>();
  }
  std::optional<std::string> opt_str(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) wrong_type(key, *v, "a string");
    return v->get<std::string>();
  }

  // A list of numbers > 0 (LongRoPE's factors); empty when absent.
  std::vector<double> positive_list(const char* key) const {
    std::vector<double> out;
    const json* v = find(key);
    if (!v) return out;
    if (!v->is_array()) wrong_type(key, *v, "a list of numbers");
    for (const json& e : *v) {
      if (!e.is_number() || !std::isfinite(e.get<double>()) || !(e.get<double>() > 0))
        fail(ErrorCode::format, std::string("'") + key + "' holds " + describe_value(e) +
                                    ", expected numbers > 0 - fix the value in the file");
      out.push_back(e.get<double>());
    }
    return out;
  }

  int64_t positive(const char* key, int64_t v) const {
    if (v <= 0) fail(ErrorCode::format, std::string("'") + key + "' is " + std::to_string(v) + ", must be > 0");
    return v;
  }
  // A size the kernels index with 32-bit integers: (0, 2^31 - 1].
  int64_t dimension(const char* key, int64_t v) const {
    positive(key, v);
    if (v > kMaxDimension)
      fail(ErrorCode::format, std::string("'") + key + "' is " + std::to_string(v) + ", more than reach handles (" +
                                  std::to_string(kMaxDimension) + ") - fix the value in the file");
    return v;
  }
  int64_t non_negative(const char* key, int64_t v) const {
    if (v < 0) fail(ErrorCode::format, std::string("'") + key + "' is " + std::to_string(v) + ", must be >= 0");
    return v;
  }
  double positive(const char* key, double v) const {
    if (!(v > 0)) fail(ErrorCode::format, std::string("'") + key + "' is " + json(v).dump() + ", must be > 0");
    return v;
  }

  // Every key must be one of `allowed` (for reach-only objects: typos must not pass).
  void only_keys(const std::vector<const char*>& allowed) const {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (const char* a : allowed) ok = ok || it.key() == a;
      if (!ok) {
        std::string list;
        for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        fail(ErrorCode::format, "unknown key '" + it.key() + "' (allowed here: " + list + ") - check the spelling");
      }
    }
  }
};

// A token id or a list of them under `key` (absent: empty), each in [0, vocab_size).
std::vector<int32_t> parse_token_ids(const Reader& r, const char* key, int64_t vocab_size);

}  // namespace reach::config_detail
