#include "server/openai_api.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/formats/json_parse.hpp"
#include "server/response_format.hpp"

namespace reach::server {

namespace {

using nlohmann::json;

// Bounds on a request body's JSON: a chat needs a few levels, never hundreds; the value count caps the
// memory a small body full of "[],[]," could take (the body size itself is capped by the HTTP server).
constexpr int kMaxDepth = 32;
constexpr size_t kMaxValues = 1 << 20;
constexpr size_t kMaxStops = 4;   // as the OpenAI API

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError{400, message, "invalid_request_error", param, ""};
}

const char* type_name(const json& v) { return v.type_name(); }

[[noreturn]] void wrong_type(const std::string& param, const json& v, const char* expected) {
  bad(param, "'" + param + "' must be " + expected + ", not " + type_name(v));
}

bool present(const json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

double number_of(const json& body, const char* key) {
  const json& v = body[key];
  if (!v.is_number()) wrong_type(key, v, "a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) bad(key, std::string("'") + key + "' must be finite");
  return d;
}

int64_t integer_of(const json& body, const char* key) {
  const json& v = body[key];
  if (v.is_number_integer()) return v.get<int64_t>();
  // 5.0 is an integer in JSON's eyes for many clients.
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return int64_t(d);
  }
  wrong_type(key, v, "an integer");
}

bool bool_of(const json& body, const char* key) {
  const json& v = body[key];
  if (!v.is_boolean()) wrong_type(key, v, "true or false");
  return v.get<bool>();
}

std::string string_of(const json& v, const std::string& param) {
  if (!v.is_string()) wrong_type(param, v, "a string");
  return v.get<std::string>();
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts joined.
std::string content_of(const json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) wrong_type(param, v, "a string or an array of text parts");
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& part = v[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) wrong_type(p, part, "an object");
    if (!part.contains("type") || part["type"] != "text")
      bad(p + ".type", "only text content parts are supported ('type': 'text')");
    if (!part.contains("text")) bad(p + ".text", "a text part needs 'text'");
    out += string_of(part["text"], p + ".text");
  }
  return out;
}

// An assistant message's tool_calls: [{"id", "type": "function", "function": {"name", "arguments": a JSON
// object's text}}].
std::vector<ToolCall> tool_calls_of(const json& v, const std::string& param) {
  if (!v.is_array()) wrong_type(param, v, "an array");
  std::vector<ToolCall> calls;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    const json& c = v[i];
    if (!c.is_object()) wrong_type(p, c, "an object");
    if (present(c, "type") && c["type"] != "function") bad(p + ".type", "'" + p + ".type' must be \"function\"");
    if (!present(c, "function") || !c["function"].is_object())
      bad(p + ".function", "'" + p + ".function' must be an object {\"name\", \"arguments\"}");
    const json& fn = c["function"];
    ToolCall call;
    if (present(c, "id")) call.id = string_of(c["id"], p + ".id");
    if (!present(fn, "name")) bad(p + ".function.name", "'" + p + ".function.name' is required");
    call.name = string_of(fn["name"], p + ".function.name");
    call.arguments = present(fn, "arguments") ? string_of(fn["arguments"], p + ".function.arguments") : "{}";
    json args;
    try {
      args = parse_json_bounded(call.arguments, kMaxDepth, kMaxValues);
    } catch (const std::exception&) {
    }
    if (!args.is_object())
      bad(p + ".function.arguments",
          "'" + p + ".function.arguments' must be a JSON object's text, as a call returns it");
    calls.push_back(std::move(call));
  }
  return calls;
}

void parse_prompt(const json& body, GenerationRequest& r) {
  if (!present(body, "prompt")) bad("prompt", "'prompt' is required");
  const json& p = body["prompt"];
  if (p.is_string()) { r.prompt = p.get<std::string>(); }
  else if (p.is_array() && p.size() == 1 && p[0].is_string()) { r.prompt = p[0].get<std::string>(); }
  else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
    r.prompt_is_ids = true;
    for (const json& t : p) {
      if (!t.is_number_integer()) bad("prompt", "a token-id prompt must hold integers only");
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id > INT32_MAX) bad("prompt", "token id " + std::to_string(id) + " is out of range");
      r.prompt_ids.push_back(int32_t(id));
    }
  } else if (p.is_array() && p.size() > 1) {
    bad("prompt", "one prompt per request: send several requests for several prompts");
  } else {
    bad("prompt", "'prompt' must be a non-empty string or a list of token ids");
  }
  if (!r.prompt_is_ids && r.prompt.empty()) bad("prompt", "'prompt' is empty");
}

