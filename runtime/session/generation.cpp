#include "runtime/session/generation.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace reach {

Generation::Generation(Model& model, const GenerationOptions& options)
    : model_(model), sampler_(std::make_unique<Sampler>(options.sampling)) {   // Sampler checks the params
  session_ = std::make_unique<Session>(model, options.session);
  if (const Tokenizer* tk = model.tokenizer()) decoder_ = std::make_unique<Tokenizer::StreamDecoder>(*tk);
  set_stop_ids(options.stop_ids);
}

void Generation::set_stop_ids(std::span<const int32_t> extra) {
  stop_ids_ = model_.eos_ids();
  for (int32_t id : extra)
    if (!is_stop(id)) stop_ids_.push_back(id);
}

void Generation::restart(const SamplerParams& sampling, std::span<const int32_t> stop_ids, uint32_t keep) {
  auto sampler = std::make_unique<Sampler>(sampling);
  session_->rewind(keep);
  sampler_ = std::move(sampler);
  if (decoder_) decoder_->reset();
  set_stop_ids(stop_ids);
  logprobs_top_ = -1;
  if (constraint_) constraint_->restart();
}

void Generation::set_logprobs(int top) {
  if (top > kMaxTopLogprobs)
    throw Error(ErrorCode::invalid_argument, "logprobs: at most " + std::to_string(kMaxTopLogprobs) +
                                                 " top tokens per position, got " + std::to_string(top));
  logprobs_top_ = std::max(top, -1);
}

std::string Generation::token_text(int32_t id) {
  const Tokenizer* tk = model_.tokenizer();
  if (!tk) return {};
  if (!token_bytes_) token_bytes_ = TokenTrie::for_tokenizer(*tk);   // shared, built once per tokenizer
  if (id >= 0 && size_t(id) < token_bytes_->vocab() && !token_bytes_->bytes(id).empty())
    return token_bytes_->bytes(id);
  return tk->decode(std::span<const int32_t>(&id, 1), false);
}

void Generation::set_constraint(std::shared_ptr<const JsonConstraint> constraint) {
  constraint_ = constraint ? std::make_unique<ConstrainedReply>(std::move(constraint)) : nullptr;
}

void Generation::set_sampling(const SamplerParams& sampling) { sampler_ = std::make_unique<Sampler>(sampling); }

bool Generation::is_stop(int32_t id) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
}

int32_t Generation::sample() {
  if (!constraint_) return sampler_->sample(session_->logits());
  constraint_->mask(session_->logits(), stop_ids_, masked_);
  const int32_t id = sampler_->sample(masked_);
  constraint_->advance(id, is_stop(id));
  return id;
}

GeneratedToken Generation::next() {
  if (!decoder_)
    throw Error(ErrorCode::invalid_argument, "the model was loaded without a tokenizer: it generates token ids only");
  GeneratedToken t;
  t.id = sample();
  t.stop = is_stop(t.id);
  if (logprobs_top_ >= 0) {
    t.logprob = token_logprobs(session_->logits(), t.id, logprobs_top_);
    t.logprob->token = token_text(t.id);
    for (TopLogprob& alt : t.logprob->top) alt.token = token_text(alt.id);
  }
  if (!t.stop) t.text = decoder_->push(t.id);
  return t;
}

std::string Generation::flush() { return decoder_ ? decoder_->flush() : std::string(); }

}  // namespace reach
