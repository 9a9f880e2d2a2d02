#version 450
#extension GL_EXT_control_flow_attributes : require
// Flash-style causal prefill attention with the dual-branch contract
// (docs EXTRAPOLATION.md §1.2, §5).
//
// Workgroup (query tile x, kv head y): GQ*BR invocations; invocation = (query
// head of the kv head's group, row).  Each K/V tile of BC keys is staged (and
// rotated, for a raw cache) once in shared memory and used by all GQ*BR rows,
// so the kv tile is read and rotated once per GQA group.  Each invocation keeps
// its query row(s) and its f32 online-softmax state (max, sum, accumulator).
//
// Per (query tile, key tile), from the real (unaligned, chunked) bounds:
//   r_min = max(0, q_lo - k_hi), r_max = q_hi - k_lo   (causal-valid range)
//   fully masked by the sliding window (and no sink) -> skipped
//   single branch or r_max < W  -> branch 1 only
//   r_min >= W                  -> branch 2 only
//   otherwise (mixed)           -> both dot products, select per element
// Positions (pos0, n_new) come from the step buffer.
layout(local_size_x_id = 0) in;                   // WG = GQ * BR
layout(constant_id = 1) const uint BR = 8;        // query rows per head per workgroup
layout(constant_id = 2) const uint BC = 32;       // keys per tile
layout(constant_id = 3) const uint D = 64;        // head_dim (multiple of 8)
layout(constant_id = 4) const uint GQ = 1;        // query heads per kv head
layout(constant_id = 5) const uint ROTP = 32;     // rotating pairs (multiple of 4)
layout(constant_id = 6) const bool ROPE = true;   // false: NoPE layer
layout(constant_id = 7) const bool RAW = false;   // cache holds un-rotated keys
layout(constant_id = 8) const bool DUAL = false;  // two branches (branch_window)
layout(constant_id = 9) const bool TABLE2 = false;  // branch 2 rotates with table 2
layout(constant_id = 10) const uint Q2MODE = 0;
layout(constant_id = 11) const uint K2MODE = 0;
layout(constant_id = 12) const uint NORM = 0;     // 0 none, 1 key (in cache), 2 query, 3 cos
layout(constant_id = 13) const uint NK2 = 1;      // rows of the branch-2 key tile (BC if DUAL)
layout(constant_id = 14) const bool ALIBI = false;
const uint D4 = D / 4u;
const uint R4 = ROTP / 4u;
const uint WG = GQ * BR;

layout(binding = 0) readonly buffer Step { uint step[]; };
layout(binding = 1) readonly buffer Q { vec4 qbuf[]; };
layout(binding = 2) readonly buffer KC { vec4 kc[]; };
layout(binding = 3) readonly buffer VC { vec4 vc[]; };
layout(binding = 4) readonly buffer T1 { vec2 tab1[]; };
layout(binding = 5) readonly buffer T2 { vec2 tab2[]; };
layout(binding = 6) writeonly buffer O { vec4 obuf[]; };
#define ATTN_HAS_TAB2
#include "attention_common.glsl"

shared vec4 sK1[BC * D4];
shared vec4 sK2[NK2 * D4];
shared vec4 sV[BC * D4];
// Per-invocation scores / probabilities of the current tile.  Shared, not a
// private array: private arrays indexed by a loop counter become if-ladders on
// some compilers (llvmpipe), shared memory is a plain indexed access.
shared float sScore[BC * WG];
#define SC(j) sScore[(j) * WG + lane]

void cs_at(bool t2, int p, uint c, out vec4 cs, out vec4 sn) {
  if (t2) table_cs2(p, c, cs, sn);
  else table_cs1(p, c, cs, sn);
}

// Element c (vec4) of key `base` rotated at position p.
vec4 rotated_key(uint base, uint c, int p, bool t2) {
  const vec4 x = kc[base + c];
  if (c >= 2u * R4) return x;
  vec4 cs, sn;
  if (c < R4) {
    cs_at(t2, p, c, cs, sn);
    return x * cs - kc[base + c + R4] * sn;
  }
  cs_at(t2, p, c - R4, cs, sn);
  return x * cs + kc[base + c - R4] * sn;
}