void parse_messages(const json& body, GenerationRequest& r) {
  if (!present(body, "messages")) bad("messages", "'messages' is required");
  const json& m = body["messages"];
  if (!m.is_array()) wrong_type("messages", m, "an array");
  if (m.empty()) bad("messages", "'messages' is empty");
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string p = "messages[" + std::to_string(i) + "]";
    const json& msg = m[i];
    if (!msg.is_object()) wrong_type(p, msg, "an object");
    if (!msg.contains("role")) bad(p + ".role", "each message needs a 'role'");
    ChatMessage cm;
    cm.role = string_of(msg["role"], p + ".role");
    if (cm.role == "developer") cm.role = "system";   // the newer name of the system role
    if (cm.role != "system" && cm.role != "user" && cm.role != "assistant" && cm.role != "tool")
      bad(p + ".role", "role '" + cm.role + "' is not supported: use system, user, assistant or tool");
    if (present(msg, "content")) cm.content = content_of(msg["content"], p + ".content");
    if (cm.role == "tool") {
      if (!present(msg, "tool_call_id"))
        bad(p + ".tool_call_id", "a tool message needs 'tool_call_id': the id of the call it answers");
      cm.tool_call_id = string_of(msg["tool_call_id"], p + ".tool_call_id");
      if (present(msg, "name")) cm.name = string_of(msg["name"], p + ".name");
    }
    if (cm.role == "assistant" && present(msg, "tool_calls"))
      cm.tool_calls = tool_calls_of(msg["tool_calls"], p + ".tool_calls");
    r.messages.push_back(std::move(cm));
  }
}

// completions: "logprobs": N alternatives (0..5; false = none).  chat: "logprobs": true, with
// "top_logprobs": 0..20 alternatives (which needs logprobs true).
void parse_logprobs(const json& body, GenerationRequest& r) {
  constexpr int64_t kMaxLegacy = 5;
  if (r.endpoint == Endpoint::completions) {
    if (!present(body, "logprobs")) return;
    if (body["logprobs"].is_boolean() && !body["logprobs"].get<bool>()) return;
    if (body["logprobs"].is_boolean())
      bad("logprobs", "'logprobs' on /v1/completions is the number of alternatives per token, 0 to 5");
    const int64_t n = integer_of(body, "logprobs");
    if (n < 0 || n > kMaxLegacy) bad("logprobs", "'logprobs' must be in [0, 5] on /v1/completions");
    r.logprobs = int(n);
    return;
  }
  const bool on = present(body, "logprobs") && bool_of(body, "logprobs");
  if (present(body, "top_logprobs")) {
    const int64_t n = integer_of(body, "top_logprobs");
    if (n < 0 || n > kMaxTopLogprobs) bad("top_logprobs", "'top_logprobs' must be in [0, 20]");
    if (!on) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r.logprobs = int(n);
  } else if (on) {
    r.logprobs = 0;
  }
}

}  // namespace

