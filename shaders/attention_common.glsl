// Shared pieces of the attention kernels (attention_*.comp).
//
// Conventions (runtime/attention.hpp, docs EXTRAPOLATION.md §1.2, §5):
//  * vectors are read as vec4; head_dim D and the rotating pairs ROTP are
//    multiples of 4 (pair j = (x[j], x[j+ROTP]), half-split layout), so a vec4
//    of the low half pairs with the vec4 ROTP/4 slots further on;
//  * cos/sin tables are (cos, sin) pairs [positions][pairs], read as vec4 (two
//    pairs; pairs is a multiple of 4); positions are clamped to the table;
//  * logits are kept in the log2 domain: the query carries scale·log2(e) and
//    the ALiBi slope is multiplied by log2(e), so the softmax uses exp2;
//  * a soft cap (SOFTCAP) acts on the selected score before ALiBi, the masks
//    and every max/exp step (capped_score);
//  * masked scores are NEG (finite, so max/alpha arithmetic never meets
//    inf - inf); their probability is forced to 0.
//
// Push constants every attention kernel shares (the list in
// spec/attention_push.h; struct AttnPush in kernels/attention.cpp).
layout(push_constant) uniform PC {
#include "spec/attention_push.h"
} pc;

// Batched decode (Attention::decode_fused over DecodeRows): one dispatch serves every row of a decode
// batch, row = gl_WorkGroupID.z, each with its own step record (StepParams and block table: its
// position and its blocks) pc.step_stride words after the previous row's, its own scratch (arrival
// counters, partials) pc.scratch_stride words after, and its q / out / new k / new v rows after the
// previous row's.  The decode and combine kernels call attn_row_begin first; elsewhere (and at z = 0)
// the offsets stay 0.
uint row_step = 0u, row_scratch = 0u, row_q = 0u, row_kv = 0u;
void attn_row_begin(uint d4) {
  const uint r = gl_WorkGroupID.z;
  row_step = r * pc.step_stride;
  row_scratch = r * pc.scratch_stride;
  row_q = r * pc.n_heads * d4;
  row_kv = r * pc.n_kv_heads * d4;
}

// Q2POS_*, K2POS_*, QKNORM_*: the values of Q2MODE, K2MODE and NORM.
#include "spec/attention_modes.h"

// The including shader declares the buffer `tab1` (and `tab2` with
// ATTN_HAS_TAB2 defined), vec4 arrays, before including this file, or defines
// TAB1(i) / TAB2(i) to read them another way (texel buffers, KV_TEX).
#ifndef TAB1
#define TAB1(i) tab1[i]
#endif
#ifndef TAB2
#define TAB2(i) tab2[i]
#endif

#define LOG2E 1.4426950408889634
#define NEG (-1.0e30)
#define NEG_HALF (-0.5e30)

// Branch-2 query / key positions (Q2Pos / K2Pos of runtime/attention.hpp).
int q2_position(uint mode, int i, int q2_const, int group) {
  if (mode == Q2POS_SHIFTED) return i + q2_const;
  if (mode == Q2POS_GROUPED) return i / group + q2_const;
  return q2_const;
}
int k2_position(uint mode, int m, int group) {
  if (mode == K2POS_GROUPED) return m / group;
  return m;
}

// cos/sin of pairs 4*c4 .. 4*c4+3 at position p, as (cos, sin) vec4s
// (callers only ask for pairs below ROTP; the rest of a vector is copied).
#ifndef ATTN_NO_TABLES
void table_cs1(int p, uint c4, out vec4 c, out vec4 s) {
  const uint pp = uint(clamp(p, 0, int(pc.tab1_positions) - 1));
  const uint base = (pp * pc.tab1_pairs) / 2u + c4 * 2u;   // vec4 = two (cos, sin) pairs
  const vec4 a = TAB1(base), b = TAB1(base + 1u);
  c = vec4(a.x, a.z, b.x, b.z);
  s = vec4(a.y, a.w, b.y, b.w);
}
#endif
#ifdef ATTN_HAS_TAB2
void table_cs2(int p, uint c4, out vec4 c, out vec4 s) {
  const uint pp = uint(clamp(p, 0, int(pc.tab2_positions) - 1));
  const uint base = (pp * pc.tab2_pairs) / 2u + c4 * 2u;   // vec4 = two (cos, sin) pairs
  const vec4 a = TAB2(base), b = TAB2(base + 1u);
  c = vec4(a.x, a.z, b.x, b.z);
  s = vec4(a.y, a.w, b.y, b.w);
}
#endif

