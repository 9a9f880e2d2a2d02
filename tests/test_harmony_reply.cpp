// HarmonyReply (runtime/text/harmony_reply.*): a gpt-oss reply's text split into reasoning (analysis)
// and content (final), whatever the pieces it arrives in.  The expected splits are read off the
// harmony format (OpenAI's harmony spec: a message is <|start|>ROLE<|channel|>NAME<|message|>TEXT
// ending in <|end|>, <|return|> or <|call|>), not from HarmonyReply's own output.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "runtime/text/harmony_reply.hpp"
#include "runtime/text/tokenizer.hpp"
#include "tests/support/files.hpp"

using reach::HarmonyDelta;
using reach::HarmonyReply;

namespace {

// The reply fed in the given pieces, the deltas joined.
HarmonyDelta split(const std::vector<std::string>& pieces) {
  HarmonyReply r;
  HarmonyDelta all;
  auto add = [&](const HarmonyDelta& d) {
    all.reasoning += d.reasoning;
    all.content += d.content;
    all.calls += d.calls;
  };
  for (const auto& p : pieces) add(r.push(p));
  add(r.flush());
  return all;
}

// Every cut of `text` into one, two and three pieces (and one byte at a time) splits the same:
// `reasoning`, `content` and `calls`.
void check_all_cuts(const std::string& text, const std::string& reasoning, const std::string& content,
                    const std::string& calls = "") {
  INFO("reply: " << text);
  auto check = [&](const std::vector<std::string>& pieces) {
    const HarmonyDelta d = split(pieces);
    CHECK(d.reasoning == reasoning);
    CHECK(d.content == content);
    CHECK(d.calls == calls);
  };
  check({text});
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  check(bytes);
  for (size_t i = 0; i <= text.size(); ++i)
    for (size_t j = i; j <= text.size(); j += 3) check({text.substr(0, i), text.substr(i, j - i), text.substr(j)});
}

}  // namespace

TEST_CASE("harmony reply: analysis then final, cut anywhere") {
  check_all_cuts(
      "<|channel|>analysis<|message|>The user asks for France's capital. Easy.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>Paris is the capital of France.<|return|>",
      "The user asks for France's capital. Easy.", "Paris is the capital of France.");
  // Without the end token (a stop id, which the decoder never hands over).
  check_all_cuts("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b", "a", "b");
}

TEST_CASE("harmony reply: one that never leaves analysis, one with only final") {
  check_all_cuts("<|channel|>analysis<|message|>Still thinking about it", "Still thinking about it", "");
  check_all_cuts("<|channel|>final<|message|>Just the answer.", "", "Just the answer.");
  // Analysis closed, the final header not written yet (a reply cut by max_tokens).
  check_all_cuts("<|channel|>analysis<|message|>r<|end|><|start|>assist", "r", "");
}

TEST_CASE("harmony reply: text that looks like a marker but is not stays text") {
  check_all_cuts("<|channel|>final<|message|>if a < b and <|x|> or <| or <|end then <", "",
                 "if a < b and <|x|> or <| or <|end then <");
  check_all_cuts("<|channel|>analysis<|message|>x <|chan y<|end|><|start|>assistant<|channel|>final<|message|><<|",
                 "x <|chan y", "<<|");
  // UTF-8 text passes through whole.
  check_all_cuts("<|channel|>final<|message|>\xE4\xB8\x96\xE7\x95\x8C <\xC3\xA9", "", "\xE4\xB8\x96\xE7\x95\x8C <\xC3\xA9");
}

TEST_CASE("harmony reply: several analysis messages, commentary, and text after the end") {
  check_all_cuts("<|channel|>analysis<|message|>one<|end|><|start|>assistant<|channel|>analysis<|message|>two<|end|>"
                 "<|start|>assistant<|channel|>final<|message|>three<|return|>ignored",
                 "onetwo", "three");
  // A tool call (the recipient before or after the channel): neither reasoning nor the answer, but a
  // call in the Hermes form; a message to another recipient is commentary.
  check_all_cuts("<|channel|>analysis<|message|>call it<|end|><|start|>assistant to=functions.get_weather"
                 "<|channel|>commentary <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
                 "call it", "", "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}</tool_call>");
  check_all_cuts("<|channel|>commentary to=functions.a\"b <|constrain|>json<|message|>{}<|end|>"
                 "<|start|>assistant<|channel|>commentary to=browser.open<|message|>x<|end|>"
                 "<|start|>assistant<|channel|>commentary to=functions.f<|message|>{\"k\": [1",
                 "x", "", "<tool_call>{\"name\": \"a\\\"b\", \"arguments\": {}}</tool_call>"
                 "<tool_call>{\"name\": \"f\", \"arguments\": {\"k\": [1}</tool_call>");
  // A message without a channel talks to the user.
  check_all_cuts("<|message|>hello", "", "hello");
}

TEST_CASE("harmony reply: a reply that opens no message is content, whole, at the end") {
  check_all_cuts("Just some text without any header.", "", "Just some text without any header.");
  HarmonyReply r;
  CHECK(r.push("plain ").content.empty());   // not known yet to be plain
  CHECK(r.flush().content == "plain ");
}

TEST_CASE("harmony reply: channel() and ended() follow the messages") {
  HarmonyReply r;
  (void)r.push("<|channel|>analysis<|mess");
  CHECK(r.channel().empty());
  (void)r.push("age|>x");
  CHECK(r.channel() == "analysis");
  (void)r.push("<|end|><|start|>assistant<|channel|>final<|message|>y");
  CHECK(r.channel() == "final");
  CHECK(!r.ended());
  const HarmonyDelta d = r.push("<|return|>z");
  CHECK(r.ended());
  CHECK(d.content.empty());
}

TEST_CASE("harmony reply: the gpt-oss fixture's tokens, decoded as a generation decodes them, split the same") {
  const auto dir = reach::test::source_root() / "tests/data/families/gpt_oss/hf";
  const reach::Tokenizer tk = reach::Tokenizer::load(dir);
  const std::string reply =
      "<|channel|>analysis<|message|>We need a short greeting.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>Hello there, friend!<|return|>";
  const std::vector<int32_t> ids = tk.encode(reply, false);
  for (const char* special : {"<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|return|>"}) {
    INFO(special);
    REQUIRE(tk.find(special));
    CHECK(tk.is_special(*tk.find(special)));
  }
  reach::Tokenizer::StreamDecoder dec(tk);   // drops special tokens, as Generation's does
  HarmonyReply r;
  HarmonyDelta all;
  for (int32_t id : ids) {
    const HarmonyDelta d = r.push(reach::harmony_piece(tk, id, dec.push(id)));
    all.reasoning += d.reasoning;
    all.content += d.content;
  }
  const HarmonyDelta d = r.push(dec.flush());
  all.reasoning += d.reasoning + r.flush().reasoning;
  all.content += d.content;
  CHECK(all.reasoning == "We need a short greeting.");
  CHECK(all.content == "Hello there, friend!");
}
