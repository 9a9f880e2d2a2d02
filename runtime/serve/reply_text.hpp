#pragma once
// A reply's text as the client gets it, token by token.  Stop strings cut it (StopText).  A chat reply
// in harmony's channels (gpt-oss) is split first (HarmonyReply): the analysis text goes out as
// reasoning, the final channel's as content, and stop strings are looked for in the content only:
// they end the answer, and the reasoning before it is not searched.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/serve/stop_text.hpp"
#include "runtime/text/harmony_reply.hpp"

namespace reach {
class Tokenizer;
}

namespace reach::serve {

struct ReplyPiece {
  std::string reasoning;   // harmony's analysis channel; always empty for other replies
  std::string content;
  std::string calls;       // harmony's calls to functions, as Hermes-style text (HarmonyDelta::calls)
};

class ReplyText {
 public:
  // channels: the tokenizer whose special tokens (<|channel|>, ...) mark a harmony reply's messages;
  // null for a reply of plain text.
  // prefix: harmony text the prompt ended with, which the reply continues (Request::reply_prefix);
  // calls: harmony's calls to functions go out apart (ReplyPiece::calls), else as reasoning.
  ReplyText(std::vector<std::string> stops, const Tokenizer* channels, const std::string& prefix = "",
            bool calls = false);
  // One generated token: its id and the text the decoder gave for it.  Returns what is now safe to send.
  ReplyPiece push(int32_t id, const std::string& decoded);
  // The end of the reply: the decoder's held-back tail, then whatever was held back here.
  ReplyPiece finish(const std::string& tail);
  // A stop string was found: the reply ends; nothing after it is sent.
  bool stopped() const { return stop_.stopped(); }

 private:
  ReplyPiece split(const std::string& text, bool end);

  StopText stop_;
  const Tokenizer* channels_;
  std::optional<HarmonyReply> harmony_;
  HarmonyDelta prefix_;   // what the prefix gave, handed out with the first piece
};

}  // namespace reach::serve
