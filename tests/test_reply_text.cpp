// The server's reply text (runtime/serve/reply_text.*) and the chat response shapes of a harmony reply
// (server/openai_api.*), without a model: the reply's tokens come from encoding a written reply with the
// gpt-oss fixture's tokenizer and decoding them as a generation does.  A harmony reply's final channel is
// the content, its analysis the reasoning (message.reasoning_content, delta.reasoning_content), and stop
// strings are looked for in the final channel only; a plain reply keeps its stop strings as before.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "runtime/text/tokenizer.hpp"
#include "runtime/serve/reply_text.hpp"
#include "server/openai_api.hpp"
#include "tests/support/files.hpp"

using nlohmann::json;
using reach::Tokenizer;
using reach::serve::ReplyPiece;
using reach::serve::ReplyText;

namespace {

const Tokenizer& gpt_oss_tokenizer() {
  static const Tokenizer tk = Tokenizer::load(reach::test::source_root() / "tests/data/families/gpt_oss/hf");
  return tk;
}

struct Sent {
  std::string reasoning, content;
  bool stopped = false;
};

// `reply` as generated tokens: encoded, then each token decoded as Generation decodes it (special
// tokens dropped) and fed with its id, as the scheduler feeds them.
Sent stream(const std::string& reply, std::vector<std::string> stops, bool channels) {
  const Tokenizer& tk = gpt_oss_tokenizer();
  ReplyText r(std::move(stops), channels ? &tk : nullptr);
  Tokenizer::StreamDecoder dec(tk);
  Sent s;
  for (int32_t id : tk.encode(reply, false)) {
    const ReplyPiece p = r.push(id, dec.push(id));
    s.reasoning += p.reasoning;
    s.content += p.content;
    if (r.stopped()) break;
  }
  if (!r.stopped()) {
    const ReplyPiece p = r.finish(dec.flush());
    s.reasoning += p.reasoning;
    s.content += p.content;
  }
  s.stopped = r.stopped();
  return s;
}

const std::string kReply =
    "<|channel|>analysis<|message|>Think: the answer is 4. STOP? No.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4. STOP here, not shown.";

}  // namespace

TEST_CASE("reply text: a harmony reply is split; stop strings end the final channel only") {
  Sent s = stream(kReply, {}, true);
  CHECK(s.reasoning == "Think: the answer is 4. STOP? No.");
  CHECK(s.content == "2 + 2 = 4. STOP here, not shown.");
  CHECK(!s.stopped);

  s = stream(kReply, {"STOP"}, true);
  CHECK(s.reasoning == "Think: the answer is 4. STOP? No.");   // not searched: the analysis goes on
  CHECK(s.content == "2 + 2 = 4. ");
  CHECK(s.stopped);
  // Header words are not the reply's text: a stop string "final" or "assistant" never matches them.
  s = stream(kReply, {"final", "assistant", "analysis"}, true);
  CHECK(s.content == "2 + 2 = 4. STOP here, not shown.");
  CHECK(!s.stopped);

  // A reply cut inside its analysis: no content.
  s = stream("<|channel|>analysis<|message|>Still going", {"x"}, true);
  CHECK(s.reasoning == "Still going");
  CHECK(s.content.empty());
}

TEST_CASE("reply text: a reply without channels keeps its text and stop strings as before") {
  // The decoder drops special tokens: the plain reply is the text between them.
  Sent s = stream("Hello there. STOP and more", {"STOP"}, false);
  CHECK(s.reasoning.empty());
  CHECK(s.content == "Hello there. ");
  CHECK(s.stopped);
  s = stream("Hello there.", {"STOP"}, false);
  CHECK(s.content == "Hello there.");
  CHECK(!s.stopped);
}

TEST_CASE("chat responses: reasoning_content in the message and in stream deltas") {
  using reach::server::Endpoint;
  using reach::server::FinishReason;
  const std::string reasoning = "thinking";
  json j = reach::server::completion_json(Endpoint::chat, "id", 1, "m", "answer", FinishReason::stop, {3, 4}, nullptr,
                                          &reasoning);
  CHECK(j["choices"][0]["message"]["content"] == "answer");
  CHECK(j["choices"][0]["message"]["reasoning_content"] == "thinking");
  // Replies without channels have no such field.
  j = reach::server::completion_json(Endpoint::chat, "id", 1, "m", "answer", FinishReason::stop, {3, 4});
  CHECK(!j["choices"][0]["message"].contains("reasoning_content"));

  j = reach::server::chunk_json(Endpoint::chat, "id", 1, "m", "", std::nullopt, false, nullptr, "step 1");
  CHECK(j["choices"][0]["delta"] == json{{"reasoning_content", "step 1"}});
  j = reach::server::chunk_json(Endpoint::chat, "id", 1, "m", "Paris", std::nullopt, false);
  CHECK(j["choices"][0]["delta"] == json{{"content", "Paris"}});
}

TEST_CASE("chat requests: reasoning_effort is low, medium or high") {
  using reach::server::ApiError;
  using reach::server::Endpoint;
  const auto r = reach::server::parse_generation_request(
      R"({"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "high"})", Endpoint::chat);
  CHECK(r.reasoning_effort == std::optional<std::string>("high"));
  CHECK(!reach::server::parse_generation_request(R"({"messages": [{"role": "user", "content": "hi"}]})",
                                                 Endpoint::chat)
             .reasoning_effort);
  for (const char* body : {R"({"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "max"})",
                           R"({"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": 2})"}) {
    INFO(body);
    try {
      (void)reach::server::parse_generation_request(body, Endpoint::chat);
      FAIL("accepted");
    } catch (const ApiError& e) {
      CHECK(e.status == 400);
      CHECK(e.param == "reasoning_effort");
    }
  }
}
