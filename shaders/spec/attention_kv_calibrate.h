// attention_kv_calibrate.comp: one workgroup per layer.
SPEC_WG(wg)
SPEC_UINT(1, D, head_dim, 64)          // multiple of 8
SPEC_UINT(2, ROTP, rot_pairs, 32)      // rotating pairs (multiple of 4)
SPEC_BOOL(3, ROTATE, rotate, true)     // keys stored rotated: statistics of R(m)·k and R(m)·q
SPEC_UINT(5, GQ, gq, 1)                // query heads per kv head
SPEC_UINT(6, MIN_ROWS, min_rows, 16)   // fewer rows taken: the identity (flag 2)
SPEC_UINT(7, SMOOTH_ROWS, smooth_rows, 512)   // fewer rows: mu only (s = 1)
// Bindings.
BINDING(0, STEP)
BINDING(1, Q)        // query rows [n, n_heads * head_dim]
BINDING(2, KNEW)     // new keys [n, kv_heads * head_dim]
BINDING(3, TAB1)     // rope table 1
BINDING(4, KCAL)     // the layer's calibration (attention_key_calib.glsl) and its running statistics
