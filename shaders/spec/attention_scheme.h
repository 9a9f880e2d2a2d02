// The position-scheme block of the attention kernels that read the cache
// (attention_prefill.comp, attention_decode.comp): the same ids in each.
SPEC_BOOL(16, ROPE, rope, true)        // false: NoPE layer
SPEC_BOOL(17, RAW, raw, false)         // the cache holds un-rotated keys
SPEC_BOOL(18, DUAL, dual, false)       // two branches split at branch_window
SPEC_BOOL(19, TABLE2, table2, false)   // branch 2 rotates with table 2
SPEC_UINT(20, Q2MODE, q2_mode, 0)      // Q2POS_* (Q2Pos)
SPEC_UINT(21, K2MODE, k2_mode, 0)      // K2POS_* (K2Pos)
SPEC_UINT(22, NORM, norm, 0)           // QKNORM_* (QkNorm)
SPEC_BOOL(23, ALIBI, alibi, false)
SPEC_BOOL(24, KROT, krot, false)       // raw cache + pre-rotated keys at binding B_KROT (branch 1)
SPEC_BOOL(25, SOFTCAP, softcap, false) // soft-capped scores (AttentionSpec::softcap > 0); off: no code at all
SPEC_BOOL(26, SINK, sink, false)       // a learned per-head sink logit (binding B_SINK) joins the softmax denominator
SPEC_UINT(27, KTYPE, k_type, 0)        // KV_* (KvType): how the cache stores keys (and pre-rotated keys)
SPEC_UINT(28, VTYPE, v_type, 0)        // KV_*: how it stores values
SPEC_BOOL(29, HADK, had_k, false)      // keys stored Walsh-Hadamard rotated (attention_hadamard.glsl): queries rotated
SPEC_BOOL(30, HADV, had_v, false)      // values stored rotated: the output rotated back
SPEC_BOOL(31, KCAL, kcal, false)       // keys stored centred and smoothed (binding B_SINK; attention_key_calib.glsl): queries x s
