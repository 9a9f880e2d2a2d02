/* reach/chat.h - chat templates: a conversation as the model reads it.
 * Part of the C API: include <reach.h> (this file is included by it and
 * can be included alone). */
#ifndef REACH_CHAT_H
#define REACH_CHAT_H

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ chat
 *
 * A conversation as the model was tuned to read it: the prompt `reach run --chat` and `reach serve`'s
 * /v1/chat/completions build.  reach recognises the template's family (tokenizer_config.json's
 * chat_template, a GGUF's tokenizer.chat_template, or without one the turn tokens of the vocabulary:
 * ChatML, Gemma, Llama 2 / 3 / 3.1, Mistral, Phi-3 / 4, OLMo 2, Qwen3, SmolLM3, harmony) and renders
 * it itself; it runs no Jinja.
 *
 *   reach_chat_message chat[] = {{"system", "You are Brom, the village smith."}, {"user", "Hello!"}};
 *   reach_chat_tokenize(model, chat, 2, ids, capacity, &n);     // then prefill them
 *   reach_chat_end_tokens(model, ends, 8, &n_ends);              // the reply ends at one of these
 *   ... sample / step until is_eos or the token is in ends; a reply with
 *   REACH_REPLY_CHANNELS_AUTO splits a harmony (gpt-oss) reply into its channels.
 */
typedef struct reach_chat_message {
  const char* role;     /* "system", "user" or "assistant" (UTF-8, NUL-terminated, non-empty) */
  const char* content;  /* UTF-8, NUL-terminated; may be empty */
} reach_chat_message;

/* The n_messages messages through the model's chat template with the assistant's turn opened, as
 * token ids (BOS included once).  *n_tokens receives the count; tokens = NULL asks only the count
 * (REACH_OK); a capacity too small gives REACH_ERROR_BUFFER_TOO_SMALL.  UNSUPPORTED without a
 * tokenizer or with a template reach does not recognise; INVALID_ARGUMENT for no messages, a NULL or
 * empty role, or a conversation the template itself refuses (roles out of turn, a system message it
 * has no place for), naming why. */
REACH_API reach_status reach_chat_tokenize(const reach_model* model, const reach_chat_message* messages,
                                           size_t n_messages, int32_t* tokens, size_t capacity, size_t* n_tokens);

/* The tokens that end the assistant's turn: the template's end-of-turn token (<|im_end|>,
 * <end_of_turn>, <|eot_id|>, ...; harmony: <|return|> and <|call|>) and the model's EOS, where the
 * vocabulary has them.  reach_session_sample's is_eos says only the model's EOS ids, which
 * need not hold the end-of-turn token (reach_model_is_eos): stop at either.  Counts and buffers as reach_chat_tokenize. */
REACH_API reach_status reach_chat_end_tokens(const reach_model* model, int32_t* tokens, size_t capacity,
                                             size_t* n_tokens);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* REACH_CHAT_H */