GenerationRequest parse_generation_request(const std::string& text, Endpoint endpoint) {
  json body;
  try {
    body = parse_json_bounded(text, kMaxDepth, kMaxValues);
  } catch (const JsonTooLarge& e) {
    bad("", std::string("the request body ") + e.what());
  } catch (const json::exception& e) {
    bad("", std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!body.is_object()) bad("", std::string("the request body must be a JSON object, not ") + body.type_name());

  GenerationRequest r;
  r.endpoint = endpoint;
  // OpenAI's defaults: temperature 1, top_p 1; top_k (an extension) off.
  r.sampling.temperature = 1.0f;
  r.sampling.top_p = 1.0f;
  r.sampling.top_k = 0;
  if (present(body, "model")) r.model = string_of(body["model"], "model");
  if (endpoint == Endpoint::completions) parse_prompt(body, r);
  else parse_messages(body, r);

  // max_completion_tokens is the chat API's newer name of max_tokens.
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!present(body, key)) continue;
    const int64_t n = integer_of(body, key);
    if (n < 1) bad(key, std::string("'") + key + "' must be at least 1");
    r.max_tokens = n;
  }
  if (present(body, "temperature")) {
    const double t = number_of(body, "temperature");
    if (t < 0 || t > 100) bad("temperature", "'temperature' must be in [0, 100] (0 = greedy)");
    r.sampling.temperature = float(t);
  }
  if (present(body, "top_p")) {
    const double p = number_of(body, "top_p");
    if (!(p > 0 && p <= 1)) bad("top_p", "'top_p' must be in (0, 1]");
    r.sampling.top_p = float(p);
  }
  if (present(body, "top_k")) {
    const int64_t k = integer_of(body, "top_k");
    if (k < 0) bad("top_k", "'top_k' must be >= 0 (0 = no cut)");
    if (k > INT32_MAX) bad("top_k", "'top_k' is out of range: at most " + std::to_string(INT32_MAX));
    r.sampling.top_k = int32_t(k);
  }
  if (present(body, "seed")) {
    const int64_t s = integer_of(body, "seed");
    r.sampling.seed = uint64_t(s);
    r.seeded = true;
  }
  if (present(body, "stop")) {
    const json& s = body["stop"];
    if (s.is_string()) r.stop.push_back(s.get<std::string>());
    else if (s.is_array()) {
      if (s.size() > kMaxStops) bad("stop", "at most 4 stop strings");
      for (size_t i = 0; i < s.size(); ++i) r.stop.push_back(string_of(s[i], "stop[" + std::to_string(i) + "]"));
    } else {
      wrong_type("stop", s, "a string or an array of strings");
    }
    for (const std::string& x : r.stop)
      if (x.empty()) bad("stop", "stop strings must not be empty");
  }
  if (present(body, "stream")) r.stream = bool_of(body, "stream");
  if (present(body, "stream_options")) {
    const json& so = body["stream_options"];
    if (!so.is_object()) wrong_type("stream_options", so, "an object");
    if (present(so, "include_usage")) r.include_usage = bool_of(so, "include_usage");
  }
  if (present(body, "response_format")) r.json = parse_response_format(body["response_format"], text);
  if (endpoint == Endpoint::chat && present(body, "reasoning_effort")) {
    r.reasoning_effort = string_of(body["reasoning_effort"], "reasoning_effort");
    if (*r.reasoning_effort != "low" && *r.reasoning_effort != "medium" && *r.reasoning_effort != "high")
      bad("reasoning_effort", "'reasoning_effort' must be \"low\", \"medium\" or \"high\"");
  }
  if (endpoint == Endpoint::chat &&
      (present(body, "tools") || present(body, "tool_choice") || present(body, "parallel_tool_calls"))) {
    // Again with the keys in order: the template writes each tool as it was sent.  The body passed the
    // bounded parse above, so this one cannot fail or grow past it.
    r.tools = parse_tool_request(nlohmann::ordered_json::parse(text));
  }
  if (present(body, "n") && integer_of(body, "n") != 1) bad("n", "only n = 1 is supported");
  if (present(body, "best_of") && integer_of(body, "best_of") != 1) bad("best_of", "only best_of = 1 is supported");
  if (present(body, "echo") && bool_of(body, "echo")) bad("echo", "echo is not supported");
  parse_logprobs(body, r);
  if (present(body, "cache_prompt")) r.cache_prompt = bool_of(body, "cache_prompt");
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (present(body, key)) number_of(body, key);   // accepted for compatibility, type-checked, not applied
  return r;
}

const char* finish_reason_name(serve::FinishReason r) { return r == serve::FinishReason::stop ? "stop" : "length"; }

