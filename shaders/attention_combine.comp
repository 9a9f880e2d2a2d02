#version 450
// Combine pass of split-K decode: for each head, merge the live splits'
// partials (acc, max, sum) written by attention_decode into the output row
// (attention_merge.glsl; the sink logit joins here, once per head).
// The live split count comes from the step buffer (the decode command buffer is
// recorded once); splits with an empty sum (fully masked) are skipped.
#extension GL_EXT_control_flow_attributes : require
#include "contract.glsl"
#include "spec/attention_combine.h"

layout(binding = B_STEP) readonly buffer Step { uint step[]; };
layout(binding = B_PART) readonly buffer Part { float part[]; };
layout(binding = B_OUT) writeonly buffer O { vec4 obuf[]; };
layout(binding = B_SINK) readonly buffer Sink { float sink_logit[]; };
#define ATTN_NO_TABLES
#include "attention_common.glsl"
#include "attention_merge.glsl"

void main() {
  attn_row_begin(D / 4u);
  const uint pos0 = step[row_step], n_new = max(step[row_step + 1u], 1u);
  const int i = int(pos0 + n_new - 1u);
  merge_splits(gl_WorkGroupID.x, live_splits(i), gl_LocalInvocationID.x, gl_WorkGroupSize.x);
}
