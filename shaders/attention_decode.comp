#version 450
// Split-K decode attention (flash-decoding) for one query row at position
// i = pos0 + n_new - 1 (n_new = 1 in decode), with the dual-branch contract.
//
// Workgroup (split s, kv head y) covers keys [s*split_len, (s+1)*split_len) of
// kv head y for all GQ query heads of its group, in tiles of BC keys:
//   phase 1 (invocation = key): rotate the key for the branch it needs (raw
//     cache) and dot it with the group's queries (shared) -> scores
//   phase 2 (invocation = key): tile max per head, probabilities
//   phase 3 (invocation = 4 dims): rescale and accumulate p·V
// The split count is fixed when the command buffer is recorded; splits past
// the live keys (from the step buffer) exit at once, and the combine pass reads
// only the live ones.  Partials: acc [splits][H][D], then (max, sum) [splits][H].
// ReRoPE keys outside the window use the raw key (no rotation), so the extra
// work of a ReRoPE step is O(w·d); Leaky / Self-Extend rotate every branch-2 key.
#extension GL_EXT_control_flow_attributes : require
#include "contract.glsl"
#include "spec/attention_decode.h"
const uint WG = gl_WorkGroupSize.x;
const uint D4 = D / 4u;
const uint R4 = ROTP / 4u;
const uint ACCN = (D4 + WG - 1u) / WG;

layout(binding = B_STEP) readonly buffer Step { uint step[]; };
layout(binding = B_Q) readonly buffer Q { vec4 qbuf[]; };
#include "attention_kv_read.glsl"
layout(binding = B_PART) coherent buffer Part { float part[]; };
// FUSED (attention_decode_fused.glsl); placeholders otherwise.  DECODE_UNFUSED (the *_unfused
// kernels, FUSED false): bindings 0-8 only, so the split pass fits a device with few descriptors per
// stage (Android's 12 storage buffers); the fused step's buffers become stand-ins it never touches.
// Binding 8 carries the keys' calibration (KCAL, attention_key_calib.glsl) in both layouts: the split
// pass scales the queries by it.
layout(binding = B_SINK) readonly buffer KCal { vec4 kcal[]; };
layout(binding = B_SINK) writeonly buffer KCalW { vec4 kcal_w[]; };   // the fused step's exact keys
#ifdef DECODE_UNFUSED
float sink_logit[1];
vec4 k_new[1], v_new[1], obuf[1], kstore[1], vstore[1], krstore[1], qnorm_w[1], knorm_w[1];
uint kstorew[1], vstorew[1], krstorew[1];
shared uint counter[1];   // atomicAdd needs a buffer or shared variable
#else
layout(binding = B_SINK) readonly buffer Sink { float sink_logit[]; };
layout(binding = B_KNEW) readonly buffer KN { vec4 k_new[]; };
layout(binding = B_VNEW) readonly buffer VN { vec4 v_new[]; };
layout(binding = B_OUT) writeonly buffer O { vec4 obuf[]; };
layout(binding = B_KSTORE) writeonly buffer KS { vec4 kstore[]; };
layout(binding = B_VSTORE) writeonly buffer VS { vec4 vstore[]; };
layout(binding = B_KRSTORE) writeonly buffer KRS { vec4 krstore[]; };
layout(binding = B_KSTORE) writeonly buffer KSW { uint kstorew[]; };
layout(binding = B_VSTORE) writeonly buffer VSW { uint vstorew[]; };
layout(binding = B_KRSTORE) writeonly buffer KRSW { uint krstorew[]; };
layout(binding = B_COUNT) coherent buffer Count { uint counter[]; };
layout(binding = B_QNORM) readonly buffer QNW { vec4 qnorm_w[]; };
layout(binding = B_KNORM) readonly buffer KNW { vec4 knorm_w[]; };
#endif
#define ATTN_HAS_TAB2
#include "attention_common.glsl"
#include "attention_kv_codec.glsl"
#include "attention_merge.glsl"
KV_WRITER(fused_write_k, kstore, kstorew, KTYPE)
KV_WRITER(fused_write_kr, krstore, krstorew, KTYPE)
KV_WRITER(fused_write_v, vstore, vstorew, VTYPE)
#include "attention_decode_fused.glsl"
shared uint sArrived;

