// The split-K merge of decode attention, shared by attention_combine.comp and
// the fused decode kernels (FUSED: the last split of a head to finish merges).
//
// The including shader declares `part` (float partials: acc [splits][H][D],
// then (max, sum) [splits][H]), `obuf` (vec4 output rows), `sink_logit` (f32
// [n_heads], read when SINK) and the SINK constant, and includes
// attention_common.glsl first.  HADV (values stored Walsh-Hadamard rotated,
// attention_hadamard.glsl): an invocation merges whole blocks of 32 dims and
// rotates each back, since the partials sum rotated values.
#include "attention_hadamard.glsl"

// Live splits of a step whose query is at position i: the splits that start
// at or before i (decode_first_key as the kernels walk them).
uint live_splits(int i) {
  const uint keys = uint(i + 1 - decode_first_key(i));
  return min(pc.n_splits, (keys + pc.split_len - 1u) / pc.split_len);
}

// Output row of head h from its n_live partials; this invocation writes dims
// [4c, 4c+4) for c = first, first + stride, ... (HADV: the blocks of 32 dims
// c = first, first + stride, ...).  Splits with an empty sum (fully
// masked) are skipped.  The sink logit s_h (natural-log domain, like the
// scaled scores) joins the denominator once, here: p_j = exp(z_j - m) /
// (exp(s_h - m) + sum_i exp(z_i - m)), m = max(max_i z_i, s_h); it brings no value.
void merge_splits(uint h, uint n_live, uint first, uint stride) {
  const uint H = pc.n_heads;
  const uint D4m = D / 4u;
  const uint ml_base = row_scratch + pc.n_splits * H * D;
  float mx = NEG;
  for (uint s = 0u; s < n_live; ++s) {
    const uint b = ml_base + (s * H + h) * 2u;
    if (part[b + 1u] > 0.0) mx = max(mx, part[b]);
  }
  const float sl = SINK ? sink_logit[h] * float(LOG2E) : NEG;
  const float m = max(mx, sl);
  const float sink_p = SINK ? exp2(sl - m) : 0.0;
  const uint U = HADV ? 8u : 1u;   // vec4s per invocation step
  for (uint c0 = first * U; c0 < D4m; c0 += stride * U) {
    vec4 acc[8];
    [[unroll]] for (uint u = 0u; u < 8u; ++u) acc[u] = vec4(0.0);
    float l = sink_p;
    for (uint s = 0u; s < n_live; ++s) {
      const uint b = ml_base + (s * H + h) * 2u;
      const float ls = part[b + 1u];
      if (ls > 0.0) {
        const float w = exp2(part[b] - m);
        l += ls * w;
        [[unroll]] for (uint u = 0u; u < U; ++u) {
          const uint pb = row_scratch + (s * H + h) * D + (c0 + u) * 4u;
          acc[u] += w * vec4(part[pb], part[pb + 1u], part[pb + 2u], part[pb + 3u]);
        }
      }
    }
    if (HADV) hadamard32(acc);
    [[unroll]] for (uint u = 0u; u < U; ++u) obuf[row_q + h * D4m + c0 + u] = l > 0.0 ? acc[u] / l : vec4(0.0);
  }
}
