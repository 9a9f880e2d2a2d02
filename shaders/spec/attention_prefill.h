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
#include "attention_cache_bindings.h"
BINDING(6, OUT)      // output rows
