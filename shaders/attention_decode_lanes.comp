#version 450
// Split-K decode attention for CPU devices: no shared memory, no barriers.
// One query row at i = pos0 + n_new - 1, with the dual-branch contract.
//
// Workgroup = one subgroup of WG lanes = (split s, kv head, chunk of HPW query
// heads of its GQA group); it covers keys [s*split_len, (s+1)*split_len) in
// tiles of WG x KPL keys.  Lane l takes keys k0 + t*WG + l (t < KPL) of each
// tile, so every texel fetch brings WG distinct keys (llvmpipe gathers a texel
// fetch as one vector op and runs a barrier as a switch between lane groups),
// and keeps its own f32 online softmax (max, sum, HPW accumulators) in
// registers; each key load serves the HPW heads.  At the end the lanes merge
// with subgroup reductions into one partial per (split, head), which
// attention_combine.comp merges as for attention_decode.comp.
//
// Branch classes form contiguous tile ranges, as in attention_prefill.comp:
// tiles wholly outside the ReRoPE window evaluate branch 2 only, tiles inside
// branch 1 only, and only the tile straddling r = W evaluates both; windowed
// layers never visit tiles the window masks (past the sinks).  Each range is a
// loop with bounds uniform over the workgroup, so llvmpipe runs one branch.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "contract.glsl"
#include "spec/attention_decode_lanes.h"
const uint WG = gl_WorkGroupSize.x;
const uint D4 = D / 4u;
const uint R4 = ROTP / 4u;
const uint NHC = (GQ + HPW - 1u) / HPW;   // head chunks per kv head
const uint TK = WG * KPL;                 // keys per tile

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

// Per-lane state: the chunk's queries for branch 1 and 2 (shared by all
// lanes), and this lane's online softmax over the keys it visited.
vec4 q1[HPW * D4];
vec4 q2[DUAL ? HPW * D4 : 1u];
vec4 acc[HPW * D4];
float m_run[HPW], l_run[HPW], slope[HPW];

void cs_at(bool t2, int p, uint c, out vec4 cs, out vec4 sn) {
  if (t2) table_cs2(p, c, cs, sn);
  else table_cs1(p, c, cs, sn);
}

// Key mk at cache row `row` (from the pre-rotated cache when FROM_KR; from the
// exact keys where the tile may hold one, ex_tile), rotated at position kp
// (table 2 when T2) when ROT; s[hq] = q[hq]·key.  Macro: the arrays stay
// registers (every index is a constant once the loops unroll).
#define KEY_SCORES(s, q, FROM_KR, ROT, kp, T2)                                  \
  {                                                                             \
    vec4 k[D4];                                                                 \
    if (FROM_KR) load_kr_row(row, k);                                           \
    else if (ex_tile) load_kc_row_exact(pc.kv_base + g_local, mk, row, k);      \
    else load_kc_row(row, k);                                                   \
    if (ROT) {                                                                  \
      [[unroll]] for (uint c = 0u; c < R4; ++c) {                               \
        vec4 cs, sn;                                                            \
        cs_at(T2, kp, c, cs, sn);                                               \
        const vec4 lo = k[c], hi = k[c + R4];                                   \
        k[c] = lo * cs - hi * sn;                                               \
        k[c + R4] = hi * cs + lo * sn;                                          \
      }                                                                         \
    }                                                                           \
    [[unroll]] for (uint hq = 0u; hq < HPW; ++hq) {                             \
      vec4 a = vec4(0.0);                                                       \
      [[unroll]] for (uint c = 0u; c < D4; ++c) a += q[hq * D4 + c] * k[c];     \
      s[hq] = (a.x + a.y) + (a.z + a.w);                                        \
    }                                                                           \
  }

// kv_row(mk) for the key mk = min(m, k_last) a lane reads, m among the WG keys from m0.  Paged:
// where those keys lie in one block and none is clamped below m0 (conditions the same for every lane),
// the block's table entry is read once for the subgroup, a uniform load (llvmpipe runs a lane-varying
// storage load lane by lane); else each lane reads its own.  No ring with a pool, so fused_read_key
// moves no key.
uint kv_row_lanes(int m0, int mk, int k_last) {
  if (pc.block_rows == 0u || m0 < 0 || k_last < m0) return kv_row(mk);
  const uint b0 = uint(m0) >> pc.block_shift;
  if ((uint(m0 + int(WG) - 1) >> pc.block_shift) != b0 || b0 >= step[row_step + 2u]) return kv_row(mk);
  return (step[row_step + 4u + b0] << pc.block_shift) + (uint(mk) & (pc.block_rows - 1u));
}

