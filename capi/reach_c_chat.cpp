// The C API (include/reach.h): chat prompts, the model's chat template applied as `reach run --chat` and
// `reach serve` apply it (runtime/text/chat_template: encode_chat), and the tokens that end the reply.
#include "capi/capi_internal.hpp"
#include "runtime/text/chat_template.hpp"

using namespace reach;
using namespace reach::capi;

namespace {

// The conversation's prompt and end tokens.  Text calls take no device lock (reach.h): the template
// is found again from the tokenizer each time, which reads no file.
ChatPrompt chat_prompt(const reach_model* m, const reach_chat_message* messages, size_t n_messages) {
  const Tokenizer* tk = m->model->tokenizer();
  need(tk != nullptr, REACH_ERROR_UNSUPPORTED,
       "the model was loaded without a tokenizer (require_tokenizer = 0 and no tokenizer.json): a chat prompt "
       "needs its chat template and vocabulary");
  std::vector<ChatMessage> list;
  list.reserve(n_messages);
  for (size_t i = 0; i < n_messages; ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    need(messages[i].role && *messages[i].role, REACH_ERROR_INVALID_ARGUMENT,
         at + ".role is " + (messages[i].role ? "empty" : "NULL") + ": pass \"system\", \"user\" or \"assistant\"");
    need(messages[i].content != nullptr, REACH_ERROR_INVALID_ARGUMENT, at + ".content is NULL");
    list.push_back({messages[i].role, messages[i].content});
  }
  const ChatTemplate t = ChatTemplate::for_tokenizer(*tk, m->model->dir().string());
  return encode_chat(*tk, t, list);
}

}  // namespace

extern "C" {

reach_status reach_chat_tokenize(const reach_model* model, const reach_chat_message* messages, size_t n_messages,
                                 int32_t* tokens, size_t capacity, size_t* n_tokens) {
  return guard(__func__, [&] {
    auto m = live(model, Kind::model, "model");
    need(n_tokens, REACH_ERROR_INVALID_ARGUMENT, "n_tokens is NULL");
    need(messages || n_messages == 0, REACH_ERROR_INVALID_ARGUMENT, "messages is NULL");
    need(n_messages > 0, REACH_ERROR_INVALID_ARGUMENT, "n_messages is 0: a chat prompt needs a message");
    const std::vector<int32_t> ids = chat_prompt(m.get(), messages, n_messages).ids;
    *n_tokens = ids.size();
    if (!tokens) return;
    need(capacity >= ids.size(), REACH_ERROR_BUFFER_TOO_SMALL,
         "the chat prompt needs " + std::to_string(ids.size()) + " tokens, the buffer holds " +
             std::to_string(capacity));
    std::copy(ids.begin(), ids.end(), tokens);
  });
}

reach_status reach_chat_end_tokens(const reach_model* model, int32_t* tokens, size_t capacity, size_t* n_tokens) {
  return guard(__func__, [&] {
    auto m = live(model, Kind::model, "model");
    need(n_tokens, REACH_ERROR_INVALID_ARGUMENT, "n_tokens is NULL");
    // The end tokens do not depend on the messages: those of a one-message conversation.
    const reach_chat_message probe{"user", ""};
    const std::vector<int32_t> ids = chat_prompt(m.get(), &probe, 1).stop_ids;
    *n_tokens = ids.size();
    if (!tokens) return;
    need(capacity >= ids.size(), REACH_ERROR_BUFFER_TOO_SMALL,
         "the chat template has " + std::to_string(ids.size()) + " end tokens, the buffer holds " +
             std::to_string(capacity));
    std::copy(ids.begin(), ids.end(), tokens);
  });
}

}  // extern "C"
