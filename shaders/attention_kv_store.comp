#version 450
// KV-cache store: rows t < n_new of k_new / v_new ([rows, n_kv_heads*D]) go to
// cache position pos0 + t of every kv head ([n_kv_heads][capacity][D]).
// Batched decode (pc.step_stride > 0): workgroup row z stores row z of k_new /
// v_new for the sequence whose step record is the z-th (attn_row_begin).
// KeyNorm / CosA keys are stored L2-normalised (norm of the un-rotated key);
// with a rotated cache the key is then rotated at its position (table 1).
// Positions come from the step buffer; rows past the capacity are dropped
// (a ring cache, pc.ring > 0, reuses rows instead: kv_row).
// STORE_ROT: a raw cache also gets the rotated key in a second buffer (binding
// 6), so branch 1 of the dual-branch schemes reads keys as plain RoPE does.
// Rows are written as KTYPE / VTYPE say (attention_kv_codec.glsl), blocks
// Walsh-Hadamard rotated first where HADK / HADV say (attention_hadamard.glsl),
// and keys centred and smoothed before that where KCAL says (attention_key_calib.glsl),
// whose exact keys also go to the calibration, f32.
#extension GL_EXT_control_flow_attributes : require
#include "contract.glsl"
#include "spec/attention_kv_store.h"
const uint D4 = D / 4u;
const uint R4 = ROTP / 4u;

layout(binding = B_STEP) readonly buffer Step { uint step[]; };
layout(binding = B_KNEW) readonly buffer KN { vec4 k_new[]; };
layout(binding = B_VNEW) readonly buffer VN { vec4 v_new[]; };
layout(binding = B_KCACHE) writeonly buffer KC { vec4 kc[]; };
layout(binding = B_KCACHE) writeonly buffer KCW { uint kcw[]; };
layout(binding = B_VCACHE) writeonly buffer VC { vec4 vc[]; };
layout(binding = B_VCACHE) writeonly buffer VCW { uint vcw[]; };
layout(binding = B_TAB1) readonly buffer T1 { vec4 tab1[]; };
layout(binding = B_KROT) writeonly buffer KR { vec4 krot[]; };
layout(binding = B_KROT) writeonly buffer KRW { uint krotw[]; };
layout(binding = B_KCAL) buffer KCal { vec4 kcal[]; };   // written: its exact keys
#include "attention_common.glsl"
#include "attention_kv_codec.glsl"
KV_WRITER(store_k, kc, kcw, KTYPE)
KV_WRITER(store_v, vc, vcw, VTYPE)
KV_WRITER(store_krot, krot, krotw, KTYPE)

void main() {
  attn_row_begin(D4);
  const uint id = gl_GlobalInvocationID.x;
  const uint hkv = pc.n_kv_heads;
  const uint t = id / hkv, g = id % hkv;
  const uint pos0 = step[row_step], n_new = min(step[row_step + 1u], pc.max_rows);
  if (t >= n_new) return;
  const uint pos = pos0 + t;
  if (kv_dropped(pos)) return;
  const uint src = row_kv + (t * hkv + g) * D4;
  const uint row = g * pc.capacity + kv_row(int(pos));
  float f = 1.0;
  if (NORMALIZE) {
    float n2 = 0.0;
    for (uint c = 0u; c < D4; ++c) n2 += dot(k_new[src + c], k_new[src + c]);
    f = 1.0 / max(sqrt(n2), 1e-30);
  }
  vec4 xs[D4], ys[D4], vs[D4];
  for (uint c = 0u; c < D4; ++c) {
    const vec4 x = k_new[src + c] * f;
    vec4 y = x;
    if ((ROTATE || STORE_ROT) && c < 2u * R4) {
      vec4 cs, sn;
      if (c < R4) {
        table_cs1(int(pos), c, cs, sn);
        y = x * cs - k_new[src + c + R4] * f * sn;
      } else {
        table_cs1(int(pos), c - R4, cs, sn);
        y = x * cs + k_new[src + c - R4] * f * sn;
      }
    }
    xs[c] = ROTATE ? y : x;
    ys[c] = y;
    vs[c] = v_new[src + c];
    if (KCAL) xs[c] = (xs[c] - kcal_mean(g, c)) / kcal_scale(g, c);
  }
  if (HADK) HADAMARD_ROW(xs, D4)
  if (HADV) HADAMARD_ROW(vs, D4)
  store_k(row, xs);
  if (KCAL && pos < kcal_exact_keys())
    for (uint c = 0u; c < D4; ++c) kcal[kcal_exact_at(g, pos) + c] = xs[c];
  if (STORE_ROT) store_krot(row, ys);
  store_v(row, vs);
}
