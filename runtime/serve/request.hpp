#pragma once
// A generation request as the serving engine takes it (engine types: no JSON, no HTTP, no OpenAI):
// the prompt's ids, how to sample, what ends the reply (stop ids, stop strings, a token limit), an
// optional JSON constraint and the logprobs asked for; and the events its reply comes back as.
// server/openai_api maps the API's JSON to a Request and the events back to JSON; the C API and
// `reach run` use the reply assembly (reply.hpp) the Scheduler uses.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/constrain/json_constraint.hpp"
#include "runtime/session/sampler.hpp"
#include "runtime/session/token_logprobs.hpp"

namespace reach::serve {

// Why a reply ended: an end token or a stop string (stop), or the token limit (length).
enum class FinishReason { stop, length };

// Tokens in and out of one request.
struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
};

struct Request {
  std::vector<int32_t> ids;          // the prompt, checked against the context by the submitter
  std::vector<int32_t> stop_ids;     // tokens that end generation besides the model's EOS (end of turn); not emitted
  std::vector<std::string> stop;     // stop strings
  SamplerParams sampling;
  int64_t max_tokens = 1;            // sampled tokens at most, the end token included
  int logprobs = -1;                 // alternatives per token in JobEvent::logprobs; -1: no logprobs
  bool cache_prompt = true;          // false: prefill the whole prompt even if a slot holds a prefix of it
  std::shared_ptr<const JsonConstraint> json;   // the reply is a JSON document; null: free text
  // The reply is in harmony's channels (a gpt-oss chat): JobEvent::text is its final channel, reasoning its
  // analysis, and stop strings apply to the final channel (ReplyText).
  bool channels = false;
  // The text the prompt ends with that the reply continues (a forced call's harmony header,
  // "<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>"): the channel splitter reads
  // it first, so that the reply's text lands in the message it opened.
  std::string reply_prefix;
  // The request has tools: a harmony reply's calls to functions go out apart (JobEvent::calls); without,
  // their text is reasoning.
  bool tool_calls = false;
};

// What the submitter reads from its Job: text deltas, then one final event.
struct JobEvent {
  std::string text;
  bool done = false;
  FinishReason finish = FinishReason::stop;
  Usage usage;
  std::string error;   // non-empty: generation failed (done is true)
  // With `error`: the device was lost, not the request at fault (the server answers 503; the model is
  // being loaded again on a new device, and the same request may be sent again once it is).
  bool device_lost = false;
  // The tokens sampled since the previous event, when the job asked for logprobs.  An event may carry
  // tokens whose text is still held back (an incomplete character, a possible stop string).
  std::vector<TokenLogprob> logprobs;
  std::string reasoning;   // a harmony reply's analysis text (Request::channels), sent before `text`; empty otherwise
  // A harmony reply's calls to functions as Hermes-style text (HarmonyDelta::calls), which a
  // ToolCallStream reads; empty otherwise.
  std::string calls;
};

// A Request submitted to the Scheduler, with the queue its events arrive in.
struct Job : Request {
  // Set by the submitter when its client went away: the scheduler frees the slot at its next step.
  std::atomic<bool> cancelled{false};

  void push(JobEvent e);
  // Waits up to timeout_ms for an event; nullopt on timeout.
  std::optional<JobEvent> pop(int timeout_ms);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<JobEvent> events_;
};

}  // namespace reach::serve
