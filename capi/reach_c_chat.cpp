// The C API (include/reach.h): a conversation through the model's chat template, as prompt ids
// (runtime/text/chat_template: encode_chat, the code `reach run --chat` and `reach serve` use).
#include "capi/capi_internal.hpp"
#include "runtime/text/chat_template.hpp"

using namespace reach;
using namespace reach::capi;

extern "C" {

reach_status reach_chat_encode(const reach_model* model, const reach_chat_message* messages, size_t n_messages,
                               int32_t* tokens, size_t capacity, size_t* n_tokens, int32_t* stop_ids,
                               size_t* n_stop) {
  return guard(__func__, [&] {
    auto m = live(model, Kind::model, "model");
    need(n_tokens, REACH_ERROR_INVALID_ARGUMENT, "n_tokens is NULL");
    need(messages || n_messages == 0, REACH_ERROR_INVALID_ARGUMENT, "messages is NULL");
    need(n_messages > 0, REACH_ERROR_INVALID_ARGUMENT, "no messages: pass at least one");
    const Tokenizer* tk = m->model->tokenizer();
    need(tk != nullptr, REACH_ERROR_UNSUPPORTED,
         "the model was loaded without a tokenizer (require_tokenizer = 0 and no tokenizer.json)");
    std::vector<ChatMessage> conversation;
    for (size_t i = 0; i < n_messages; ++i) {
      need(messages[i].role && messages[i].content, REACH_ERROR_INVALID_ARGUMENT,
           "messages[" + std::to_string(i) + "]: role or content is NULL");
      conversation.push_back({messages[i].role, messages[i].content});
    }
    const ChatTemplate t = ChatTemplate::for_tokenizer(*tk, m->model->dir().string());
    ChatPrompt c = encode_chat(*tk, t, conversation);
    *n_tokens = c.ids.size();
    if (n_stop) *n_stop = std::min<size_t>(c.stop_ids.size(), REACH_CHAT_MAX_STOP);
    if (stop_ids) std::copy_n(c.stop_ids.begin(), std::min<size_t>(c.stop_ids.size(), REACH_CHAT_MAX_STOP), stop_ids);
    if (!tokens) return;
    need(capacity >= c.ids.size(), REACH_ERROR_BUFFER_TOO_SMALL,
         "the conversation needs " + std::to_string(c.ids.size()) + " tokens, the buffer holds " +
             std::to_string(capacity));
    std::copy(c.ids.begin(), c.ids.end(), tokens);
  });
}

}  // extern "C"