// One tile [k0, k0 + TK) of class `cls` (1: branch 1 only, 2: branch 2 only,
// 3: both, select per key); every call site passes a constant class and a
// constant `exact` (the tile may hold exact keys, attention_key_calib.glsl).
// Keys past k_last are read clamped to k_last (a written key) and masked.
void key_tile(int k0, uint cls, uint lane, uint g_local, int i, int k_last, int W, bool exact) {
  const bool need1 = !DUAL || cls != 2u;
  const bool need2 = DUAL && cls != 1u;
  float s[KPL * HPW];
  uint rows[KPL];   // each key's cache row, for its value below too
  const bool ex_tile = KCAL && exact;   // a constant per call site: later tiles compile without the exact keys
  [[unroll]] for (uint t = 0u; t < KPL; ++t) {
    const int m = k0 + int(t * WG + lane);
    const int mk = fused_read_key(min(m, k_last), i);
    const uint row = g_local * pc.capacity + kv_row_lanes(k0 + int(t * WG), mk, k_last);
    rows[t] = row;
    float s1[HPW], s2[HPW];
    if (need1) KEY_SCORES(s1, q1, KROT, !KROT && ROPE && RAW, mk, false)
    if (need2) KEY_SCORES(s2, q2, false, K2MODE != K2POS_UNROTATED, k2_position(K2MODE, mk, pc.group), TABLE2)
    const bool b1 = need1 && (!need2 || (i - m) < W);
    const bool vis = m <= k_last && key_visible(i, m);
    [[unroll]] for (uint hq = 0u; hq < HPW; ++hq) {
      float sc = capped_score(b1 ? s1[hq] : s2[hq], SOFTCAP);
      if (ALIBI) sc -= slope[hq] * float(i - m);
      s[t * HPW + hq] = vis ? sc : NEG;
    }
  }
  [[unroll]] for (uint hq = 0u; hq < HPW; ++hq) {
    float tmax = NEG;
    [[unroll]] for (uint t = 0u; t < KPL; ++t) tmax = max(tmax, s[t * HPW + hq]);
    // Rescale only when some lane's max moved: deep in the context it rarely does.
    if (tmax > m_run[hq]) {
      const float alpha = exp2(m_run[hq] - tmax);
      l_run[hq] *= alpha;
      [[unroll]] for (uint c = 0u; c < D4; ++c) acc[hq * D4 + c] *= alpha;
      m_run[hq] = tmax;
    }
    [[unroll]] for (uint t = 0u; t < KPL; ++t) {
      const float sc = s[t * HPW + hq];
      const float p = sc > NEG_HALF ? exp2(sc - m_run[hq]) : 0.0;
      s[t * HPW + hq] = p;
      l_run[hq] += p;
    }
  }
  [[unroll]] for (uint t = 0u; t < KPL; ++t) {
    vec4 v[D4];
    load_vc_row(rows[t], v);
    [[unroll]] for (uint c = 0u; c < D4; ++c)
      [[unroll]] for (uint hq = 0u; hq < HPW; ++hq) acc[hq * D4 + c] += s[t * HPW + hq] * v[c];
  }
}

