#pragma once
// A harmony reply (gpt-oss) split into its channels as it streams.
//
// The prompt ends with "<|start|>assistant", so the model writes a message header first:
//   <|channel|>analysis<|message|>...reasoning...<|end|>
//   <|start|>assistant<|channel|>final<|message|>...the answer...<|return|>
// HarmonyReply is fed the reply's text with its special tokens written out (harmony_piece gives a
// token's text so) in pieces cut anywhere, and hands back what each piece adds to the reasoning
// (the analysis channel, and commentary) and to the content (the final channel).  Headers, and the
// text between messages, are neither.  A tail that may be the start of a marker is held back until
// the next piece says.  A reply that never opens a message (no <|message|>: not harmony after all)
// comes out as content, whole, at flush().
#include <cstdint>
#include <string>
#include <string_view>

namespace reach {

class Tokenizer;

struct HarmonyDelta {
  std::string reasoning;   // analysis (and commentary) channel text
  std::string content;     // final channel text
  // The messages addressed to a function ("to=functions.NAME" in the header, on any channel), each
  // written as a Hermes-style call, <tool_call>{"name": "NAME", "arguments": BODY}</tool_call>, the
  // form runtime/serve/tool_calls reads: its body streams as it comes, its end (<|call|>, <|end|> or
  // the reply's end) closes it.
  std::string calls;
};

class HarmonyReply {
 public:
  // calls: messages to functions go out as HarmonyDelta::calls; false: their text is reasoning, as
  // commentary's (a chat without tools).
  explicit HarmonyReply(bool calls = true) : split_calls_(calls) {}
  // The next piece of the reply's text.
  HarmonyDelta push(std::string_view piece);
  // The end of the reply: the held-back tail (it was not a marker).
  HarmonyDelta flush();

  // The channel of the message being written ("" in a header or between messages).
  const std::string& channel() const { return channel_; }
  // The function the message being written is addressed to ("" for none).
  const std::string& recipient() const { return function_; }
  // A <|return|> or <|call|> was seen: the reply is over, later text is dropped.
  bool ended() const { return state_ == State::ended; }

 private:
  enum class State { header, body, between, ended };
  void marker(std::string_view m, HarmonyDelta& out);
  void text(std::string_view t, HarmonyDelta& out);
  void close_call(HarmonyDelta& out);

  State state_ = State::header;
  std::string pending_;        // text that may be the start of a marker
  std::string header_;         // the current header's text (role, <|channel|>NAME, recipient)
  std::string channel_;
  std::string function_;       // the current message's function (to=functions.NAME), "" for none
  bool split_calls_ = true;
  bool opened_ = false;        // a message body was seen: the reply is harmony
  std::string unopened_;       // the whole text so far while opened_ is false
};

// The text a generated token adds to a harmony reply: `decoded` (the decoder's text, which drops
// special tokens), or the token's own text for a special token (<|channel|>, <|message|>, <|end|>...).
std::string harmony_piece(const Tokenizer& tokenizer, int32_t id, const std::string& decoded);

}  // namespace reach
