// The values of the attention kernels' mode constants, base/attention_spec.hpp's
// enums (kernels/attention.cpp checks that they agree).
// Q2MODE (Q2Pos): where branch 2 rotates the query.
CONST_UINT(Q2POS_CONSTANT, 0)   // at q2_const (ReRoPE)
CONST_UINT(Q2POS_SHIFTED, 1)    // at i + q2_const (Leaky ReRoPE)
CONST_UINT(Q2POS_GROUPED, 2)    // at floor(i / G) + q2_const (Self-Extend)
// K2MODE (K2Pos): the key of branch 2.
CONST_UINT(K2POS_UNROTATED, 0)  // the raw key (ReRoPE)
CONST_UINT(K2POS_SAME, 1)       // rotated at m
CONST_UINT(K2POS_GROUPED, 2)    // rotated at floor(m / G)
// NORM (QkNorm): normalised scores.
CONST_UINT(QKNORM_NONE, 0)
CONST_UINT(QKNORM_KEY, 1)       // keys normalised in the cache
CONST_UINT(QKNORM_QUERY, 2)
CONST_UINT(QKNORM_COS, 3)
// KTYPE / VTYPE (KvType): how the cache stores keys / values (attention_kv_codec.glsl).
CONST_UINT(KV_F32, 0)
CONST_UINT(KV_F16, 1)
CONST_UINT(KV_Q8_0, 2)          // blocks of 32 int8 and an f16 scale
CONST_UINT(KV_Q4_0, 3)          // blocks of 32 4-bit values and an f16 scale
// Rows [0, KCAL_EXACT_ROWS) of each kv head in a cache of its own (not paged) whose keys are stored
// centred and smoothed (KCAL) are also kept exact, f32, after the calibration (attention_key_calib.glsl).
CONST_UINT(KCAL_EXACT_ROWS, 4)
