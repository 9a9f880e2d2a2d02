// attention_decode.comp: split-K decode, one workgroup per (split, kv head);
// attention_decode_lanes.comp (CPU devices): one subgroup per (split, kv head, head chunk).
SPEC_WG(wg)                            // lanes: = subgroup size
SPEC_UINT(1, BC, keys, 32)             // keys per tile (attention_decode)
SPEC_UINT(2, D, head_dim, 64)
SPEC_UINT(3, GQ, gq, 1)
SPEC_UINT(4, ROTP, rot_pairs, 32)
SPEC_UINT(5, KPL, lane_keys, 4)        // keys per lane per tile (attention_decode_lanes: tile = WG x KPL keys)
SPEC_UINT(6, HPW, hpw, 1)              // query heads per workgroup (attention_decode_lanes; <= GQ)
SPEC_BOOL(7, FUSED, fused, false)      // one dispatch: stores the new key/value, attends, and the last split combines
SPEC_BOOL(8, QKRMS, qk_rms, false)     // FUSED: per-head RMSNorm of q and of the new k first (Gemma 3, Qwen3)
#include "attention_scheme.h"
// Bindings.
#include "attention_cache_bindings.h"
BINDING(6, PART)     // per-split partials (attention_combine.comp reads them)
// FUSED only (SINK above too; the *_unfused kernels leave them out of their layout):
BINDING(9, KNEW)     // the new token's keys [n_kv_heads * head_dim] (the qkv output)
BINDING(10, VNEW)    // the new token's values
BINDING(11, OUT)     // output row [n_heads * head_dim]
BINDING(12, KSTORE)  // K cache, written (storage buffer over the same memory as KCACHE)
BINDING(13, VSTORE)  // V cache, written
BINDING(14, KRSTORE) // pre-rotated keys, written (KROT)
BINDING(15, COUNT)   // arrival counters per (kv head, head chunk), u32, zero between dispatches (FUSED)
BINDING(16, QNORM)   // q RMSNorm weight, f32 [head_dim] (QKRMS)
BINDING(17, KNORM)   // k RMSNorm weight, f32 [head_dim] (QKRMS)
