/* reach/session.h - sessions: prefill, decode, sampling, rewind, batches, JSON output.
 * Part of the C API: include <reach.h> (this file is included by it and
 * can be included alone). */
#ifndef REACH_SESSION_H
#define REACH_SESSION_H

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ sessions */

/* Values outside the ranges below (NaN, infinities, negative values) are
 * REACH_ERROR_INVALID_ARGUMENT with a message naming the field. */
typedef struct reach_sampling_params {
  uint32_t size;
  float temperature;   /* 0.8; finite and >= 0; 0: greedy (argmax) */
  int32_t top_k;       /* 40; >= 0; 0: no top-k cut */
  float top_p;         /* 0.95; in (0, 1]; 1: no nucleus cut */
  uint64_t seed;       /* 0 */
  uint32_t reserved[8];
} reach_sampling_params;

REACH_API reach_sampling_params reach_sampling_default_params(void);

/* Position-scheme overrides are those of the CLI (`reach run --help`):
 * strings NULL, integers -1 and reals 0 mean "not set" (config.json rules).
 * Any other value goes through the flag's checks, so NaN, infinities and
 * other negative integers are INVALID_ARGUMENT naming the flag; so are
 * attn_sinks > 0 without any attention window (set attn_window too). */
typedef struct reach_session_params {
  uint32_t size;
  uint32_t context;           /* KV-cache capacity in tokens; 0 = min(max_position_embeddings, 4096) */
  uint32_t chunk;             /* prefill chunk length (256) */
  int64_t l_test;             /* dynamic scaling's expected length (prompt + new tokens); 0 = context; >= 0 */
  const char* rope_scaling;   /* --rope-scaling: default|none|linear|dynamic|yarn|llama3|ntk|rerope|leaky_rerope|self_extend */
  double rope_factor;         /* --rope-factor */
  int64_t original_ctx;       /* --original-ctx */
  int64_t rerope_window;      /* --rerope-window */
  double leaky_k;             /* --leaky-k */
  int64_t self_extend_group;  /* --self-extend-group */
  int64_t self_extend_window; /* --self-extend-window */
  int64_t logn;               /* --logn (train length; 0 = off) */
  const char* qk_norm;        /* --qk-norm: none|key|query|cos */
  double cos_n;               /* --cos-n */
  int64_t attn_window;        /* --attn-window */
  int64_t attn_sinks;         /* --attn-sinks */
  /* More flags as on the command line, applied after the fields above, e.g.
   * "--rope-scaling yarn --rope-factor 4"; NULL = none.  Flags newer than this
   * header work here without a struct change. */
  const char* scheme_flags;
  reach_sampling_params sampling; /* initial sampler (reach_session_set_sampling changes it) */
  int32_t profile;            /* 1: GPU timestamps per dispatch (slower) */
  /* 1: sliding-window layers keep every position (--full-kv).  0 (default): they
   * keep a ring of window + chunk - 1 rows, so their memory does not grow with
   * the context, and reach_session_rewind cannot go back past what it overwrote. */
  int32_t full_kv;
  /* How the KV cache stores keys and values (-ctk / -ctv): a reach_kv_type.  f16, the default as on the
   * command line, halves f32's memory (REACH_KV_F32 for an exact f32 cache); q8_0 and q4_0 store blocks of
   * 32 values with an f16 scale (about 0.53x and 0.28x of f16), quantized as they are written, and need a
   * head_dim that is a multiple of 32 (else reach_session_create is UNSUPPORTED). */
  int32_t cache_type_k;       /* REACH_KV_F16 (default) */
  int32_t cache_type_v;       /* REACH_KV_F16 (default) */
  uint32_t reserved[13];      /* cache_type_k / _v took reserved[0..1]: the struct's size is unchanged */
} reach_session_params;

/* The KV cache's storage types (reach_session_params.cache_type_k / _v). */
typedef enum reach_kv_type {
  REACH_KV_F32 = 0,
  REACH_KV_F16 = 1,
  REACH_KV_Q8_0 = 2,
  REACH_KV_Q4_0 = 3
} reach_kv_type;

REACH_API reach_session_params reach_session_default_params(void);

/* A sequence on a model: KV cache, recorded programs, logits, sampler.
 * params may be NULL (defaults).  Scheme errors name the flag at fault. */
REACH_API reach_status reach_session_create(reach_model* model, const reach_session_params* params,
                                            reach_session** out);

/* Waits for a step in flight, then frees.  NULL is a no-op. */
REACH_API reach_status reach_session_free(reach_session* session);

/* Appends n tokens (a prompt, or more text later) at the current position;
 * the logits of the last one become readable.  CONTEXT_OVERFLOW if they do
 * not fit, INVALID_ARGUMENT for an id outside the vocabulary (every id is
 * checked first): then nothing was appended and the previous logits remain. */
REACH_API reach_status reach_session_prefill(reach_session* session, const int32_t* tokens, size_t n);

/* Appends one token (usually the last sampled one) with the decode program.
 * INVALID_STATE before anything was prefilled; CONTEXT_OVERFLOW when full;
 * INVALID_ARGUMENT for an id outside the vocabulary.  Rejected: no change. */
