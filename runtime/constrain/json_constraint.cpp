#include "runtime/constrain/json_constraint.hpp"

#include <cstring>
#include <limits>

#include "base/error.hpp"

namespace reach {

ConstrainedReply::ConstrainedReply(std::shared_ptr<const JsonConstraint> constraint)
    : c_(std::move(constraint)), state_(c_->grammar.get()) {
  if (c_->tools) tools_ = std::make_unique<ToolCallReply>(c_->tools, c_->trie);
}

void ConstrainedReply::restart() {
  if (tools_) tools_->restart();
  state_ = JsonState(c_->grammar.get());
  ended_ = false;
}

void ConstrainedReply::allowed(std::span<const int32_t> stop_ids, size_t count, std::vector<uint8_t>& allowed) const {
  if (tools_) return tools_->allowed(stop_ids, count, allowed);
  const TokenTrie& t = *c_->trie;
  allowed.assign(count, 0);
  if (ended_) return;
  const size_t vocab = std::min(count, t.vocab());
  if (!state_.finished()) {
    if (state_.in_plain_string()) {
      // Most tokens leave a string as it is: copied wholesale; the walk covers the others.
      std::memcpy(allowed.data(), t.plain().data(), vocab);
      walk_trie(t.not_plain(), state_, walk_, allowed.data());
    } else {
      std::vector<uint8_t>& a = allowed;
      if (vocab < t.vocab()) {   // a model with fewer logits than the tokenizer has ids
        std::vector<uint8_t> full(t.vocab(), 0);
        walk_trie(t.all(), state_, walk_, full.data());
        std::memcpy(a.data(), full.data(), vocab);
      } else {
        walk_trie(t.all(), state_, walk_, a.data());
      }
    }
  }
  if (state_.can_end())
    for (int32_t id : stop_ids)
      if (id >= 0 && size_t(id) < count) allowed[size_t(id)] = 1;
}

void ConstrainedReply::mask(std::span<const float> logits, std::span<const int32_t> stop_ids, std::vector<float>& out) {
  const auto t0 = std::chrono::steady_clock::now();
  allowed(stop_ids, logits.size(), allowed_);
  out.resize(logits.size());
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  size_t n = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    out[i] = allowed_[i] ? logits[i] : kNone;
    n += allowed_[i];
  }
  mask_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++masks_;
  if (n == 0 && tools_)
    throw Error(ErrorCode::invalid_argument, tools_->ended() ? "the reply has ended"
                                             : tools_->in_call() ? "no token of the vocabulary continues the tool call here"
                                                                 : "the tool call is complete but the model has no end-of-reply token to end it");
  if (n == 0)
    throw Error(ErrorCode::invalid_argument,
                ended_ ? "the JSON document has ended: rewind (or set the schema again) for a new one"
                : state_.can_end() ? "the JSON document is complete but the model has no end-of-reply token to end it"
                                 : "no token of the vocabulary continues the JSON document here");
}

void ConstrainedReply::advance(int32_t id, bool stop) {
  if (tools_) return tools_->advance(id, stop);
  if (stop) {
    if (!state_.can_end()) throw Error(ErrorCode::invalid_argument, "an end token came before the JSON document was complete");
    ended_ = true;
    return;
  }
  const TokenTrie& t = *c_->trie;
  const bool known = id >= 0 && size_t(id) < t.vocab() && !t.bytes(id).empty();
  bool ok = known && !ended_;
  for (size_t i = 0; ok && i < t.bytes(id).size(); ++i) ok = state_.feed(uint8_t(t.bytes(id)[i]));
  if (!ok)
    throw Error(ErrorCode::invalid_argument,
                "token " + std::to_string(id) + " does not continue the JSON document (sample with the mask)");
}

}  // namespace reach
