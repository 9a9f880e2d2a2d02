#version 450
// Flash-style causal prefill attention with the dual-branch contract
// (docs EXTRAPOLATION.md §1.2, §5).
//
// One workgroup = one subgroup of WG lanes.  Lane = (row, head of the GQA
// group): ROWS query rows x HPW query heads of one kv head, so every key/value
// the workgroup loads serves all HPW heads of the group (the kv tile is read,
// and rotated for a raw cache, once per group).  Keys go by in tiles of WG
// (= Bc): lane l loads key k0+l (rotating it when the branch needs it) and the
// lanes exchange them with subgroup shuffles, so each memory load brings WG
// distinct values (llvmpipe executes a load lane by lane; a load that every
// lane repeats would waste WG-1 of them).  Each lane keeps its query row(s) and
// its f32 online-softmax state (max, sum, accumulator).  No shared memory, no
// barriers, never an n x n buffer.
//
// Per (query tile, key tile), from the real (unaligned, chunked) bounds:
//   r_min = max(0, q_lo - k_hi), r_max = q_hi - k_lo   (causal-valid range)
//   fully masked by the sliding window (and no sink) -> skipped
//   single branch or r_max < W  -> branch 1 only
//   r_min >= W                  -> branch 2 only
//   otherwise (mixed)           -> both dot products, select per element
// Positions (pos0, n_new) come from the step buffer.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "contract.glsl"
#include "spec/attention_prefill.h"
const uint WG = gl_WorkGroupSize.x;
const uint D4 = D / 4u;
const uint R4 = ROTP / 4u;
const uint NHC = (GQ + HPW - 1u) / HPW;           // head chunks per kv head

layout(binding = B_STEP) readonly buffer Step { uint step[]; };
layout(binding = B_Q) readonly buffer Q { vec4 qbuf[]; };
#include "attention_kv_read.glsl"
layout(binding = B_OUT) writeonly buffer O { vec4 obuf[]; };
layout(binding = B_SINK) readonly buffer Sink { float sink_logit[]; };
layout(binding = B_SINK) readonly buffer KCal { vec4 kcal[]; };
#define ATTN_HAS_TAB2
#include "attention_common.glsl"
#include "attention_kv_codec.glsl"

void cs_at(bool t2, int p, uint c, out vec4 cs, out vec4 sn) {
  if (t2) table_cs2(p, c, cs, sn);
  else table_cs1(p, c, cs, sn);
}

// s[jj] += q · key(k0 + j0 + jj) for the KS keys of one block of the tile;
// lane l supplies key k0 + l (at `base`), rotated at position `kp` when ROT_K.
#define QK(s, q, ROT_K, kp, T2, LOADK)                                          \
  {                                                                             \
    [[unroll]] for (uint c = 0u; c < D4; ++c) {                                 \
      if (c >= R4 && c < 2u * R4 && (ROT_K)) continue;                          \
      vec4 k_lo = LOADK(base + c), k_hi = vec4(0.0);                            \
      if ((ROT_K) && c < R4) {                                                  \
        const vec4 x_hi = LOADK(base + c + R4);                                 \
        vec4 cs, sn;                                                            \
        cs_at(T2, kp, c, cs, sn);                                               \
        k_hi = x_hi * cs + k_lo * sn;                                           \
        k_lo = k_lo * cs - x_hi * sn;                                           \
      }                                                                         \
      [[unroll]] for (uint jj = 0u; jj < KS; ++jj) {                            \
        const vec4 kb = subgroupShuffle(k_lo, j0 + jj);                         \
        vec4 a = q[c] * kb;                                                     \
        if ((ROT_K) && c < R4) a += q[c + R4] * subgroupShuffle(k_hi, j0 + jj); \
        s[jj] += (a.x + a.y) + (a.z + a.w);                                     \
      }                                                                         \
    }                                                                           \
  }

// Per-invocation state of one query row: rotated queries (branch 1, 2),
// f32 online-softmax state and output accumulator.
vec4 q1[D4];
vec4 q2[DUAL ? D4 : 1u];
vec4 o[D4];
float m_run, l_run, slope;

