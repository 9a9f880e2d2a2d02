#pragma once
// Log-probabilities of a chosen token and of the most likely alternatives, as the OpenAI API reports
// them: the log-softmax of the raw logits (before temperature, top-k or top-p), the quantity
// `reach eval --dump-logprobs` writes.  Host work in double, done only for requests that ask.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace reach {

struct TopLogprob {
  int32_t id = 0;
  std::string token;   // the token's text alone (special tokens included)
  float logprob = 0;
};

struct TokenLogprob {
  int32_t id = 0;
  std::string token;
  float logprob = 0;
  std::vector<TopLogprob> top;   // the `top` most likely tokens, most likely first (ties: lower id first)
  size_t text_offset = 0;        // characters of the reply before this token's text (set by the caller)
};

// Largest `top` the API allows (chat's top_logprobs 0..20; completions' logprobs 0..5).
inline constexpr int kMaxTopLogprobs = 20;

// The log-softmax of `logits` at `id`, and the `top` largest entries (ids and values; token texts
// empty, for the caller to fill).  Throws Error(invalid_argument) for an id outside the logits or a
// top outside [0, kMaxTopLogprobs].
TokenLogprob token_logprobs(std::span<const float> logits, int32_t id, int top);

}  // namespace reach
