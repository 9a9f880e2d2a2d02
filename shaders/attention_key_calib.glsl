// Keys stored centred and smoothed (KCAL; LayerCache::key_calib): the cache
// holds (k - mu) / s of each key as it is scored (rotated at its position),
// mu and s per (kv head, channel), and every query is multiplied by s:
//   (s·q)·((k - mu) / s) = q·k - q·mu,
// and q·mu is the same for every key of a query, which the softmax ignores
// (so never with sink logits or a soft cap, which it does not; nor with raw
// keys that turn inside the kernel).  Centring takes the offset that RoPE's
// slow pairs keep across positions out of q4_0's blocks, and s balances the
// channels' spread against the queries' weight (attention_kv_calibrate.comp).
//
// The including shader declares `kcal` (vec4s over the layer's calibration)
// and D4.  Layout: one vec4 of header (the flag word, ...), then per kv head g
// mu at 1 + 2g·D4 and s at 1 + (2g + 1)·D4 (then the calibration kernel's
// statistics, key_calib_bytes).
#ifndef ATTN_KEY_CALIB
#define ATTN_KEY_CALIB
vec4 kcal_mean(uint g, uint c) { return kcal[1u + 2u * g * D4 + c]; }
vec4 kcal_scale(uint g, uint c) { return kcal[1u + (2u * g + 1u) * D4 + c]; }
#endif
