#version 450
// y[t, :] = table[ids[t], :] for one row chunk of the table.
//
// A table larger than maxStorageBufferRange is bound one chunk of rows at a
// time (one dispatch each); this dispatch writes only the tokens whose id lies
// in [first_row, first_row + chunk_rows), so the dispatches of one gather
// write disjoint rows of y and need no barrier between them.
// An id outside [0, table_rows) cannot be rejected on the host (ids live on
// the device): its row of y is written with zeros, by the dispatch of the
// chunk with first_row == 0.
// Variants: f32 table (default), f16 (-DW_F16), bf16 (-DW_BF16) bit patterns.
#include "common.glsl"
#include "contract.glsl"
#include "spec/embed.h"
#if defined(W_F16) || defined(W_BF16)
layout(binding = B_TABLE) readonly buffer T { uint16_t t[]; };
#else
layout(binding = B_TABLE) readonly buffer T { float t[]; };
#endif
layout(binding = B_IDS) readonly buffer Ids { int ids[]; };
layout(binding = B_Y) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n_tokens; uint cols; uint first_row; uint chunk_rows; uint table_rows; } p;

float load(uint i) {
#if defined(W_F16)
  return unpackHalf2x16(uint(t[i])).x;   // f16 -> f32 is exact
#elif defined(W_BF16)
  return bf16_bits_to_float(uint(t[i]));
#else
  return t[i];
#endif
}

void main() {
  // One workgroup per token on a 2D grid (no outer loop: see rmsnorm.comp on llvmpipe's loop limiter).
  const uint tok = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (tok >= p.n_tokens) return;
  const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  const int id = ids[tok];
  const bool valid = id >= 0 && uint(id) < p.table_rows;
  const uint r = uint(id) - p.first_row;   // wraps (huge) when id < first_row
  const bool mine = valid ? r < p.chunk_rows : p.first_row == 0u;
  if (!mine) return;   // uniform over the workgroup
  const uint out_base = tok * p.cols, in_base = r * p.cols;
  if (valid)
    for (uint c = lid; c < p.cols; c += wg) y[out_base + c] = load(in_base + c);
  else
    for (uint c = lid; c < p.cols; c += wg) y[out_base + c] = 0.0;
}