void main() {
  const uint lane = gl_LocalInvocationIndex;
  const uint hq = lane / BR, row = lane % BR;
  const uint g_local = gl_WorkGroupID.y;          // kv head within this dispatch's binding
  const uint g = pc.kv_base + g_local;
  const uint h = g * GQ + hq;
  const uint H = pc.n_heads;
  const uint pos0 = step[0], n_new = min(step[1], pc.max_rows);
  const uint t0 = gl_WorkGroupID.x * BR;
  if (t0 >= n_new) return;
  const uint t = t0 + row;
  const bool valid = t < n_new;
  const uint tt = min(t, n_new - 1u);
  const int i = int(pos0 + tt);
  const int q_lo = int(pos0 + t0);
  const int q_hi = int(pos0 + min(t0 + BR, n_new) - 1u);
  const int W = int(min(pc.branch_window, 0x7fffffffu));

  // Query row: norms, logn, scale, log2(e), then the rotation(s).
  vec4 q1[D4];
  vec4 q2[DUAL ? D4 : 1u];
  {
    const uint qb = (tt * H + h) * D4;
    float n2 = 0.0;
    [[unroll]] for (uint c = 0u; c < D4; ++c) n2 += dot(qbuf[qb + c], qbuf[qb + c]);
    const float f = query_factor(i, n2, NORM);
    const int p2 = q2_position(Q2MODE, i, pc.q2_const, pc.group);
    [[unroll]] for (uint c = 0u; c < D4; ++c) {
      const vec4 x = qbuf[qb + c] * f;
      q1[c] = x;
      if (DUAL) q2[c] = x;
      if (ROPE && c < 2u * R4) {
        const bool lo = c < R4;
        const uint cp = lo ? c : c - R4;
        const vec4 y = qbuf[qb + (lo ? c + R4 : c - R4)] * f;
        const vec4 sy = lo ? -y : y;
        vec4 cs, sn;
        table_cs1(i, cp, cs, sn);
        q1[c] = x * cs + sy * sn;
        if (DUAL) {
          cs_at(TABLE2, p2, cp, cs, sn);
          q2[c] = x * cs + sy * sn;
        }
      }
    }
  }
  const float slope = ALIBI ? alibi_slope(h) * float(LOG2E) : 0.0;

  vec4 o[D4];
  [[unroll]] for (uint c = 0u; c < D4; ++c) o[c] = vec4(0.0);
  float m_run = NEG, l_run = 0.0;

  const uint kt_end = uint(q_hi) / BC;
  for (uint kt = 0u; kt <= kt_end; ++kt) {
    const int k_lo = int(kt * BC);
    const int k_hi = min(k_lo + int(BC) - 1, q_hi);
    const int r_min = max(0, q_lo - k_hi), r_max = q_hi - k_lo;
    if (pc.window != 0u && r_min >= int(pc.window) && k_lo >= int(pc.sinks)) continue;   // fully masked
    const bool need1 = !DUAL || r_min < W;
    const bool need2 = DUAL && r_max >= W;

    // Loops below run to nk (a run-time count), never to the constant BC: the
    // shader compiler would otherwise unroll them completely (llvmpipe then
    // spends minutes compiling one pipeline).  Keys past nk are beyond q_hi.
    const uint nk = uint(k_hi - k_lo + 1);
    barrier();   // the previous tile is no longer read
    for (uint idx = lane; idx < nk * D4; idx += WG) {
      const uint j = idx / D4, c = idx % D4;
      const int m = k_lo + int(j);
      const uint base = (g_local * pc.capacity + uint(m)) * D4;
      sV[idx] = vc[base + c];
      if (need1) sK1[idx] = (ROPE && RAW) ? rotated_key(base, c, m, false) : kc[base + c];
      if (need2) sK2[idx] = K2MODE == 0u ? kc[base + c] : rotated_key(base, c, k2_position(K2MODE, m, pc.group), TABLE2);
    }
    barrier();

    // Scores of this row against the tile (log2 domain), ALiBi, masks, tile max.
    float tmax = NEG;
#define FINISH(j, value)                                                       \
  {                                                                            \
    const int m_ = k_lo + int(j);                                              \
    float s_ = (value);                                                        \
    if (ALIBI) s_ -= slope * float(i - m_);                                    \
    s_ = key_visible(i, m_) ? s_ : NEG;                                        \
    SC(j) = s_;                                                                \
    tmax = max(tmax, s_);                                                      \
  }
    if (need1 && !need2) {
      [[dont_unroll]] for (uint j = 0u; j < nk; ++j) {
        vec4 a = vec4(0.0);
        [[unroll]] for (uint c = 0u; c < D4; ++c) a += q1[c] * sK1[j * D4 + c];
        FINISH(j, (a.x + a.y) + (a.z + a.w));
      }
    } else if (need2 && !need1) {
      [[dont_unroll]] for (uint j = 0u; j < nk; ++j) {
        vec4 a = vec4(0.0);
        [[unroll]] for (uint c = 0u; c < D4; ++c) a += q2[c] * sK2[j * D4 + c];
        FINISH(j, (a.x + a.y) + (a.z + a.w));
      }
    } else {
      [[dont_unroll]] for (uint j = 0u; j < nk; ++j) {
        vec4 a = vec4(0.0), b = vec4(0.0);
        [[unroll]] for (uint c = 0u; c < D4; ++c) {
          a += q1[c] * sK1[j * D4 + c];
          b += q2[c] * sK2[j * D4 + c];
        }
        FINISH(j, (i - (k_lo + int(j))) < W ? (a.x + a.y) + (a.z + a.w) : (b.x + b.y) + (b.z + b.w));
      }
    }

    // Online softmax update.
    const float m_new = max(m_run, tmax);
    const float alpha = exp2(m_run - m_new);
    float psum = 0.0;
    [[dont_unroll]] for (uint j = 0u; j < nk; ++j) {
      const float p = SC(j) > NEG_HALF ? exp2(SC(j) - m_new) : 0.0;
      SC(j) = p;
      psum += p;
    }
    l_run = l_run * alpha + psum;
    m_run = m_new;
    [[unroll]] for (uint c = 0u; c < D4; ++c) o[c] *= alpha;
    [[dont_unroll]] for (uint j = 0u; j < nk; ++j) {
      const float p = SC(j);
      [[unroll]] for (uint c = 0u; c < D4; ++c) o[c] += p * sV[j * D4 + c];
    }
  }

  if (!valid) return;
  const float inv = l_run > 0.0 ? 1.0 / l_run : 0.0;
  const uint ob = (t * H + h) * D4;
  [[unroll]] for (uint c = 0u; c < D4; ++c) obuf[ob + c] = o[c] * inv;
}