shared vec4 sQ1[GQ * D4];
shared vec4 sQ2[(DUAL ? GQ : 1u) * D4];
shared float sS[GQ * BC];
shared float sP[GQ * BC];

void cs_at(bool t2, int p, uint c, out vec4 cs, out vec4 sn) {
  if (t2) table_cs2(p, c, cs, sn);
  else table_cs1(p, c, cs, sn);
}

vec4 rotated_key(uint base, uint c, int p, bool t2) {
  const vec4 x = KC(base + c);
  if (c >= 2u * R4) return x;
  vec4 cs, sn;
  if (c < R4) {
    cs_at(t2, p, c, cs, sn);
    return x * cs - KC(base + c + R4) * sn;
  }
  cs_at(t2, p, c - R4, cs, sn);
  return x * cs + KC(base + c - R4) * sn;
}

// Split s of kv head g (g_local in the bound cache): attends keys [k_begin,
// k_end) of the cache (FUSED: the new key i from the qkv output instead of
// the cache when the split holds it) and writes one partial per head.
void attend_split(uint lane, uint s, uint g_local, int i, int k_begin, int k_end) {
  const uint g = pc.kv_base + g_local;
  const uint H = pc.n_heads;
  const int W = int(min(pc.branch_window, 0x7fffffffu));
  const uint ml_base = row_scratch + pc.n_splits * H * D;
  const bool holds_new = FUSED && k_end == i + 1;
  if (holds_new) k_end = i;

  // Queries of the group: norms, logn, scale, log2(e), rotation(s).
  const int p2 = q2_position(Q2MODE, i, pc.q2_const, pc.group);
  for (uint idx = lane; idx < GQ * D4; idx += WG) {
    const uint hq = idx / D4, c = idx % D4;
    const uint qb = (g * GQ + hq) * D4;
    const float rq = q_rms(qb);
    float n2 = 0.0;
    if (NORM == QKNORM_QUERY || NORM == QKNORM_COS)
      for (uint e = 0u; e < D4; ++e) n2 += dot(q_in(qb, e, rq), q_in(qb, e, rq));
    const float f = query_factor(i, n2, NORM);
    const vec4 x = q_in(qb, c, rq) * f;
    vec4 x1 = x, x2 = x;
    if (ROPE && c < 2u * R4) {
      const bool lo = c < R4;
      const uint cp = lo ? c : c - R4;
      const vec4 y = q_in(qb, lo ? c + R4 : c - R4, rq) * f;
      const vec4 sy = lo ? -y : y;
      vec4 cs, sn;
      table_cs1(i, cp, cs, sn);
      x1 = x * cs + sy * sn;
      if (DUAL) {
        cs_at(TABLE2, p2, cp, cs, sn);
        x2 = x * cs + sy * sn;
      }
    }
    sQ1[idx] = KCAL ? x1 * kcal_scale(g, c) : x1;   // keys stored centred and smoothed: q x s
    if (DUAL) sQ2[idx] = x2;
  }
  float slope[GQ];
  for (uint hq = 0u; hq < GQ; ++hq) slope[hq] = ALIBI ? alibi_slope(g * GQ + hq) * float(LOG2E) : 0.0;
  barrier();
  if (HADK) {
    // Keys stored Walsh-Hadamard rotated: so are the queries, a block of 32 dims per invocation.
    for (uint b = lane; b < GQ * D4 / 8u; b += WG) {
      vec4 x[8];
      for (uint u = 0u; u < 8u; ++u) x[u] = sQ1[b * 8u + u];
      hadamard32(x);
      for (uint u = 0u; u < 8u; ++u) sQ1[b * 8u + u] = x[u];
    }
    barrier();
  }

  float m_run[GQ], l_run[GQ], m_new[GQ];
  vec4 acc[GQ * ACCN];
  for (uint hq = 0u; hq < GQ; ++hq) {
    m_run[hq] = NEG;
    l_run[hq] = 0.0;
    for (uint a = 0u; a < ACCN; ++a) acc[hq * ACCN + a] = vec4(0.0);
  }

  for (int k_lo = k_begin; k_lo < k_end; k_lo += int(BC)) {
    const int k_hi = min(k_lo + int(BC), k_end) - 1;
    const int r_min = i - k_hi, r_max = i - k_lo;
    if (pc.window != 0u && r_min >= int(pc.window) && k_lo >= int(pc.sinks)) continue;
    const bool need1 = !DUAL || r_min < W;
    const bool need2 = DUAL && r_max >= W;
    // Loops run to nk (run time), not BC, so the compiler does not unroll them.
    const uint nk = uint(k_hi - k_lo + 1);

    // Phase 1: scores, one key per invocation.
    const bool ex_tile = KCAL && k_lo < int(kcal_exact_keys());
    for (uint j = lane; j < nk; j += WG) {
      const int m = k_lo + int(j);
      const uint base = (g_local * pc.capacity + kv_row(fused_read_key(m, i))) * D4;
      const bool b2 = need2 && (!need1 || (i - m) >= W);
      vec4 kr[D4];
      if (b2) {
        const int pk = k2_position(K2MODE, m, pc.group);
        for (uint c = 0u; c < D4; ++c) kr[c] = K2MODE == K2POS_UNROTATED ? KC(base + c) : rotated_key(base, c, pk, TABLE2);
      } else if (ex_tile && uint(m) < kcal_exact_keys()) {   // an exact key (attention_key_calib.glsl)
        for (uint c = 0u; c < D4; ++c) kr[c] = kcal[kcal_exact_at(g, uint(m)) + c];
      } else {
        for (uint c = 0u; c < D4; ++c)
          kr[c] = KROT ? KR(base + c) : (ROPE && RAW) ? rotated_key(base, c, m, false) : KC(base + c);
      }
      const bool vis = key_visible(i, m);
      for (uint hq = 0u; hq < GQ; ++hq) {
        vec4 a = vec4(0.0);
        if (b2) {
          for (uint c = 0u; c < D4; ++c) a += sQ2[hq * D4 + c] * kr[c];
        } else {
          for (uint c = 0u; c < D4; ++c) a += sQ1[hq * D4 + c] * kr[c];
        }
        float sc = capped_score((a.x + a.y) + (a.z + a.w), SOFTCAP);
        if (ALIBI) sc -= slope[hq] * float(i - m);
        sS[hq * BC + j] = vis ? sc : NEG;
      }
    }
    barrier();

    // Phase 2: tile max per head (every invocation), probabilities of its keys.
    for (uint hq = 0u; hq < GQ; ++hq) {
      float tmax = NEG;
      for (uint j = 0u; j < nk; ++j) tmax = max(tmax, sS[hq * BC + j]);
      m_new[hq] = max(m_run[hq], tmax);
    }
    for (uint j = lane; j < nk; j += WG)
      for (uint hq = 0u; hq < GQ; ++hq) {
        const float sc = sS[hq * BC + j];
        sP[hq * BC + j] = sc > NEG_HALF ? exp2(sc - m_new[hq]) : 0.0;
      }
    barrier();

    // Phase 3: p·V, four dims per invocation and slot.
    for (uint hq = 0u; hq < GQ; ++hq) {
      const float alpha = exp2(m_run[hq] - m_new[hq]);
      float psum = 0.0;
      for (uint j = 0u; j < nk; ++j) psum += sP[hq * BC + j];
      l_run[hq] = l_run[hq] * alpha + psum;
      m_run[hq] = m_new[hq];
      for (uint a = 0u; a < ACCN; ++a) acc[hq * ACCN + a] *= alpha;
    }
    for (uint j = 0u; j < nk; ++j) {
      const uint base = (g_local * pc.capacity + kv_row(fused_read_key(k_lo + int(j), i))) * D4;
      for (uint a = 0u; a < ACCN; ++a) {
        const uint c = lane + a * WG;
        if (c >= D4) break;
        const vec4 v = VC(base + c);
        for (uint hq = 0u; hq < GQ; ++hq) acc[hq * ACCN + a] += sP[hq * BC + j] * v;
      }
    }
    // sS is next written after the barrier that follows phase 2's reads; sP after phase 1's barrier.
  }

  if (holds_new) {
    // The new key, from the qkv output; every invocation updates its own dims.
    vec4 kn[D4], k1[D4], k2[D4];
    fused_new_key(g, i, kn, k1);
    vec4 vn[D4];
    fused_new_value(g, vn);
    const bool b1 = !DUAL || W > 0;
    if (!b1) fused_new_key2(kn, i, k2);
    for (uint hq = 0u; hq < GQ; ++hq) {
      vec4 a = vec4(0.0);
      if (b1) {
        for (uint c = 0u; c < D4; ++c) a += sQ1[hq * D4 + c] * k1[c];
      } else if (DUAL) {
        for (uint c = 0u; c < D4; ++c) a += sQ2[hq * D4 + c] * k2[c];
      }
      const float sc = capped_score((a.x + a.y) + (a.z + a.w), SOFTCAP);
      const float mn = max(m_run[hq], sc);
      const float alpha = exp2(m_run[hq] - mn), p = exp2(sc - mn);
      l_run[hq] = l_run[hq] * alpha + p;
      m_run[hq] = mn;
      for (uint a4 = 0u; a4 < ACCN; ++a4) {
        const uint c = lane + a4 * WG;
        if (c >= D4) break;
        acc[hq * ACCN + a4] = acc[hq * ACCN + a4] * alpha + p * vn[c];
      }
    }
    fused_store(g, g_local, i, kn, k1, lane, WG);
  }

  for (uint hq = 0u; hq < GQ; ++hq) {
    const uint h = g * GQ + hq;
    for (uint a = 0u; a < ACCN; ++a) {
      const uint c = lane + a * WG;
      if (c >= D4) break;
      const uint pb = row_scratch + (s * H + h) * D + c * 4u;
      const vec4 v = acc[hq * ACCN + a];
      part[pb] = v.x;
      part[pb + 1u] = v.y;
      part[pb + 2u] = v.z;
      part[pb + 3u] = v.w;
    }
    if (lane == 0u) {
      part[ml_base + (s * H + h) * 2u] = m_run[hq];
      part[ml_base + (s * H + h) * 2u + 1u] = l_run[hq];
    }
  }
}

