// The C API (include/reach.h): replies, the serving engine's reply text (runtime/serve/reply_text:
// stop strings with their held-back tail, harmony's channels) over a token stream.
#include "capi/capi_internal.hpp"
#include "runtime/text/chat_template.hpp"

using namespace reach;
using namespace reach::capi;

namespace {

// The model's chat template is harmony's (gpt-oss); no template: plain text.
bool template_has_channels(const reach_model* m, const Tokenizer& tk) {
  try {
    return ChatTemplate::for_tokenizer(tk, m->model->dir().string()).has_channels();
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

void reach::capi::restart_reply(reach_reply* r) {
  r->dec = std::make_unique<Tokenizer::StreamDecoder>(r->tokenizer);   // special tokens dropped, as a generation does
  const bool harmony_calls = r->tools && r->tools->harmony;
  r->text = std::make_unique<serve::ReplyText>(r->stops, r->channels ? &r->tokenizer : nullptr,
                                               harmony_calls ? r->tool_prefix : "", harmony_calls);
  r->tool_stream = r->tools ? std::make_unique<serve::ToolCallStream>(*r->tools, r->tool_in_call, SIZE_MAX) : nullptr;
  r->calls.clear();
}

namespace {

void start(reach_reply* r) { restart_reply(r); }

void hand_out(reach_reply* r, serve::ReplyPiece piece, reach_reply_text* out) {
  need(out, REACH_ERROR_INVALID_ARGUMENT, "text is NULL");
  need(out->size != 0, REACH_ERROR_INVALID_ARGUMENT, "text->size is 0: set it to sizeof(reach_reply_text)");
  r->content = std::move(piece.content);
  r->reasoning = std::move(piece.reasoning);
  reach_reply_text full{};
  full.size = sizeof full;
  full.content = r->content.c_str();
  full.content_len = r->content.size();
  full.reasoning = r->reasoning.c_str();
  full.reasoning_len = r->reasoning.size();
  full.stopped = r->text->stopped();
  write_info(out, full, "text");
}

}  // namespace

extern "C" {

reach_reply_params reach_reply_default_params(void) {
  reach_reply_params p{};
  p.size = sizeof p;
  return p;
}

reach_status reach_reply_create(const reach_model* model, const reach_reply_params* params, reach_reply** out) {
  return guard(__func__, [&] {
    need(out, REACH_ERROR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    auto m = live(model, Kind::model, "model");
    const reach_reply_params p = read_params(params, reach_reply_default_params(), "reach_reply");
    need(p.n_stop <= REACH_REPLY_MAX_STOP, REACH_ERROR_INVALID_ARGUMENT,
         "n_stop is " + std::to_string(p.n_stop) + ": at most " + std::to_string(REACH_REPLY_MAX_STOP) +
             " stop strings");
    need(p.stop || p.n_stop == 0, REACH_ERROR_INVALID_ARGUMENT, "stop is NULL with n_stop > 0");
    need(p.channels >= -1 && p.channels <= 1, REACH_ERROR_INVALID_ARGUMENT,
         "channels is " + std::to_string(p.channels) + ": use 0, 1 or REACH_REPLY_CHANNELS_AUTO (-1)");
    const Tokenizer* tk = m->model->tokenizer();
    need(tk != nullptr, REACH_ERROR_UNSUPPORTED,
         "the model was loaded without a tokenizer (require_tokenizer = 0 and no tokenizer.json): a reply needs "
         "its tokens' text");
    auto r = std::make_unique<reach_reply>(*tk);
    for (size_t i = 0; i < p.n_stop; ++i) {
      need(p.stop[i] && *p.stop[i], REACH_ERROR_INVALID_ARGUMENT,
           "stop[" + std::to_string(i) + "] is " + (p.stop[i] ? "empty" : "NULL") + ": stop strings are non-empty");
      r->stops.emplace_back(p.stop[i]);
    }
    r->channels = p.channels == REACH_REPLY_CHANNELS_AUTO ? template_has_channels(m.get(), *tk) : p.channels == 1;
    start(r.get());
    registry_add(r.get(), Kind::reply);
    *out = r.release();
  });
}

reach_status reach_reply_push(reach_reply* reply, int32_t token, reach_reply_text* text) {
  return guard(__func__, [&] {
    auto r = live(reply, Kind::reply, "reply");
    std::lock_guard<std::mutex> l(r->mu);
    need(token >= 0 && token < r->tokenizer.vocab_size(), REACH_ERROR_INVALID_ARGUMENT,
         "token " + std::to_string(token) + " is outside the vocabulary (0.." +
             std::to_string(r->tokenizer.vocab_size() - 1) + ")");
    need(text && text->size != 0, REACH_ERROR_INVALID_ARGUMENT,
         "text is NULL or text->size is 0: set it to sizeof(reach_reply_text)");
    serve::ReplyPiece piece;
    if (!r->text->stopped()) piece = r->text->push(token, r->dec->push(token));
    hand_out(r.get(), take_tool_calls(r.get(), std::move(piece), false), text);
  });
}

reach_status reach_reply_finish(reach_reply* reply, reach_reply_text* text) {
  return guard(__func__, [&] {
    auto r = live(reply, Kind::reply, "reply");
    std::lock_guard<std::mutex> l(r->mu);
    need(text && text->size != 0, REACH_ERROR_INVALID_ARGUMENT,
         "text is NULL or text->size is 0: set it to sizeof(reach_reply_text)");
    hand_out(r.get(), take_tool_calls(r.get(), r->text->finish(r->dec->flush()), true), text);
  });
}

reach_status reach_reply_reset(reach_reply* reply) {
  return guard(__func__, [&] {
    auto r = live(reply, Kind::reply, "reply");
    std::lock_guard<std::mutex> l(r->mu);
    start(r.get());
  });
}

reach_status reach_reply_free(reach_reply* reply) {
  if (!reply) return REACH_OK;
  return guard(__func__, [&] {
    FreeClaim claim(reply, Kind::reply, "reply");
    claim.commit();
    delete reply;
  });
}

}  // extern "C"