// One key tile [k0, k0 + WG) of class `cls` (1: branch 1 only, 2: branch 2
// only, 3: both, per-element select) into the row state above.  Every call
// site passes a constant class, so each loop below compiles to one branch.
void key_tile(int k0, uint cls, uint lane, uint g_local, int i, int q_hi, int W) {
  const int k_hi = min(k0 + int(WG) - 1, q_hi);
  const bool need1 = !DUAL || cls != 2u;
  const bool need2 = DUAL && cls != 1u;
  // This lane's key (clamped to a written one; keys past k_hi are masked).
  const int mk = min(k0 + int(lane), k_hi);
  const uint base = (g_local * pc.capacity + kv_row(mk)) * D4;
  // Exact keys (attention_key_calib.glsl): only a tile that may hold one (uniform) tests its lanes.
  const bool ex_tile = KCAL && k0 < int(kcal_exact_keys());
  const bool ex_key = ex_tile && uint(mk) < kcal_exact_keys();
  const uint ex_at = ex_key ? kcal_exact_at(pc.kv_base + g_local, uint(mk)) : 0u;
#define KC_EXACT(i) (ex_key ? kcal[ex_at + ((i) - base)] : KC(i))

  // Blocks of KS keys, each its own online-softmax step.  On CPU devices KS =
  // WG (one block, no loop); on GPUs (WG 32 or 64) a fully unrolled tile made
  // the driver's compiler take minutes, and a block re-reads its lane's K/V
  // from cache, not memory.
  [[dont_unroll]] for (uint j0 = 0u; j0 < WG && k0 + int(j0) <= k_hi; j0 += KS) {
    float s1[KS], s2[KS];
    [[unroll]] for (uint jj = 0u; jj < KS; ++jj) {
      s1[jj] = 0.0;
      s2[jj] = 0.0;
    }
    if (need1) {
      if (KROT) QK(s1, q1, false, mk, false, KR)
      else if (ex_tile) QK(s1, q1, ROPE && RAW, mk, false, KC_EXACT)
      else QK(s1, q1, ROPE && RAW, mk, false, KC)
    }
    if (need2) QK(s2, q2, K2MODE != K2POS_UNROTATED, k2_position(K2MODE, mk, pc.group), TABLE2, KC)

    // Select, soft cap, ALiBi, masks (log2 domain), then the online softmax update.
    float tmax = NEG;
    [[unroll]] for (uint jj = 0u; jj < KS; ++jj) {
      const int m = k0 + int(j0 + jj);
      float s = capped_score((need1 && (!need2 || (i - m) < W)) ? s1[jj] : s2[jj], SOFTCAP);
      if (ALIBI) s -= slope * float(i - m);
      s = (m <= k_hi && key_visible(i, m)) ? s : NEG;
      s1[jj] = s;
      tmax = max(tmax, s);
    }
    const float m_new = max(m_run, tmax);
    const float alpha = exp2(m_run - m_new);
    float psum = 0.0;
    [[unroll]] for (uint jj = 0u; jj < KS; ++jj) {
      const float p = s1[jj] > NEG_HALF ? exp2(s1[jj] - m_new) : 0.0;
      s1[jj] = p;
      psum += p;
    }
    l_run = l_run * alpha + psum;
    m_run = m_new;
    [[unroll]] for (uint c = 0u; c < D4; ++c) {
      const vec4 v = VC(base + c);
      vec4 a = o[c] * alpha;
      [[unroll]] for (uint jj = 0u; jj < KS; ++jj) a += s1[jj] * subgroupShuffle(v, j0 + jj);
      o[c] = a;
    }
  }
}

