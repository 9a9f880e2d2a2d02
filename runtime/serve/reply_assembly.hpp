#pragma once
// One request's reply assembled from its sampled tokens, as the Scheduler hands it out: the text
// (ReplyText: stop strings with their held-back tail, harmony's channels), the logprob entries of the
// tokens whose text has gone out (an entry waits while its token's text is held back), the text offset
// of each entry, and the finish reason (a stop string found ends the reply with "stop").
#include <cstddef>
#include <string>
#include <vector>

#include "runtime/serve/reply_text.hpp"
#include "runtime/serve/request.hpp"
#include "runtime/session/generation.hpp"

namespace reach::serve {

class ReplyAssembly {
 public:
  // channels: the tokenizer of a harmony reply (ReplyText); null for plain text.
  // prefix, calls: Request::reply_prefix, Request::tool_calls.
  ReplyAssembly(std::vector<std::string> stops, const Tokenizer* channels, const std::string& prefix = "",
                bool calls = false)
      : text_(std::move(stops), channels, prefix, calls) {}

  // A sampled token that did not end the reply (not a stop id).  Returns what is now safe to send:
  // text, reasoning and logprob entries (any may be empty); done is false.
  JobEvent push(GeneratedToken token);
  // The end of the reply: `tail` the decoder's held-back text, `reason` why it ended (a stop string
  // found makes it stop).  Returns the last event (done, finish set; usage left to the caller).
  JobEvent finish(FinishReason reason, const std::string& tail);
  // A stop string was found: the reply is over.
  bool stopped() const { return text_.stopped(); }

 private:
  // The entries whose token starts within the text sent so far (all: every entry); the rest stay.
  std::vector<TokenLogprob> take_logprobs(bool all);

  ReplyText text_;
  // Logprob entries sampled and not yet handed out: an entry goes out once the reply text sent reaches
  // its token (text held back for a possible stop string holds its entries back too).
  std::vector<TokenLogprob> logprobs_;
  size_t text_chars_ = 0;      // characters of the reply decoded so far (the next text_offset)
  size_t emitted_chars_ = 0;   // characters of reply text sent so far
};

}  // namespace reach::serve
