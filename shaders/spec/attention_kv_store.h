// attention_kv_store.comp: one invocation per (token, kv head).
SPEC_WG(wg)
SPEC_UINT(1, D, head_dim, 64)          // multiple of 8
SPEC_UINT(2, ROTP, rot_pairs, 32)      // rotating pairs (multiple of 4)
SPEC_BOOL(3, ROTATE, rotate, true)     // rotated cache: store R(m)·k
SPEC_BOOL(4, NORMALIZE, normalize, false)   // key / cos norm: store k/|k|
SPEC_BOOL(5, STORE_ROT, store_rot, false)   // also store R(m)·k at binding 6 (LayerCache::k_rot)
// Bindings.
BINDING(0, STEP)
BINDING(1, KNEW)     // new keys [n, kv_heads * head_dim]
BINDING(2, VNEW)     // new values
BINDING(3, KCACHE)
BINDING(4, VCACHE)
BINDING(5, TAB1)     // rope table 1
BINDING(6, KROT)     // pre-rotated keys (STORE_ROT)
BINDING(7, KCAL)     // the keys' centre and scale (KCAL; attention_key_calib.glsl)
SPEC_UINT(6, KTYPE, k_type, 0)         // KV_* (KvType): how keys (and pre-rotated keys) are stored
SPEC_UINT(7, VTYPE, v_type, 0)         // KV_*: how values are stored
SPEC_BOOL(8, HADK, had_k, false)       // keys stored Walsh-Hadamard rotated (attention_hadamard.glsl)
SPEC_BOOL(9, HADV, had_v, false)       // values stored rotated
SPEC_BOOL(10, KCAL, kcal, false)       // keys stored centred and smoothed (attention_key_calib.glsl)
