#pragma once
// The OpenAI HTTP API's JSON: request bodies of /v1/completions and /v1/chat/completions parsed and
// checked into a GenerationRequest (openai_routes maps it to the engine's serve::Request), and the
// response bodies (whole and streamed chunks) from the engine's events and finish reasons.
// No I/O and no device here: the parts a test can check on their own.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/constrain/json_grammar.hpp"
#include "runtime/serve/request.hpp"
#include "runtime/session/sampler.hpp"
#include "runtime/session/token_logprobs.hpp"
#include "runtime/text/chat_template.hpp"
#include "server/http_error.hpp"
#include "server/tool_request.hpp"

namespace reach::server {

enum class Endpoint { completions, chat };

struct GenerationRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model;                       // "" when the request names none
  std::string prompt;                      // completions: the text (BOS added when encoding)
  std::vector<int32_t> prompt_ids;         // completions: a prompt given as token ids
  bool prompt_is_ids = false;
  std::vector<ChatMessage> messages;       // chat
  std::optional<int64_t> max_tokens;       // absent: up to the end of the context
  SamplerParams sampling;
  bool seeded = false;                     // no seed given: the server draws one
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;              // stream_options.include_usage
  // Log-probabilities per reply token with this many alternatives (completions: logprobs 0..5; chat:
  // logprobs true with top_logprobs 0..20); -1: none asked.
  int logprobs = -1;
  bool cache_prompt = true;                // false: prefill the whole prompt, reusing no cached prefix
  std::shared_ptr<const JsonGrammar> json;  // response_format json_object / json_schema; null: free text
  // chat: "low", "medium" or "high", for the templates that take one (harmony); absent: the template's default.
  std::optional<std::string> reasoning_effort;
  ToolRequest tools;  // chat: tools, tool_choice, parallel_tool_calls
};

// One tool call of a reply, as the response carries it.
struct ToolCallOut {
  std::string id, name, arguments;
};

// Parses and checks a request body.  Throws ApiError (400) for malformed JSON, a field of the wrong
// type, or a value out of range, naming the field.  Fields the server does not use are ignored, except
// those whose non-default value would change the answer (n > 1, echo, best_of): 400.
GenerationRequest parse_generation_request(const std::string& body, Endpoint endpoint);

using serve::FinishReason;
using serve::Usage;
const char* finish_reason_name(FinishReason r);

nlohmann::json usage_json(const Usage& u);
// A whole (non-streamed) answer.
// logprobs: the reply's tokens when the request asked for them (null: "logprobs": null).
// reasoning: a harmony reply's analysis text, as message.reasoning_content (the field llama.cpp's and
// vLLM's servers use); null: no such field (replies without channels).
nlohmann::json completion_json(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                               const std::string& text, FinishReason finish, const Usage& usage,
                               const std::vector<TokenLogprob>* logprobs = nullptr,
                               const std::string* reasoning = nullptr, const std::vector<ToolCallOut>& tool_calls = {});
// One streamed chunk: text (may be empty), and a finish reason on the last one.  Chat streams open
// with a chunk whose delta carries the role (first = true).  logprobs: the chunk's tokens, when asked.
// reasoning (chat): the chunk's analysis text, as delta.reasoning_content, when non-empty.
nlohmann::json chunk_json(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                          const std::string& text, std::optional<FinishReason> finish, bool first,
                          const std::vector<TokenLogprob>* logprobs = nullptr, const std::string& reasoning = {});
// choices[].logprobs in the endpoint's format: chat {"content": [{token, logprob, bytes, top_logprobs}]},
// completions {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}.
nlohmann::json logprobs_json(Endpoint endpoint, const std::vector<TokenLogprob>& tokens);
// A streamed chunk of tool calls: delta.tool_calls, one entry per call piece (its index; the first piece of
// a call carries id, type and name, with the arguments so far, "" at least).
struct ToolCallDelta {
  size_t index = 0;
  std::string id, name;  // set on a call's first piece
  std::string arguments;
};
nlohmann::json tool_chunk_json(const std::string& id, int64_t created, const std::string& model,
                               const std::vector<ToolCallDelta>& calls);
// finish_reason as the API names it: "tool_calls" for a reply that stopped after calling tools.
const char* finish_name(FinishReason r, bool called_tools);
// The usage-only chunk that stream_options.include_usage asks for (empty choices).
nlohmann::json usage_chunk_json(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                                const Usage& usage);
nlohmann::json models_json(const std::string& model, int64_t created);

}  // namespace reach::server
