#version 450
// The keys' calibration of a cache that stores them centred and smoothed
// (KCAL, attention_key_calib.glsl), from the rows of the first prefill chunk
// the cache sees, per (kv head, channel) of the key as the cache holds it
// (rotated at its position):
//  * mu: the chunk's mean raw key, turned by the average rotation over the
//    context's positions [0, P): the offset the stored keys keep on average
//    over a whole context.  (Their mean over the chunk's own positions would
//    keep mid-frequency pairs' partial turns, wrong at later positions.)
//  * s = sqrt(std(k) / rms(q)), q the group's queries rotated likewise,
//    normalised to a geometric mean of 1 per kv head and kept in [1/16, 16]
//    (SmoothQuant's balance with alpha = 1/2: it evens out q·e for a rounding
//    error e spread over the channels) -- from SMOOTH_ROWS rows on only: from
//    fewer, its noise costs more than it saves, and s stays 1.
// It runs once per layer: the flag word (header) is 0 until then, 1 after,
// and 2 when the identity (mu = 0, s = 1) was kept because the cache's first
// rows were too few (the host sets 2 when they came through a decode step);
// any other value returns at once.  One workgroup: every invocation reads
// the flag before any writes it.
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
layout(binding = B_KCAL) buffer KCalFlag { uint kcal_flag; };
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

void main() {
  const uint lid = gl_LocalInvocationID.x;
  if (kcal_flag != 0u) return;
  const uint pos0 = step[0], n = min(step[1], pc.max_rows);
  barrier();   // every invocation has read the flag
  if (n < MIN_ROWS) {
    if (lid == 0u) kcal_flag = 2u;
    return;
  }
  const uint hkv = pc.n_kv_heads;
  const bool smoothed = n >= SMOOTH_ROWS;
  for (uint g = 0u; g < hkv; ++g) {
    float log_sum = 0.0;
    for (uint j = lid; j < D; j += WG) {
      // mu: the mean raw key of channel j (and of its partner), turned by the average rotation.
      const bool turns = ROTATE && j < 2u * ROTP;
      const uint jp = j < ROTP ? j + ROTP : j - ROTP;
      float m = 0.0, mp = 0.0;
      for (uint t = 0u; t < n; ++t) {
        const uint base = (t * hkv + g) * D;
        m += k_new[base + j];
        if (turns) mp += k_new[base + jp];
      }
      m /= float(n);
      mp /= float(n);
      float mu = m;
      if (turns) {
        const vec2 cs = mean_turn(j % ROTP);
        mu = j < ROTP ? m * cs.x - mp * cs.y : m * cs.x + mp * cs.y;
      }
      kcal_f[4u + 2u * g * D + j] = mu;
      float s = 1.0;
      if (smoothed) {
        float mk = 0.0;
        for (uint t = 0u; t < n; ++t) {
          float y;
          ROTATED(k_new, (t * hkv + g) * D, j, pos0 + t, 1.0, y)
          mk += y;
        }
        mk /= float(n);
        float vk = 0.0, q2 = 0.0;
        for (uint t = 0u; t < n; ++t) {
          float y;
          ROTATED(k_new, (t * hkv + g) * D, j, pos0 + t, 1.0, y)
          vk += (y - mk) * (y - mk);
          for (uint hq = 0u; hq < GQ; ++hq) {
            float z;
            ROTATED(qbuf, (t * pc.n_heads + g * GQ + hq) * D, j, pos0 + t, 1.0, z)
            q2 += z * z;
          }
        }
        const float sd = sqrt(vk / float(n)), rq = sqrt(q2 / float(n * GQ));
        s = sqrt(max(sd, 1e-12) / max(rq, 1e-12));
        log_sum += log(s);
      }
      kcal_f[4u + (2u * g + 1u) * D + j] = s;
    }
    if (smoothed) {
      s_sum[lid] = log_sum;
      barrier();
      float total = 0.0;
      for (uint i = 0u; i < WG; ++i) total += s_sum[i];
      const float gm = exp(total / float(D));
      for (uint j = lid; j < D; j += WG) {
        const uint at = 4u + (2u * g + 1u) * D + j;
        kcal_f[at] = clamp(kcal_f[at] / gm, 1.0 / 16.0, 16.0);
      }
      barrier();   // s_sum is reused by the next head
    }
  }
  if (lid == 0u) kcal_flag = 1u;
}