void main() {
  const uint lane = gl_SubgroupInvocationID;
  const uint row = lane / HPW, hc = lane % HPW;
  const uint g_local = gl_WorkGroupID.y / NHC;    // kv head within this dispatch's binding
  const uint hq = (gl_WorkGroupID.y % NHC) * HPW + hc;
  const uint g = pc.kv_base + g_local;
  const uint h = g * GQ + min(hq, GQ - 1u);
  const uint H = pc.n_heads;
  const uint pos0 = step[0], n_new = min(step[1], pc.max_rows);
  const uint t0 = gl_WorkGroupID.x * ROWS;
  if (t0 >= n_new) return;
  const uint t = t0 + min(row, ROWS - 1u);
  const bool valid = row < ROWS && hq < GQ && t < n_new;
  const uint tt = min(t, n_new - 1u);
  const int i = int(pos0 + tt);
  const int q_lo = int(pos0 + t0);
  const int q_hi = int(pos0 + min(t0 + ROWS, n_new) - 1u);
  const int W = int(min(pc.branch_window, 0x7fffffffu));

  // Query row: norms, logn, scale, log2(e), then the rotation(s).
  {
    const uint qb = (tt * H + h) * D4;
    float n2 = 0.0;
    if (NORM == QKNORM_QUERY || NORM == QKNORM_COS)
      [[unroll]] for (uint c = 0u; c < D4; ++c) n2 += dot(qbuf[qb + c], qbuf[qb + c]);
    const float f = query_factor(i, n2, NORM);
    const int p2 = q2_position(Q2MODE, i, pc.q2_const, pc.group);
    [[unroll]] for (uint c = 0u; c < D4; ++c) {
      const vec4 x = qbuf[qb + c] * f;
      q1[c] = x;
      if (DUAL) q2[c] = x;
    }
    if (ROPE)
      [[unroll]] for (uint c = 0u; c < R4; ++c) {
        const vec4 lo = q1[c], hi = q1[c + R4];
        vec4 cs, sn;
        table_cs1(i, c, cs, sn);
        q1[c] = lo * cs - hi * sn;
        q1[c + R4] = hi * cs + lo * sn;
        if (DUAL) {
          cs_at(TABLE2, p2, c, cs, sn);
          q2[c] = lo * cs - hi * sn;
          q2[c + R4] = hi * cs + lo * sn;
        }
      }
    // Keys stored centred and smoothed: the query scaled to match (attention_key_calib.glsl).
    if (KCAL) [[unroll]] for (uint c = 0u; c < D4; ++c) q1[c] *= kcal_scale(g, c);
    // Keys stored Walsh-Hadamard rotated (never with DUAL, whose keys are raw): so is the query.
    if (HADK) HADAMARD_ROW(q1, D4)
  }
  slope = ALIBI ? alibi_slope(h) * float(LOG2E) : 0.0;
  [[unroll]] for (uint c = 0u; c < D4; ++c) o[c] = vec4(0.0);
  m_run = NEG;
  l_run = 0.0;

  // Tile classes form contiguous ranges of the key-tile index (module
  // comment): [0, n_out) branch 2 only, [n_out, t_win) both, [t_win, t_end]
  // branch 1 only.  Separate loops with uniform bounds, because llvmpipe runs
  // both sides of a data-dependent branch; GPUs lose nothing.  Tiles that the
  // sliding window masks completely ([n_sink, n_masked), past the sinks) are
  // never visited.
  const int B = int(WG);
  const int t_end = q_hi / B;
  const int n_out = DUAL ? min(max(q_lo - W + 1, 0) / B, t_end + 1) : 0;
  const int t_win = DUAL ? clamp(q_hi - W < 0 ? 0 : (q_hi - W) / B + 1, n_out, t_end + 1) : 0;
  const int n_masked = pc.window == 0u ? 0 : min(max(q_lo - int(pc.window) + 1, 0) / B, t_end + 1);
  const int n_sink = min((int(pc.sinks) + B - 1) / B, n_masked);
  // One loop per class (one inlined copy of key_tile each): it jumps from the
  // last sink tile to the first unmasked one.
#define TILE_RANGE(a, b, CLS)                                                   \
  {                                                                             \
    const int hi_ = (b), skip_lo = min(hi_, n_sink), skip_hi = max((a), n_masked); \
    for (int kt = (a); kt < hi_; ++kt) {                                        \
      if (kt >= skip_lo && kt < skip_hi) kt = skip_hi;                          \
      if (kt >= hi_) break;                                                     \
      key_tile(kt * B, CLS, lane, g_local, i, q_hi, W);                         \
    }                                                                           \
  }
  if (DUAL) {
    TILE_RANGE(0, n_out, 2u)
    TILE_RANGE(n_out, t_win, 3u)
  }
  TILE_RANGE(t_win, t_end + 1, 1u)
#undef TILE_RANGE

  if (!valid) return;
  if (SINK) {
    // The head's sink logit joins the denominator (no value): the row's max
    // becomes max(m, s_h) and the sum gains exp(s_h - max).
    const float sl = sink_logit[h] * float(LOG2E);
    const float m = max(m_run, sl);
    const float alpha = exp2(m_run - m);
    l_run = l_run * alpha + exp2(sl - m);
    [[unroll]] for (uint c = 0u; c < D4; ++c) o[c] *= alpha;
  }
  const float inv = l_run > 0.0 ? 1.0 / l_run : 0.0;
  if (HADV) HADAMARD_ROW(o, D4)   // values stored rotated: the output turned back
  const uint ob = (t * H + h) * D4;
  [[unroll]] for (uint c = 0u; c < D4; ++c) obuf[ob + c] = o[c] * inv;
}
