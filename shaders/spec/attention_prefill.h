// attention_prefill.comp: one workgroup = one subgroup; lanes = rows x heads of a GQA group.
SPEC_WG(wg)                            // = subgroup size = keys per tile
SPEC_UINT(1, HPW, hpw, 1)              // query heads per workgroup (<= WG)
SPEC_UINT(2, ROWS, rows, 8)            // query rows per workgroup (WG / HPW)
SPEC_UINT(3, D, head_dim, 64)          // multiple of 8
SPEC_UINT(4, GQ, gq, 1)                // query heads per kv head
SPEC_UINT(5, ROTP, rot_pairs, 32)      // rotating pairs (multiple of 4)
SPEC_UINT(6, KS, key_block, 8)         // keys scored per block (divides WG): bounds the unrolled code
#include "attention_scheme.h"
// Bindings.
BINDING(0, STEP)     // StepParams
BINDING(1, Q)        // raw query rows
BINDING(2, KCACHE)   // K cache (texel variant: R32G32B32A32 texels)
BINDING(3, VCACHE)   // V cache (texel)
BINDING(4, TAB1)     // rope table 1 (texel)
BINDING(5, TAB2)     // rope table 2 (texel)
BINDING(6, OUT)      // output rows
BINDING(7, KROT)     // pre-rotated keys, branch 1 (KROT; texel)
BINDING(8, SINK)     // per-head sink logits, f32 [n_heads] (SINK)