const char* finish_name(FinishReason r, bool called_tools) {
  return called_tools && r == FinishReason::stop ? "tool_calls" : finish_reason_name(r);
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens}, {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

namespace {
json envelope(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model, bool chunk) {
  const char* object = endpoint == Endpoint::chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                  : "text_completion";
  return {{"id", id}, {"object", object}, {"created", created}, {"model", model}, {"system_fingerprint", "reach"}};
}
}  // namespace

json completion_json(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                     const std::string& text, FinishReason finish, const Usage& usage,
                     const std::vector<TokenLogprob>* logprobs, const std::string* reasoning,
                     const std::vector<ToolCallOut>& tool_calls) {
  json j = envelope(endpoint, id, created, model, false);
  json choice = {{"index", 0}, {"finish_reason", finish_name(finish, !tool_calls.empty())}, {"logprobs", nullptr}};
  if (logprobs) choice["logprobs"] = logprobs_json(endpoint, *logprobs);
  if (endpoint == Endpoint::chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
    if (reasoning) choice["message"]["reasoning_content"] = *reasoning;
    if (!tool_calls.empty()) {
      // As OpenAI answers a call: content null unless the model wrote text besides it.
      if (text.empty()) choice["message"]["content"] = nullptr;
      json calls = json::array();
      for (const ToolCallOut& c : tool_calls)
        calls.push_back(
            {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      choice["message"]["tool_calls"] = calls;
    }
  } else {
    choice["text"] = text;
  }
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(usage);
  return j;
}

json chunk_json(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                const std::string& text, std::optional<FinishReason> finish, bool first,
                const std::vector<TokenLogprob>* logprobs, const std::string& reasoning) {
  json j = envelope(endpoint, id, created, model, true);
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  if (logprobs && !logprobs->empty()) choice["logprobs"] = logprobs_json(endpoint, *logprobs);
  if (finish) choice["finish_reason"] = finish_reason_name(*finish);
  if (endpoint == Endpoint::chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
    if (!text.empty() || first) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  j["choices"] = json::array({choice});
  return j;
}

json tool_chunk_json(const std::string& id, int64_t created, const std::string& model,
                     const std::vector<ToolCallDelta>& calls) {
  json j = envelope(Endpoint::chat, id, created, model, true);
  json list = json::array();
  for (const ToolCallDelta& c : calls) {
    json entry = {{"index", c.index}};
    if (!c.id.empty()) {
      entry["id"] = c.id;
      entry["type"] = "function";
      entry["function"] = {{"name", c.name}, {"arguments", c.arguments}};
    } else {
      entry["function"] = {{"arguments", c.arguments}};
    }
    list.push_back(entry);
  }
  j["choices"] = json::array(
      {{{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}, {"delta", {{"tool_calls", list}}}}});
  return j;
}

namespace {
// OpenAI's floor for a probability that underflows (a logit of -inf): JSON has no -Infinity.
constexpr double kLogprobFloor = -9999.0;
double reported(float lp) { return std::isfinite(lp) ? std::max(double(lp), kLogprobFloor) : kLogprobFloor; }

json utf8_bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}
}  // namespace

json logprobs_json(Endpoint endpoint, const std::vector<TokenLogprob>& tokens) {
  if (endpoint == Endpoint::chat) {
    json content = json::array();
    for (const TokenLogprob& t : tokens) {
      json top = json::array();
      for (const TopLogprob& a : t.top)
        top.push_back({{"token", a.token}, {"logprob", reported(a.logprob)}, {"bytes", utf8_bytes(a.token)}});
      content.push_back({{"token", t.token}, {"logprob", reported(t.logprob)}, {"bytes", utf8_bytes(t.token)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& t : tokens) {
    toks.push_back(t.token);
    lps.push_back(reported(t.logprob));
    json top = json::object();
    // Two alternatives with the same text keep the more likely one (the first).
    for (const TopLogprob& a : t.top)
      if (!top.contains(a.token)) top[a.token] = reported(a.logprob);
    tops.push_back(top);
    offsets.push_back(t.text_offset);
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json usage_chunk_json(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                      const Usage& usage) {
  json j = envelope(endpoint, id, created, model, true);
  j["choices"] = json::array();
  j["usage"] = usage_json(usage);
  return j;
}

json models_json(const std::string& model, int64_t created) {
  return {{"object", "list"},
          {"data", json::array({{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "reach"}}})}};
}

}  // namespace reach::server