void main() {
  const uint lane = gl_LocalInvocationIndex;
  attn_row_begin(D4);
  const uint s = gl_WorkGroupID.x;
  const uint g_local = gl_WorkGroupID.y;
  const uint g = pc.kv_base + g_local;
  const uint H = pc.n_heads;
  const uint pos0 = step[row_step], n_new = max(step[row_step + 1u], 1u);
  const int i = int(pos0 + n_new - 1u);
  const int kv_len = i + 1;
  const int k_begin = decode_first_key(i) + int(s * pc.split_len);
  if (k_begin >= kv_len) return;   // past the live keys: the merge skips this split
  const int k_end = min(k_begin + int(pc.split_len), kv_len);
  const uint ml_base = row_scratch + pc.n_splits * H * D;

  if (pc.window != 0u && i - (k_end - 1) >= int(pc.window) && k_begin >= int(pc.sinks)) {
    // Every key of the split is outside the window: an empty partial.
    for (uint hq = lane; hq < GQ; hq += WG) {
      part[ml_base + (s * H + g * GQ + hq) * 2u] = NEG;
      part[ml_base + (s * H + g * GQ + hq) * 2u + 1u] = 0.0;
    }
  } else {
    attend_split(lane, s, g_local, i, k_begin, k_end);
  }
  if (!FUSED) return;

  // The last workgroup of this kv head to arrive merges the group's heads.
  memoryBarrierBuffer();
  barrier();
  if (lane == 0u) sArrived = atomicAdd(counter[row_scratch + gl_WorkGroupID.y], 1u);
  barrier();
  const uint n_live = live_splits(i);
  if (sArrived + 1u != n_live) return;
  memoryBarrierBuffer();
  for (uint idx = lane; idx < GQ * D4; idx += WG) merge_splits(g * GQ + idx / D4, n_live, idx % D4, D4);
  if (lane == 0u) counter[row_scratch + gl_WorkGroupID.y] = 0u;
}
