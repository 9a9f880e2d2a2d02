// The serving engine's reply assembly (runtime/serve/reply_assembly.*) without a model: tokens with
// their text and logprob entries go in as a Generation gives them; out come the events the Scheduler
// sends.  A logprob entry goes out with its token's text: text held back for a possible stop string
// holds its entry back too, and the entries of tokens past a stop string never go out.  Text offsets
// count characters of the reply, and a stop string found makes the finish reason "stop".
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "runtime/serve/reply_assembly.hpp"

using namespace reach;
using namespace reach::serve;

namespace {

GeneratedToken token(int32_t id, const std::string& text) {
  GeneratedToken t;
  t.id = id;
  t.text = text;
  t.logprob = TokenLogprob{};
  t.logprob->token = text;
  return t;
}

std::vector<std::string> tokens_of(const std::vector<TokenLogprob>& lp) {
  std::vector<std::string> out;
  for (const TokenLogprob& t : lp) out.push_back(t.token);
  return out;
}

}  // namespace

TEST_CASE("reply assembly: logprob entries go out with their text; a stop string drops the rest") {
  ReplyAssembly r({"END"}, nullptr);
  JobEvent e = r.push(token(1, "Hi"));
  CHECK(e.text == "Hi");
  CHECK(tokens_of(e.logprobs) == std::vector<std::string>{"Hi"});
  CHECK(e.logprobs[0].text_offset == 0);
  e = r.push(token(2, " E"));   // " E" may start "END": " " goes out, "E" is held, and so is its entry
  CHECK(e.text == " ");
  CHECK(e.logprobs.empty() == false);
  CHECK(tokens_of(e.logprobs) == std::vector<std::string>{" E"});   // its text starts within what was sent
  e = r.push(token(3, "N"));
  CHECK(e.text.empty());
  CHECK(e.logprobs.empty());   // "N" starts in the held-back tail
  e = r.push(token(4, "D and on"));
  CHECK(e.text.empty());
  CHECK(r.stopped());
  e = r.finish(FinishReason::length, "");
  CHECK(e.done);
  CHECK(e.finish == FinishReason::stop);   // the stop string, not the limit, ended it
  CHECK(e.text.empty());
  CHECK(e.logprobs.empty());   // tokens past the cut are left out, as their text is
}

TEST_CASE("reply assembly: without a stop string every entry goes out; offsets count characters") {
  ReplyAssembly r({"zzz"}, nullptr);
  JobEvent e = r.push(token(1, "\xc3\xa9t\xc3\xa9"));   // "été": 3 characters, 5 bytes
  CHECK(e.logprobs.size() == 1);
  e = r.push(token(2, " z"));
  CHECK(e.text == " ");   // "z" may start "zzz"
  CHECK(e.logprobs.size() == 1);
  CHECK(e.logprobs[0].text_offset == 3);
  e = r.push(token(3, "z"));
  CHECK(e.logprobs.empty());
  e = r.finish(FinishReason::length, "!");
  CHECK(e.done);
  CHECK(e.finish == FinishReason::length);
  CHECK(e.text == "zz!");   // the held-back tail was no stop string
  REQUIRE(e.logprobs.size() == 1);
  CHECK(e.logprobs[0].text_offset == 5);
}

TEST_CASE("reply assembly: tokens without logprobs give none; an end of reply gives the tail") {
  ReplyAssembly r({}, nullptr);
  GeneratedToken t;
  t.id = 5;
  t.text = "plain";
  JobEvent e = r.push(t);
  CHECK(e.text == "plain");
  CHECK(e.logprobs.empty());
  e = r.finish(FinishReason::stop, " tail");
  CHECK(e.text == " tail");
  CHECK(e.finish == FinishReason::stop);
}
