#version 450
// The keys' calibration of a cache that stores them centred and smoothed
// (KCAL, attention_key_calib.glsl), per (kv head, channel) of the key as the
// cache holds it (rotated at its position), from statistics over the rows of
// the prefill chunks the cache has seen:
//  * mu: the mean raw key, turned by the average rotation over the context's
//    positions [0, P): the offset the stored keys keep on average over a
//    whole context.  (Their mean over the rows' own positions would keep
//    mid-frequency pairs' partial turns, wrong at later positions.)
//  * s = sqrt(std(k) / rms(q)), q the group's queries rotated likewise,
//    normalised to a geometric mean of 1 per kv head and kept in [1/16, 16]
//    (SmoothQuant's balance with alpha = 1/2: it evens out q·e for a rounding
//    error e spread over the channels) -- from SMOOTH_ROWS rows on only: from
//    fewer, its noise costs more than it saves, and s stays 1.
// Every run merges its chunk's statistics (mean raw key, mean and spread of
// the rotated key, mean square of the rotated queries) into the running ones
// while fewer than the header's cap rows were taken (Chan et al.'s pairwise
// update: no sum of squares to cancel).  mu and s are (re)set only when the
// flag word is 0, from everything taken so far, the chunk's rows included:
// at the cache's first prefill, and again when the host restarts an empty
// cache (KeyCalibration::restart), so a cache that is reused refines its
// calibration from more text than one chunk holds.  The flag is then 1, or 2
// when there were too few rows (the identity: mu = 0, s = 1); the host sets
// 2 when the first rows come through a decode step (the current mu and s
// stay).  One workgroup: every invocation reads the header before any
// writes it.
#extension GL_EXT_control_flow_attributes : require
#include "contract.glsl"
#include "spec/attention_kv_calibrate.h"
const uint WG = gl_WorkGroupSize.x;
const uint D4 = D / 4u;

layout(binding = B_STEP) readonly buffer Step { uint step[]; };
layout(binding = B_Q) readonly buffer Q { float qbuf[]; };
layout(binding = B_KNEW) readonly buffer KN { float k_new[]; };
layout(binding = B_TAB1) readonly buffer T1 { vec4 tab1[]; };
layout(binding = B_KCAL) buffer KCal { float kcal_f[]; };
layout(binding = B_KCAL) buffer KCalHeader { uint kcal_flag; uint kcal_seen; uint kcal_cap; };
#include "attention_common.glsl"

shared float s_sum[WG];

// Channel j of row x (floats from `base`) as the cache holds it: rotated at position p for a rotating
// channel.  f: the key norm's factor (1 for queries).
#define ROTATED(buf, base, j, p, f, out_v)                                        \
  {                                                                               \
    const float x_ = buf[(base) + (j)] * (f);                                     \
    out_v = x_;                                                                   \
    if (ROTATE && (j) < 2u * ROTP) {                                              \
      const uint pr_ = (j) % ROTP;                                                \
      vec4 cs_, sn_;                                                              \
      table_cs1(int(p), pr_ / 4u, cs_, sn_);                                      \
      const float c_ = cs_[pr_ % 4u], s_ = sn_[pr_ % 4u];                         \
      if ((j) < ROTP) out_v = x_ * c_ - buf[(base) + (j) + ROTP] * (f) * s_;      \
      else out_v = x_ * c_ + buf[(base) + (j) - ROTP] * (f) * s_;                 \
    }                                                                             \
  }

// Average (cos, sin) of rotating pair pr over positions [0, P), P = pc.capacity: the context the cache
// serves (Attention::kv_calibrate), within the table.
vec2 mean_turn(uint pr) {
  const uint P = pc.capacity;
  vec2 acc = vec2(0.0);
  for (uint p = 0u; p < P; ++p) {
    vec4 cs, sn;
    table_cs1(int(p), pr / 4u, cs, sn);
    acc += vec2(cs[pr % 4u], sn[pr % 4u]);
  }
  return acc / float(max(P, 1u));
}

