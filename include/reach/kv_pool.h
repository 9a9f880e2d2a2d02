/* reach/kv_pool.h - one paged KV cache shared by many sessions of a model.
 * Part of the C API: include <reach.h> (this file is included by it and
 * can be included alone). */
#ifndef REACH_KV_POOL_H
#define REACH_KV_POOL_H

#include "session.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ KV pool
 * One paged KV cache that many sessions of a model share, as a server's
 * slots do (reach serve --kv-size).  Memory is reserved once, for the pool,
 * instead of a whole context per session; a session takes blocks of
 * block_rows positions as it grows and gives them back when it rewinds or is
 * freed.  A prompt whose leading blocks another session of the pool already
 * computed (the same tokens under the same position scheme) maps them instead
 * of computing them; a session that writes into a shared block copies it
 * first.  Blocks no session holds stay cached for their prefix until the pool
 * needs them (least recently used first).  When no block is free, prefill,
 * decode and reach_batch_decode return REACH_ERROR_KV_POOL_FULL before
 * anything runs, every session (and its logits) as it was.
 *
 *   reach_kv_pool_params pp = reach_kv_pool_default_params();
 *   pp.tokens = 16384;                              // or pp.bytes = 512 << 20
 *   reach_kv_pool_create(model, &pp, &pool);
 *   reach_session_create_in_pool(pool, NULL, &npc1);   // as many as wanted
 *   ...
 *   reach_session_free(npc1); ...; reach_kv_pool_free(pool);
 *
 * Calls on a pool and its sessions take the device's lock, like every call. */
typedef struct reach_kv_pool reach_kv_pool;

typedef struct reach_kv_pool_params {
  uint32_t size;
  uint32_t tokens;        /* positions the pool holds (rounded up to whole blocks); 0: bytes says */
  uint64_t bytes;         /* with tokens 0: the device bytes the pool may take (the whole blocks that fit) */
  uint32_t block_rows;    /* positions per block, a power of two; 0 = the device's
                             widest subgroup, 16 to 64 (16 on lavapipe) */
  int32_t cache_type_k;   /* a reach_kv_type, for every session of the pool (REACH_KV_F16) */
  int32_t cache_type_v;   /* REACH_KV_F16 */
  /* 1: keep each key before rotation too, for sessions of ReRoPE, Leaky ReRoPE or Self-Extend (their
   * window branch reads them; such a session in a pool without them is INVALID_ARGUMENT).  Costs one
   * more K per position. */
  int32_t rotated_keys;
  uint32_t reserved[8];
} reach_kv_pool_params;

REACH_API reach_kv_pool_params reach_kv_pool_default_params(void);

/* Allocates the pool on the model's device.  OUT_OF_MEMORY, naming the size
 * that fits, when the device or one of its bindings cannot hold it;
 * UNSUPPORTED for a quantized type the model's head_dim does not allow. */
REACH_API reach_status reach_kv_pool_create(reach_model* model, const reach_kv_pool_params* params,
                                            reach_kv_pool** out);

/* INVALID_STATE while sessions of the pool are alive.  NULL is a no-op. */
REACH_API reach_status reach_kv_pool_free(reach_kv_pool* pool);

typedef struct reach_kv_pool_info {
  uint32_t size;
  uint32_t block_rows;       /* positions per block */
  uint32_t blocks;           /* all blocks */
  uint32_t blocks_used;      /* held by a live session (a shared block counts once) */
  uint32_t blocks_cached;    /* held by none, kept for their prefix until needed */
  uint32_t sessions;         /* live sessions in the pool */
  uint64_t bytes;            /* device bytes of the pool */
  uint64_t bytes_per_token;  /* device bytes of one position, every layer */
  uint64_t prefix_hits;      /* prefills that mapped blocks instead of computing them */
  uint64_t prefix_hit_tokens;/* the positions they mapped */
} reach_kv_pool_info;

/* info->size = sizeof(*info) first. */
REACH_API reach_status reach_kv_pool_get_info(const reach_kv_pool* pool, reach_kv_pool_info* info);

/* A session whose KV cache is the pool's blocks: as reach_session_create on
 * the pool's model, except that cache_type_k / _v are the pool's (params'
 * are not read).  When every layer is windowed (attn_window, without full_kv)
 * the blocks behind the window go back to the pool as the session moves on,
 * so a long prompt needs only a window and a prefill chunk of blocks; otherwise
 * sliding-window layers keep every position, as full_kv. */
REACH_API reach_status reach_session_create_in_pool(reach_kv_pool* pool, const reach_session_params* params,
                                                    reach_session** out);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* REACH_KV_POOL_H */