// Split s of kv head g (g_local in the bound cache), query heads [hq0,
// hq0 + HPW) of its group: attends keys [k_begin, k_last] of the cache (FUSED:
// plus the new key i when the split holds it) and writes one partial per head.
void attend_split(uint lane, uint s, uint g_local, uint hq0, int i, int k_begin, int k_last) {
  const uint g = pc.kv_base + g_local;
  const uint H = pc.n_heads;
  const int W = int(min(pc.branch_window, 0x7fffffffu));
  const uint ml_base = row_scratch + pc.n_splits * H * D;
  // FUSED: the new key comes from the qkv output, not the cache (module comment of attention_decode_fused.glsl).
  const bool holds_new = FUSED && k_last == i;
  if (holds_new) k_last = i - 1;

  // Queries of the chunk (heads past the group repeat its last head and are
  // not written): norms, logn, scale, log2(e), rotation(s).
  const int p2 = q2_position(Q2MODE, i, pc.q2_const, pc.group);
  [[unroll]] for (uint hq = 0u; hq < HPW; ++hq) {
    const uint h = g * GQ + min(hq0 + hq, GQ - 1u);
    const uint qb = h * D4;
    const float rq = q_rms(qb);
    float n2 = 0.0;
    if (NORM == QKNORM_QUERY || NORM == QKNORM_COS)
      [[unroll]] for (uint c = 0u; c < D4; ++c) n2 += dot(q_in(qb, c, rq), q_in(qb, c, rq));
    const float f = query_factor(i, n2, NORM);
    [[unroll]] for (uint c = 0u; c < D4; ++c) {
      const vec4 x = q_in(qb, c, rq) * f;
      q1[hq * D4 + c] = x;
      if (DUAL) q2[hq * D4 + c] = x;
      acc[hq * D4 + c] = vec4(0.0);
    }
    if (ROPE)
      [[unroll]] for (uint c = 0u; c < R4; ++c) {
        const vec4 lo = q1[hq * D4 + c], hi = q1[hq * D4 + c + R4];
        vec4 cs, sn;
        table_cs1(i, c, cs, sn);
        q1[hq * D4 + c] = lo * cs - hi * sn;
        q1[hq * D4 + c + R4] = hi * cs + lo * sn;
        if (DUAL) {
          cs_at(TABLE2, p2, c, cs, sn);
          q2[hq * D4 + c] = lo * cs - hi * sn;
          q2[hq * D4 + c + R4] = hi * cs + lo * sn;
        }
      }
    // Keys stored centred and smoothed: the query scaled to match (attention_key_calib.glsl).
    if (KCAL) [[unroll]] for (uint c = 0u; c < D4; ++c) q1[hq * D4 + c] *= kcal_scale(g, c);
    slope[hq] = ALIBI ? alibi_slope(h) * float(LOG2E) : 0.0;
    m_run[hq] = NEG;
    l_run[hq] = 0.0;
  }
  // Keys stored Walsh-Hadamard rotated: so are the queries (the accumulators sum rotated values under
  // HADV, which the merge turns back).
  if (HADK) HADAMARD_ROW(q1, HPW * D4)

  // Tile ranges of the split (tile kt covers keys k_begin + kt*TK ...):
  // [0, n_out) branch 2 only, [n_out, t_win) both, [t_win, nt) branch 1 only;
  // the window masks [n_sink, n_masked).
  const int B = int(TK);
  const int nt = k_last >= k_begin ? (k_last - k_begin) / B + 1 : 0;
  const int x = i - W + 1 - k_begin;   // first branch-1 key, relative to the split
  const int n_out = DUAL ? min(max(x, 0) / B, nt) : 0;
  const int t_win = DUAL ? clamp(x <= 0 ? 0 : (x + B - 1) / B, n_out, nt) : 0;
  const int n_masked = pc.window == 0u ? 0 : min(max(i - int(pc.window) + 1 - k_begin, 0) / B, nt);
  const int n_sink = min(max(int(pc.sinks) - k_begin + B - 1, 0) / B, n_masked);
  const int n_exact = KCAL ? min(max(int(kcal_exact_keys()) - k_begin + B - 1, 0) / B, nt) : 0;
  // Tiles [a, b): those that may hold exact keys first, in a loop of their own.
#define TILE_LOOP(a, b, CLS)                                                                                   \
  {                                                                                                            \
    const int la_ = (a), lb_ = (b);                                                                            \
    if (KCAL)                                                                                                  \
      for (int kt = la_; kt < min(lb_, n_exact); ++kt) key_tile(k_begin + kt * B, CLS, lane, g_local, i, k_last, W, true); \
    for (int kt = max(la_, n_exact); kt < lb_; ++kt) key_tile(k_begin + kt * B, CLS, lane, g_local, i, k_last, W, false); \
  }
#define TILE_RANGE(a, b, CLS)                                                   \
  {                                                                             \
    const int lo_ = (a), hi_ = (b);                                             \
    TILE_LOOP(lo_, min(hi_, n_sink), CLS)                                       \
    TILE_LOOP(max(lo_, n_masked), hi_, CLS)                                     \
  }
  if (DUAL) {
    TILE_RANGE(0, n_out, 2u)
    TILE_RANGE(n_out, t_win, 3u)
  }
  TILE_RANGE(t_win, nt, 1u)
#undef TILE_RANGE
#undef TILE_LOOP

  if (holds_new) {
    // The new key: every lane scores it, lane 0 alone counts it.
    vec4 kn[D4], k1[D4];
    fused_new_key(g, i, kn, k1);
    vec4 vn[D4];
    fused_new_value(g, vn);
    const bool b1 = !DUAL || W > 0;
    vec4 k2[D4];
    if (!b1) fused_new_key2(kn, i, k2);
    [[unroll]] for (uint hq = 0u; hq < HPW; ++hq) {
      vec4 a = vec4(0.0);
      if (b1) {
        [[unroll]] for (uint c = 0u; c < D4; ++c) a += q1[hq * D4 + c] * k1[c];
      } else if (DUAL) {
        [[unroll]] for (uint c = 0u; c < D4; ++c) a += q2[hq * D4 + c] * k2[c];
      }
      const float sc = lane == 0u ? capped_score((a.x + a.y) + (a.z + a.w), SOFTCAP) : NEG;
      if (sc > m_run[hq]) {
        const float alpha = exp2(m_run[hq] - sc);
        l_run[hq] *= alpha;
        [[unroll]] for (uint c = 0u; c < D4; ++c) acc[hq * D4 + c] *= alpha;
        m_run[hq] = sc;
      }
      const float p = sc > NEG_HALF ? exp2(sc - m_run[hq]) : 0.0;
      l_run[hq] += p;
      [[unroll]] for (uint c = 0u; c < D4; ++c) acc[hq * D4 + c] += p * vn[c];
    }
    if (hq0 == 0u) fused_store(g, g_local, i, kn, k1, lane, WG);
  }

  // Merge the lanes: one partial per (split, head).
  [[unroll]] for (uint hq = 0u; hq < HPW; ++hq) {
    const float mx = subgroupMax(m_run[hq]);
    const float w = exp2(m_run[hq] - mx);   // 0 for a lane that saw no visible key (unless none did)
    const float l = subgroupAdd(l_run[hq] * w);
    const uint h = g * GQ + hq0 + hq;
    const bool live = hq0 + hq < GQ;
    [[unroll]] for (uint c = 0u; c < D4; ++c) {
      const vec4 a = subgroupAdd(acc[hq * D4 + c] * w);
      if (lane == 0u && live) {
        const uint pb = row_scratch + (s * H + h) * D + c * 4u;
        part[pb] = a.x;
        part[pb + 1u] = a.y;
        part[pb + 2u] = a.z;
        part[pb + 3u] = a.w;
      }
    }
    if (lane == 0u && live) {
      part[ml_base + (s * H + h) * 2u] = mx;
      part[ml_base + (s * H + h) * 2u + 1u] = l;
    }
  }
}