// The running statistics of kv head g, after mu and s: per channel the mean raw key, the rotated key's mean
// and its sum of squared deviations, and the rotated queries' mean square.
const uint ST_RAW = 0u, ST_MEAN = 1u, ST_M2 = 2u, ST_QSQ = 3u;
uint stat_at(uint g, uint a, uint j) { return 4u + 2u * pc.n_kv_heads * D + (4u * g + a) * D + j; }

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint flag = kcal_flag, seen = kcal_seen, cap = kcal_cap;
  const bool finalize = flag == 0u;
  const uint pos0 = step[0], n = min(step[1], pc.max_rows);
  // The chunk's rows join the statistics while under the cap, and always when they set mu and s.
  const bool collect = n > 0u && (finalize || seen < cap);
  if (!finalize && !collect) return;
  barrier();   // every invocation has read the header
  const uint hkv = pc.n_kv_heads;
  const uint total = collect ? seen + n : seen;
  const bool calibrated = total >= MIN_ROWS, smoothed = total >= SMOOTH_ROWS;
  for (uint g = 0u; g < hkv; ++g) {
    if (collect) {
      for (uint j = lid; j < D; j += WG) {
        // The chunk's statistics in one pass (Welford for the rotated key), merged into the running ones.
        float raw = 0.0, mean = 0.0, m2 = 0.0, q2 = 0.0;
        for (uint t = 0u; t < n; ++t) {
          const uint base = (t * hkv + g) * D;
          raw += k_new[base + j];
          float y;
          ROTATED(k_new, base, j, pos0 + t, 1.0, y)
          const float dy = y - mean;
          mean += dy / float(t + 1u);
          m2 += dy * (y - mean);
          for (uint hq = 0u; hq < GQ; ++hq) {
            float z;
            ROTATED(qbuf, (t * pc.n_heads + g * GQ + hq) * D, j, pos0 + t, 1.0, z)
            q2 += z * z;
          }
        }
        const float fa = float(seen), fb = float(n), wb = fb / (fa + fb);
        const uint r = stat_at(g, ST_RAW, j), m = stat_at(g, ST_MEAN, j), v = stat_at(g, ST_M2, j),
                   qs = stat_at(g, ST_QSQ, j);
        const float dm = mean - kcal_f[m];
        kcal_f[r] += (raw / fb - kcal_f[r]) * wb;
        kcal_f[m] += dm * wb;
        kcal_f[v] += m2 + dm * dm * fa * wb;
        kcal_f[qs] += (q2 / (fb * float(GQ)) - kcal_f[qs]) * wb;
      }
      barrier();   // a rotating channel's mu reads its partner's raw mean
    }
    if (!finalize) continue;
    float log_sum = 0.0;
    for (uint j = lid; j < D; j += WG) {
      float mu = 0.0, s = 1.0;
      if (calibrated) {
        // mu: the mean raw key of channel j (and of its partner), turned by the average rotation.
        mu = kcal_f[stat_at(g, ST_RAW, j)];
        if (ROTATE && j < 2u * ROTP) {
          const float mp = kcal_f[stat_at(g, ST_RAW, j < ROTP ? j + ROTP : j - ROTP)];
          const vec2 cs = mean_turn(j % ROTP);
          mu = j < ROTP ? mu * cs.x - mp * cs.y : mu * cs.x + mp * cs.y;
        }
      }
      if (smoothed) {
        const float sd = sqrt(kcal_f[stat_at(g, ST_M2, j)] / float(total));
        const float rq = sqrt(kcal_f[stat_at(g, ST_QSQ, j)]);
        s = sqrt(max(sd, 1e-12) / max(rq, 1e-12));
        log_sum += log(s);
      }
      kcal_f[4u + 2u * g * D + j] = mu;
      kcal_f[4u + (2u * g + 1u) * D + j] = s;
    }
    if (smoothed) {
      s_sum[lid] = log_sum;
      barrier();
      float sum = 0.0;
      for (uint i = 0u; i < WG; ++i) sum += s_sum[i];
      const float gm = exp(sum / float(D));
      for (uint j = lid; j < D; j += WG) {
        const uint at = 4u + (2u * g + 1u) * D + j;
        kcal_f[at] = clamp(kcal_f[at] / gm, 1.0 / 16.0, 16.0);
      }
      barrier();   // s_sum is reused by the next head
    }
  }
  if (lid == 0u) {
    kcal_seen = total;
    if (finalize) kcal_flag = calibrated ? 1u : 2u;
  }
}
