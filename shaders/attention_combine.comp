#version 450
// Combine pass of split-K decode: for each head, merge the live splits'
// partials (acc, max, sum) written by attention_decode into the output row.
// The live split count comes from the step buffer (the decode command buffer is
// recorded once); splits with an empty sum (fully masked) are skipped.
#include "contract.glsl"
#include "spec/attention_combine.h"
const uint D4 = D / 4u;

layout(binding = B_STEP) readonly buffer Step { uint step[]; };
layout(binding = B_PART) readonly buffer Part { float part[]; };
layout(binding = B_OUT) writeonly buffer O { vec4 obuf[]; };
#define ATTN_NO_TABLES
#include "attention_common.glsl"

void main() {
  const uint h = gl_WorkGroupID.x;
  const uint H = pc.n_heads;
  const uint pos0 = step[0], n_new = max(step[1], 1u);
  const uint kv_len = pos0 + n_new;
  const uint keys = kv_len - uint(decode_first_key(int(kv_len) - 1));
  const uint n_live = min(pc.n_splits, (keys + pc.split_len - 1u) / pc.split_len);
  const uint ml_base = pc.n_splits * H * D;
  float mx = NEG;
  for (uint s = 0u; s < n_live; ++s) {
    const uint b = ml_base + (s * H + h) * 2u;
    if (part[b + 1u] > 0.0) mx = max(mx, part[b]);
  }
  for (uint c = gl_LocalInvocationID.x; c < D4; c += gl_WorkGroupSize.x) {
    vec4 acc = vec4(0.0);
    float l = 0.0;
    for (uint s = 0u; s < n_live; ++s) {
      const uint b = ml_base + (s * H + h) * 2u;
      const float ls = part[b + 1u];
      if (ls > 0.0) {
        const float w = exp2(part[b] - mx);
        l += ls * w;
        const uint pb = (s * H + h) * D + c * 4u;
        acc += w * vec4(part[pb], part[pb + 1u], part[pb + 2u], part[pb + 3u]);
      }
    }
    obuf[h * D4 + c] = l > 0.0 ? acc / l : vec4(0.0);
  }
}