void main() {
  const uint lane = gl_SubgroupInvocationID;
  attn_row_begin(D4);
  const uint s = gl_WorkGroupID.x;
  const uint g_local = gl_WorkGroupID.y / NHC;
  const uint hq0 = (gl_WorkGroupID.y % NHC) * HPW;   // first query head of the chunk within the group
  const uint g = pc.kv_base + g_local;
  const uint H = pc.n_heads;
  const uint pos0 = step[row_step], n_new = max(step[row_step + 1u], 1u);
  const int i = int(pos0 + n_new - 1u);
  const int k_begin = decode_first_key(i) + int(s * pc.split_len);
  if (k_begin > i) return;   // past the live keys: the merge skips this split
  const int k_last = min(k_begin + int(pc.split_len), i + 1) - 1;
  const uint ml_base = row_scratch + pc.n_splits * H * D;

  if (pc.window != 0u && i - k_last >= int(pc.window) && k_begin >= int(pc.sinks)) {
    // Every key of the split is outside the sliding window: an empty partial.
    if (lane == 0u)
      for (uint hq = hq0; hq < min(hq0 + HPW, GQ); ++hq) {
        part[ml_base + (s * H + g * GQ + hq) * 2u] = NEG;
        part[ml_base + (s * H + g * GQ + hq) * 2u + 1u] = 0.0;
      }
  } else {
    attend_split(lane, s, g_local, hq0, i, k_begin, k_last);
  }
  if (!FUSED) return;

  // The last workgroup of this (kv head, head chunk) to arrive merges its heads.
  memoryBarrierBuffer();
  const uint n_live = live_splits(i);
  uint arrived = 0u;
  if (lane == 0u) arrived = atomicAdd(counter[row_scratch + gl_WorkGroupID.y], 1u);
  arrived = subgroupMax(arrived);   // lane 0's count
  if (arrived + 1u != n_live) return;
  memoryBarrierBuffer();
  for (uint hq = hq0; hq < min(hq0 + HPW, GQ); ++hq) merge_splits(g * GQ + hq, n_live, lane, WG);
  if (lane == 0u) counter[row_scratch + gl_WorkGroupID.y] = 0u;
}