// ggml ALiBi slope of query head h (EXTRAPOLATION.md §4).
float alibi_slope(uint h) {
  if (pc.alibi_m0 <= 0.0) return 0.0;
  return h < pc.alibi_nlog2 ? pow(pc.alibi_m0, float(h + 1u))
                            : pow(pc.alibi_m1, float(2u * (h - pc.alibi_nlog2) + 1u));
}

// Cache row of key m: its position, or in a ring cache (pc.ring > 0, the
// windowed layers' O(window) cache) the sinks keep rows [0, sinks) and later
// keys cycle through the ring rows after them, or in a paged cache (pc.block_rows
// > 0) row m % B of the pool block the sequence's block table maps block m / B
// to.  The table follows StepParams in the step buffer (step[2] entries from
// word 4), so a recorded step serves any table; an index past it reads its last
// entry (a host error must not reach another buffer).  pc.capacity is the row
// count of one kv head's slab: the pool's rows when paged.
uint kv_row(int m) {
  if (pc.block_rows != 0u) {
    const uint b = min(uint(m) >> pc.block_shift, max(step[row_step + 2u], 1u) - 1u);
    return (step[row_step + 4u + b] << pc.block_shift) + (uint(m) & (pc.block_rows - 1u));
  }
  if (pc.ring == 0u || m < int(pc.sinks)) return uint(m);
  return pc.sinks + uint(m - int(pc.sinks)) % pc.ring;
}

// Whether a new key at position pos has no row to go to: past the cache (a ring
// never is), or past a paged sequence's block table.  Writers drop such keys.
bool kv_dropped(uint pos) {
  if (pc.block_rows != 0u) return pos >= (step[row_step + 2u] << pc.block_shift);
  return pc.ring == 0u && pos >= pc.capacity;
}

// First key a decode split walks from: windowed layers without sinks start
// at the window's first key, so their splits cover only the window.
int decode_first_key(int i) {
  if (pc.window == 0u || pc.sinks != 0u) return 0;
  return max(i - int(pc.window) + 1, 0);
}

// Visibility of key m from query i: causal, then sliding window + sinks.
bool key_visible(int i, int m) {
  if (m > i) return false;
  if (pc.window == 0u) return true;
  return (i - m) < int(pc.window) || m < int(pc.sinks);
}

#include "softcap.glsl"

// Gemma 2's soft cap of a score: cap·tanh(x/cap) of the true (natural-log
// domain) logit x.  The score here is s = x·log2(e), and with pc.softcap_log2 =
// cap·log2(e), softcap(s, cap·log2(e)) = log2(e)·cap·tanh(x/cap): the cap acts
// on x and the result is back in the log2 domain.  `on` is the SOFTCAP
// constant, so an uncapped kernel compiles no tanh.
float capped_score(float s, bool on) { return on ? softcap(s, pc.softcap_log2) : s; }

// Per-row query multiplier (before rotation): logn, CosA λ, logit scale, log2(e).
// `qnorm2` is |q|² of the raw row (used for query / cos norms).
float query_factor(int i, float qnorm2, uint norm_mode) {
  float f = pc.scale_log2;   // scale·log2(e), or log2(e) when a norm replaces the scale
  if (pc.logn_inv_ln > 0.0) f *= max(1.0, log(float(i) + 1.0) * pc.logn_inv_ln);
  if (norm_mode == QKNORM_QUERY || norm_mode == QKNORM_COS) f /= max(sqrt(qnorm2), 1e-30);
  if (norm_mode == QKNORM_COS) {
    const float n = pc.cos_n > 0.0 ? pc.cos_n : float(i) + 1.0;
    f *= 4.0 * log(n);
  }
  return f;
}
