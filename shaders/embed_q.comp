#version 450
// y[t, :] = table[ids[t], :] for one row chunk of a quantized table (QTYPE),
// dequantized exactly as the specification does (shaders/quant_blocks.glsl):
// each invocation decodes whole 32-weight sub-blocks.  Chunks, out-of-range
// ids (a row of zeros, written by the chunk with first_row == 0) and the 2D
// grid as embed.comp.  Bindings: 0 quant plane, 1 ids, 2 y, 3 meta plane.
#include "common.glsl"
#include "contract.glsl"
#include "spec/embed_q.h"
#include "quant_blocks.glsl"
layout(binding = B_IDS) readonly buffer Ids { int ids[]; };
layout(binding = B_Y) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint n_tokens; uint cols; uint first_row; uint chunk_rows; uint table_rows; uint q_off; uint m_off; uint y_off;
} p;

void main() {
  const uint tok = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (tok >= p.n_tokens) return;
  const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  const int id = ids[tok];
  const bool valid = id >= 0 && uint(id) < p.table_rows;
  const uint r = uint(id) - p.first_row;   // wraps (huge) when id < first_row
  const bool mine = valid ? r < p.chunk_rows : p.first_row == 0u;
  if (!mine) return;   // uniform over the workgroup
  const uint subs = p.cols / 32, out_base = p.y_off + tok * p.cols;
  for (uint c = lid; c < subs; c += wg) {
    if (!valid) {
      for (uint e = 0; e < 32; ++e) y[out_base + 32 * c + e] = 0.0;
      continue;
    }
    const uint blk = r * (subs / QSUBS) + c / QSUBS;
    vec4 q[8];
    vec4 ab;
    decode_sub(p.q_off + blk * QU, p.m_off + blk * MU, c % QSUBS, q, ab);
    for (uint w = 0; w < 8; ++w) {
      const vec4 v = w < 4 ? dequant(q[w], ab.x, ab.y) : dequant(q[w], ab.z, ab.w);
      for (uint e = 0; e < 4; ++e) y[out_base + 32 * c + 4 * w + e] = v[e];
    }
  }
}
