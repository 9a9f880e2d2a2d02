/* reach/tools.h - function calling: tools the model may call.
 * Part of the C API: include <reach.h> (this file is included by it and
 * can be included alone). */
#ifndef REACH_TOOLS_H
#define REACH_TOOLS_H

#include "chat.h"
#include "reply.h"
#include "session.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------- function calling
 *
 * The model may call functions the host declares, as `reach serve` lets it
 * (the OpenAI API's tools): tools_json is the API's `tools` array,
 *   [{"type": "function", "function": {"name": "get_weather",
 *     "description": "...", "parameters": {JSON schema}}}, ...]
 * and tool_choice one of "auto" (NULL: the same; text or calls), "none" (no
 * tools: the prompt leaves them out), "required" (one call of one of them) or
 * a tool's name (one call of that one).  Chat templates with tool calls:
 * Qwen 2.5, Qwen3, Llama 3.1/3.2, Mistral v3 / Nemo, SmolLM3, Phi-4-mini and
 * gpt-oss (harmony); others are UNSUPPORTED.
 *
 * Three calls take the same tools_json and tool_choice:
 *  - reach_chat_tokenize_tools: the prompt with the tools, ending where a
 *    forced call opens (its tag, or harmony's call header);
 *  - reach_session_set_tools: the sampler's constraint.  A forced call's
 *    arguments follow the tool's parameters schema (the keywords of
 *    reach_session_set_json_schema; another is INVALID_ARGUMENT naming
 *    tools_json[i].function.parameters), then only an end token may come.
 *    Under "auto" the reply is free text until the model opens a call; from
 *    there the function's name is one of the tools' and its arguments follow
 *    that tool's schema (a schema the grammar cannot follow: any object);
 *    a family whose reply is the call (Llama 3.1, Mistral, Phi-4-mini) ends
 *    after it.  tools_json NULL or "" removes the constraint; rewind / reset
 *    start over;
 *  - reach_reply_set_tools: the reply (reach_reply_create; a harmony model's
 *    with channels) reads the calls out of the text: content then holds the
 *    text around them, and reach_reply_tool_calls_json gives the calls so
 *    far, all of them after reach_reply_finish, as
 *      [{"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}]
 *    (arguments as a JSON text, as the API carries them).
 *
 *   reach_chat_tokenize_tools(model, chat, 1, tools, "auto", ids, cap, &n);
 *   reach_session_set_tools(s, tools, "auto");
 *   reach_reply_set_tools(reply, tools, "auto");
 *   ... prefill ids, sample and push to the reply until an end token ...
 *   reach_reply_finish(reply, &t);
 *   reach_reply_tool_calls_json(reply, buf, sizeof buf, &len);   // "[]": a text answer
 *
 * Errors: tools_json not an array of such tools (a name of other than
 * letters, digits, '_' and '-', a name used twice), a tool_choice that is
 * none of the forms: INVALID_ARGUMENT naming it.  The tool history of a
 * conversation (assistant calls, tool results) is not taken here. */
REACH_API reach_status reach_chat_tokenize_tools(const reach_model* model, const reach_chat_message* messages,
                                                 size_t n_messages, const char* tools_json, const char* tool_choice,
                                                 int32_t* tokens, size_t capacity, size_t* n_tokens);
REACH_API reach_status reach_session_set_tools(reach_session* session, const char* tools_json,
                                               const char* tool_choice);
/* Starts the reply over (as reach_reply_reset) with the tools; NULL or "" tools_json: none. */
REACH_API reach_status reach_reply_set_tools(reach_reply* reply, const char* tools_json, const char* tool_choice);
/* The calls' JSON, NUL-terminated: *length its byte length; capacity at least *length + 1 (else
 * BUFFER_TOO_SMALL); json = NULL asks the length. */
REACH_API reach_status reach_reply_tool_calls_json(reach_reply* reply, char* json, size_t capacity, size_t* length);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* REACH_TOOLS_H */
