/* reach/embed.h - embeddings: one vector for a run of tokens.
 * Part of the C API: include <reach.h> (this file is included by it and
 * can be included alone). */
#ifndef REACH_EMBED_H
#define REACH_EMBED_H

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------- embeddings
 *
 * One vector for a run of tokens: the model's final hidden state (after the
 * final norm, before the head) of each token, with the model's own causal
 * attention, pooled into `dims` floats.  The model says how (its folder's
 * sentence-transformers modules.json and 1_Pooling/config.json, or its GGUF's
 * <arch>.pooling_type): the mean over the tokens, the first token (CLS) or the
 * last token, L2-normalized where it has a Normalize module (a GGUF: always).
 * A model that says nothing is pooled as Qwen3-Embedding is: the last token,
 * normalized.  Give the tokens as the model expects them (reach_tokenize with
 * add_special = 1; Qwen3-Embedding also wants its end-of-text token last).
 *
 *   size_t dims = 0;
 *   reach_embedding_dims(model, &dims);
 *   float* v = malloc(dims * sizeof(float));
 *   reach_embed(model, ids, n_ids, v, dims, NULL);   // v: unit length
 *
 * Each call runs the tokens from the start (nothing is kept between calls),
 * on a session of the model's own (min(its context, 4096) tokens; more is
 * CONTEXT_OVERFLOW), under the device's lock.  A model whose vocabulary is
 * smaller than its hidden size is UNSUPPORTED. */
#define REACH_POOLING_MODEL 0   /* as the model says (above) */
#define REACH_POOLING_MEAN 1
#define REACH_POOLING_CLS 2
#define REACH_POOLING_LAST 3
typedef struct reach_embed_params {
  uint32_t size;    /* sizeof(reach_embed_params): from reach_embed_default_params() */
  int pooling;      /* REACH_POOLING_*; default REACH_POOLING_MODEL */
  int normalize;    /* -1 (default): as the model says; 0: not; 1: L2-normalized */
} reach_embed_params;
REACH_API reach_embed_params reach_embed_default_params(void);

/* The length of the model's embeddings (its hidden size). */
REACH_API reach_status reach_embedding_dims(const reach_model* model, size_t* dims);

/* Writes the embedding of tokens[0..n) into out[0..dims): dims must be
 * reach_embedding_dims's (else INVALID_ARGUMENT saying it); params NULL: the
 * defaults.  n = 0 or a token outside the vocabulary: INVALID_ARGUMENT. */
REACH_API reach_status reach_embed(reach_model* model, const int32_t* tokens, size_t n, float* out, size_t dims,
                                   const reach_embed_params* params);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* REACH_EMBED_H */
