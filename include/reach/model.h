/* reach/model.h - models (loading, info) and text (tokens, streams).
 * Part of the C API: include <reach.h> (this file is included by it and
 * can be included alone). */
#ifndef REACH_MODEL_H
#define REACH_MODEL_H

#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ models */

/* Load progress in bytes; return 0 to cancel the load (REACH_ERROR_CANCELLED). */
typedef int (*reach_progress_callback)(void* user, uint64_t done, uint64_t total);

/* Weight types a safetensors model can be quantized to at load (GGML block
 * formats, byte-identical to llama.cpp's reference quantizers). */
typedef enum reach_quantize_type {
  REACH_QUANTIZE_NONE = 0,   /* keep the file's weight type (default) */
  REACH_QUANTIZE_Q8_0 = 1,
  REACH_QUANTIZE_Q4_0 = 2,
  REACH_QUANTIZE_Q4_K = 3
} reach_quantize_type;

typedef struct reach_model_params {
  uint32_t size;
  reach_progress_callback progress;   /* NULL: none (nothing is printed either way) */
  void* progress_user;
  int32_t require_tokenizer;          /* 1 (default): fail without tokenizer.json; 0: token ids only */
  int32_t quantize;                   /* a reach_quantize_type; other values: INVALID_ARGUMENT */
  uint32_t reserved[15];              /* quantize took reserved[0]: the struct's size and layout are unchanged */
} reach_model_params;

REACH_API reach_model_params reach_model_default_params(void);

/* Loads a Hugging Face style folder (config.json, *.safetensors,
 * tokenizer.json) onto the device.  params may be NULL (defaults). */
REACH_API reach_status reach_model_load(reach_device* device, const char* dir, const reach_model_params* params,
                                        reach_model** out);

typedef struct reach_model_info {
  uint32_t size;             /* set by the caller: sizeof(reach_model_info) */
  int32_t vocab_size;
  int32_t n_layers;
  int32_t hidden_size;
  int32_t n_heads, n_kv_heads, head_dim;
  int64_t max_position_embeddings;
  uint64_t n_params;
  uint64_t weight_bytes;     /* device memory the weights use */
  int32_t bos_id;            /* -1: none */
  int32_t eos_id;            /* the first end-of-sequence id; -1: none */
  int32_t has_tokenizer;
  uint32_t reserved[16];
} reach_model_info;

/* Shapes and special ids of a loaded model (info->size must be set). */
REACH_API reach_status reach_model_get_info(const reach_model* model, reach_model_info* info);

/* *is_eos = 1 when token ends a sequence for this model (config.json or tokenizer). */
REACH_API reach_status reach_model_is_eos(const reach_model* model, int32_t token, int* is_eos);

/* NULL is a no-op; INVALID_STATE while sessions are alive (streams may outlive it). */
REACH_API reach_status reach_model_free(reach_model* model);

/* ------------------------------------------------------------------ text */

/* Text (UTF-8, text_len bytes; invalid UTF-8 becomes U+FFFD) to token ids.
 * add_special adds what the tokenizer's post-processor adds (BOS for Llama).
 * *n_tokens receives the count needed.  tokens = NULL asks only for the count
 * (REACH_OK); a capacity too small gives REACH_ERROR_BUFFER_TOO_SMALL. */
REACH_API reach_status reach_tokenize(const reach_model* model, const char* text, size_t text_len, int add_special,
                                      int32_t* tokens, size_t capacity, size_t* n_tokens);

/* Token ids to UTF-8 text, NUL-terminated.  skip_special drops BOS/EOS/....
 * *length receives the byte length without the NUL; capacity must be at least
 * *length + 1 (else REACH_ERROR_BUFFER_TOO_SMALL); text = NULL asks the length. */
REACH_API reach_status reach_detokenize(const reach_model* model, const int32_t* tokens, size_t n_tokens,
                                        int skip_special, char* text, size_t capacity, size_t* length);

/* Incremental detokenizer for streaming output: never splits a UTF-8 character. */
REACH_API reach_status reach_stream_create(const reach_model* model, int skip_special, reach_stream** out);
/* Appends token; *text / *length: the text now final (may be empty).  The
 * pointer stays valid until the next call on this stream. */
REACH_API reach_status reach_stream_push(reach_stream* stream, int32_t token, const char** text, size_t* length);
/* The remaining text (at the end of a generation); the stream starts over. */
REACH_API reach_status reach_stream_flush(reach_stream* stream, const char** text, size_t* length);
/* NULL is a no-op. */
REACH_API reach_status reach_stream_free(reach_stream* stream);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* REACH_MODEL_H */
