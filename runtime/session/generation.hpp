#pragma once
// What produces a reply from a model: a Session (the KV cache and the forward
// programs), the Sampler that picks each next token from its logits, the
// StreamDecoder that turns the chosen tokens into text, and the ids that end
// the reply (the model's EOS ids and the caller's own, e.g. a chat template's
// end-of-turn token).  `reach run`, the server's slots and the C API's
// sessions each hold one.
//
// The caller drives the session (prefill, decode, or a DecodeBatch step) and
// asks next() for each token:
//   gen.session().prefill(prompt);
//   for (;;) {
//     const GeneratedToken t = gen.next();
//     if (t.stop) break;          // t.text is empty: an end token is not printed
//     print(t.text);
//     gen.session().decode(t.id);
//   }
//   print(gen.flush());
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/constrain/json_constraint.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/sampler.hpp"
#include "runtime/session/session.hpp"
#include "runtime/session/token_logprobs.hpp"
#include "runtime/text/tokenizer.hpp"

namespace reach {

struct GenerationOptions {
  SessionOptions session;
  SamplerParams sampling;
  std::vector<int32_t> stop_ids;   // ids that end a reply besides the model's EOS ids (ChatPrompt::stop_ids)
};

struct GeneratedToken {
  int32_t id = 0;
  bool stop = false;   // one of stop_ids(): the reply ends here
  std::string text;    // the text that became final with this token (empty for a stop token)
  std::optional<TokenLogprob> logprob;   // set while logprobs are on (set_logprobs)
};

class Generation {
 public:
  // Checks the sampling parameters (validate_sampler_params) before it makes
  // the session, then throws what the Session constructor throws.  A model
  // without a tokenizer gives a generation without text: next() throws.
  Generation(Model& model, const GenerationOptions& options);
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  Session& session() { return *session_; }
  const Session& session() const { return *session_; }
  Model& model() const { return model_; }

  // Another reply on the same session: the session back to position `keep`
  // (the first `keep` cached positions stay, for a prompt that starts with the
  // same tokens), a new sampler, the text decoder emptied, logprobs off, the
  // stop ids the model's EOS ids and these.  Checks the sampling parameters
  // and that the session can rewind to `keep` (Session::rewind) first: a
  // rejected call changes nothing.
  void restart(const SamplerParams& sampling, std::span<const int32_t> stop_ids, uint32_t keep = 0);
  // A new sampler (its random state starts again from params.seed).
  void set_sampling(const SamplerParams& sampling);

  // next() reports each token's logprob and the `top` most likely tokens
  // (0..kMaxTopLogprobs); -1 turns it off (the default: no cost per token).
  void set_logprobs(int top);

  // The model's EOS ids, then the extra ones not among them.
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  bool is_stop(int32_t id) const;

  // Constrained output: from the next sample on, each token keeps the reply a prefix of a document the
  // constraint accepts, and the reply ends (a stop id) only once the document is whole.  Null: none.
  // restart() keeps it and starts a new document.
  void set_constraint(std::shared_ptr<const JsonConstraint> constraint);
  const ConstrainedReply* constraint() const { return constraint_.get(); }
  void restart_constraint() { if (constraint_) constraint_->restart(); }   // a new document, nothing else

  // The next token from the session's logits (the sampler's choice, within the constraint).
  int32_t sample();
  // sample(), and the text of the token when it is not a stop token.
  GeneratedToken next();
  // The text still held back (an incomplete UTF-8 character): the end of the reply.
  std::string flush();

 private:
  void set_stop_ids(std::span<const int32_t> extra);
  // The bytes the token adds mid-reply (a piece of a UTF-8 character stays that byte; a SentencePiece
  // word start keeps its space); special tokens, which add none, as their text.
  std::string token_text(int32_t id);

  Model& model_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<Tokenizer::StreamDecoder> decoder_;   // null without a tokenizer
  std::vector<int32_t> stop_ids_;
  int logprobs_top_ = -1;   // -1: no logprobs
  std::unique_ptr<ConstrainedReply> constraint_;   // null: unconstrained
  std::shared_ptr<const TokenTrie> token_bytes_;   // token_text's table, fetched on the first logprobs
  std::vector<float> masked_;                      // the logits with the constraint applied
};

}  // namespace reach
