/* reach/reply.h - replies: stop strings, harmony channels, held-back text.
 * Part of the C API: include <reach.h> (this file is included by it and
 * can be included alone). */
#ifndef REACH_REPLY_H
#define REACH_REPLY_H

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ replies
 *
 * A reply's text as its reader should see it, fed token by token (the same
 * assembly `reach serve` and `reach run` use):
 *  - stop strings end it: the text before the first one is the reply, and
 *    text that may still become a stop string is held back until it cannot
 *    (so a stop string split over tokens is never shown in part);
 *  - a reply in harmony's channels (gpt-oss's chat format) is split into its
 *    final channel (the answer: `content`) and its analysis channel (the
 *    model's reasoning: `reasoning`); stop strings are looked for in the
 *    final channel only, and message headers are in neither.
 * The tokens pushed are the sampled ones, end tokens excluded (stop when
 * is_eos is 1).  A reply is independent of any session: one per generation,
 * reach_reply_reset for the next.
 *
 *   const char* stops[] = {"\nUser:"};
 *   reach_reply_params rp = reach_reply_default_params();
 *   rp.stop = stops;
 *   rp.n_stop = 1;
 *   rp.channels = REACH_REPLY_CHANNELS_AUTO;
 *   reach_reply_create(model, &rp, &reply);
 *   reach_reply_text t = {sizeof t};
 *   for (reach_session_sample(s, &tok, &eos); !eos; reach_session_step(s, tok, &tok, &eos)) {
 *     reach_reply_push(reply, tok, &t);
 *     show(t.content, t.content_len);        // and t.reasoning, t.reasoning_len, if wanted
 *     if (t.stopped) break;                  // a stop string: the reply is over
 *   }
 *   reach_reply_finish(reply, &t);           // the held-back tail
 *   show(t.content, t.content_len);
 */
typedef struct reach_reply reach_reply;

#define REACH_REPLY_MAX_STOP 16      /* stop strings per reply at most */
#define REACH_REPLY_CHANNELS_AUTO -1 /* channels as the model's chat template says (harmony: 1) */

typedef struct reach_reply_params {
  uint32_t size;
  const char* const* stop;   /* n_stop stop strings: UTF-8, NUL-terminated, non-empty; copied.  NULL: none */
  size_t n_stop;             /* 0..REACH_REPLY_MAX_STOP */
  int32_t channels;          /* 0 (default): plain text, all of it content; 1: harmony channels;
                                REACH_REPLY_CHANNELS_AUTO: 1 when the model's chat template is harmony's */
  uint32_t reserved[16];
} reach_reply_params;

/* What a push or a finish adds to the reply (either text may be empty).  Each
 * text is NUL-terminated, its byte length beside it; the pointers stay valid
 * until the next call on this reply. */
typedef struct reach_reply_text {
  uint32_t size;             /* set by the caller: sizeof(reach_reply_text) */
  const char* content;       /* the answer's text now final (the final channel with channels) */
  size_t content_len;
  const char* reasoning;     /* the analysis channel's text now final; always empty without channels */
  size_t reasoning_len;
  int32_t stopped;           /* 1: a stop string ended the reply; nothing more comes, stop generating */
  uint32_t reserved[8];
} reach_reply_text;

REACH_API reach_reply_params reach_reply_default_params(void);

/* A reply over the model's tokenizer (UNSUPPORTED without one).  params may
 * be NULL (no stop strings, no channels).  An empty stop string, more than
 * REACH_REPLY_MAX_STOP, or channels outside {-1, 0, 1} are INVALID_ARGUMENT.
 * The reply may outlive the model, as a stream does. */
REACH_API reach_status reach_reply_create(const reach_model* model, const reach_reply_params* params,
                                          reach_reply** out);

/* Appends a sampled token; *text (text->size set) receives what is now safe
 * to show.  After a stop string, pushes add nothing (stopped stays 1). */
REACH_API reach_status reach_reply_push(reach_reply* reply, int32_t token, reach_reply_text* text);

/* The end of the reply: the text still held back (an incomplete character,
 * the start of a stop string that never completed, a harmony tail). */
REACH_API reach_status reach_reply_finish(reach_reply* reply, reach_reply_text* text);

/* Empties the reply for the next generation, with the same stop strings and channels. */
REACH_API reach_status reach_reply_reset(reach_reply* reply);

/* NULL is a no-op. */
REACH_API reach_status reach_reply_free(reach_reply* reply);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* REACH_REPLY_H */
