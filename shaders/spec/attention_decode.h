// attention_decode.comp: split-K decode, one workgroup per (split, kv head).
SPEC_WG(wg)
SPEC_UINT(1, BC, keys, 32)             // keys per tile
SPEC_UINT(2, D, head_dim, 64)
SPEC_UINT(3, GQ, gq, 1)
SPEC_UINT(4, ROTP, rot_pairs, 32)
#include "attention_scheme.h"
