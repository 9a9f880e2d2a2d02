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
// and D4, after attention_common.glsl.  Layout: one vec4 of header (the flag
// word, ...), then per kv head g mu at 1 + 2g·D4 and s at 1 + (2g + 1)·D4,
// then the calibration kernel's statistics (4 rows per kv head), then the
// exact rows (key_calib_bytes).
//
// Exact keys: in a cache of its own (pc.block_rows == 0), the keys of the first
// KCAL_EXACT_ROWS positions (a ring's: of its sinks, up to as many) are also
// written here in f32 as the cache stores them (centred, smoothed, Hadamard
// rotated where HADK says), and the kernels score them from here instead of
// the blocks.  They are the attention sinks (the first tokens, which most
// queries weigh most), whose 4-bit rounding is most of what q4_0 keys still
// cost after calibration (tools/kv_quant_study.py, +sink).  A paged cache's
// first positions lie in blocks that sequences share and copy, so it keeps
// none.  The kernels test a key tile against kcal_exact_keys() first, a
// uniform branch, so later tiles read the blocks alone: CPU devices run a
// lane-varying branch's loads lane by lane, whichever way the lanes go.  The
// lanes decode runs those tiles in a loop of their own: llvmpipe slowed the
// shared loop body by the branch's code even when it never ran.
#ifndef ATTN_KEY_CALIB
#define ATTN_KEY_CALIB
vec4 kcal_mean(uint g, uint c) { return kcal[1u + 2u * g * D4 + c]; }
vec4 kcal_scale(uint g, uint c) { return kcal[1u + (2u * g + 1u) * D4 + c]; }

// Positions [0, kcal_exact_keys()) are kept exact (their cache rows are their positions).
uint kcal_exact_keys() {
  if (!KCAL || pc.block_rows != 0u) return 0u;
  return pc.ring == 0u ? KCAL_EXACT_ROWS : min(KCAL_EXACT_ROWS, pc.sinks);
}
// The vec4 index in kcal of the exact key at position m < kcal_exact_keys() of kv head g.
uint kcal_exact_at(uint g, uint m) { return 1u + 6u * pc.n_kv_heads * D4 + (g * KCAL_EXACT_ROWS + m) * D4; }
#endif
