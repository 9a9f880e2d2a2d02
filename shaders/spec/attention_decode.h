// attention_decode.comp: split-K decode, one workgroup per (split, kv head);
// attention_decode_lanes.comp (CPU devices): one subgroup per (split, kv head, head chunk).
SPEC_WG(wg)                            // lanes: = subgroup size
SPEC_UINT(1, BC, keys, 32)             // keys per tile (attention_decode)
SPEC_UINT(2, D, head_dim, 64)
SPEC_UINT(3, GQ, gq, 1)
SPEC_UINT(4, ROTP, rot_pairs, 32)
SPEC_UINT(5, KPL, lane_keys, 4)        // keys per lane per tile (attention_decode_lanes: tile = WG x KPL keys)
SPEC_UINT(6, HPW, hpw, 1)              // query heads per workgroup (attention_decode_lanes; <= GQ)
#include "attention_scheme.h"