REACH_API reach_status reach_session_decode(reach_session* session, int32_t token);

/* Samples the next token from the current logits with the session's sampler;
 * *is_eos (may be NULL) = 1 when it ends the sequence.  Does not append it. */
REACH_API reach_status reach_session_sample(reach_session* session, int32_t* token, int* is_eos);

/* decode(token) then sample(): one generation step. */
REACH_API reach_status reach_session_step(reach_session* session, int32_t token, int32_t* next, int* is_eos);

/* Continuous batching: appends tokens[i] to sessions[i] (i < n) in one
 * decode step.  The linear layers run once over the n rows; each session's
 * attention runs over its own cache at its own position.  Afterwards each
 * session's logits and position are those reach_session_decode(sessions[i],
 * tokens[i]) would give (up to float rounding: the rows share one
 * matrix-matrix product).  The sessions must be of one model, distinct,
 * prefilled and idle (no step_async or host-submitted decode in flight);
 * n at most REACH_BATCH_MAX.  Every session and token is checked first:
 * INVALID_ARGUMENT (NULL, n == 0 or too large, a repeated session, sessions
 * of different models, a bad id), INVALID_STATE (empty or busy session),
 * CONTEXT_OVERFLOW (a full session) leave every session as it was. */
#define REACH_BATCH_MAX 64
REACH_API reach_status reach_batch_decode(reach_session* const* sessions, const int32_t* tokens, size_t n);


/* ------------------------------------------------------- sessions (continued) */

/* Replaces the sampler (and reseeds it). */
REACH_API reach_status reach_session_set_sampling(reach_session* session, const reach_sampling_params* params);

/* Logits of the last appended token: *logits points to *count (= vocab) floats
 * owned by the session, valid until the next call on this session. */
REACH_API reach_status reach_session_logits(reach_session* session, const float** logits, size_t* count);

/* Tokens held (*position) and the context capacity (*capacity); either may be NULL. */
REACH_API reach_status reach_session_position(const reach_session* session, uint32_t* position, uint32_t* capacity);

/* Forgets everything after `position` (<= the current position).  The logits
 * are unavailable until the next prefill / decode.  INVALID_ARGUMENT, with no
 * change, for a position above 0 whose keys a sliding-window ring has already
 * overwritten (full_kv in reach_session_params keeps them). */
REACH_API reach_status reach_session_rewind(reach_session* session, uint32_t position);

/* rewind(0): an empty sequence, same KV cache and programs. */
REACH_API reach_status reach_session_reset(reach_session* session);

/* Structured output: from the next reach_session_sample / reach_session_step
 * on, the sampled tokens always spell a JSON document that `schema_json`
 * accepts, and is_eos comes only once the document is whole (and is then
 * the only choice, unless a top-level number could still go on).  "{\"type\": \"object\"}" asks for any JSON object.  NULL or
 * "" removes the constraint.  Setting it, and any rewind or reset, starts a
 * new document.  The schema subset: type (object, array, string, number,
 * integer, boolean, null, or a list), properties (written in the schema's
 * order; those not in required may be left out), required,
 * additionalProperties (true/false), items, minItems, maxItems, enum, const,
 * anyOf (alternatives that start with different characters), $ref to
 * #/$defs/NAME; annotations (description, title, default, ...) are ignored.
 * Any other keyword is INVALID_ARGUMENT naming it and where it is, e.g.
 * "JSON schema: the keyword 'pattern' at #/properties/line: ...", and the
 * session keeps its previous constraint.
 *
 * A game asks an NPC what to do and always gets something it can parse:
 *
 *   reach_session_set_json_schema(npc,
 *     "{\"type\": \"object\", \"properties\": {"
 *     "  \"action\": {\"enum\": [\"greet\", \"trade\", \"attack\", \"flee\"]},"
 *     "  \"line\": {\"type\": \"string\"}},"
 *     " \"required\": [\"action\", \"line\"], \"additionalProperties\": false}");
 *   reach_session_reset(npc);
 *   reach_session_prefill(npc, prompt, n_prompt);
 *   for (reach_session_sample(npc, &tok, &eos); !eos; reach_session_step(npc, tok, &tok, &eos))
 *     reach_stream_push(text, tok, ...);   // {"action":"trade","line":"Fine wares, traveller!"}
 */
REACH_API reach_status reach_session_set_json_schema(reach_session* session, const char* schema_json);

/* The whitespace a constrained document may hold.  reach_session_set_json_schema
 * writes compact JSON: one space after ':' and ',' at most, and nothing else,
 * so that a model at a high temperature cannot spend its tokens on gaps.
 * REACH_JSON_PRETTY also allows, after '{' '[' ',' and before '}' ']', a
 * newline and then up to 4 spaces of indentation per open object or array.
 * Any other value is INVALID_ARGUMENT. */
#define REACH_JSON_COMPACT 0
#define REACH_JSON_PRETTY 1
REACH_API reach_status reach_session_set_json_schema_ws(reach_session* session, const char* schema_json,
                                                        int whitespace);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* REACH_SESSION_H */
