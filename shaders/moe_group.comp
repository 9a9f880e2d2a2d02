#version 450
// One invocation per expert e, over rows [first, first + rows) of ids [T][k]: each row that chose e gets the
// next slot of e's block, in row order (slots[row - first][e]), and e's indirect group counts: args[e][c] = grids[c] (recorded for cap rows) with the row groups
// (y) cut to ceil(count * y / cap), 0 groups when no row chose e.
#include "common.glsl"
#include "contract.glsl"
#include "spec/moe_group.h"
layout(binding = B_IDS) readonly buffer I { int ids[]; };
layout(binding = B_GRIDS) readonly buffer G { uint grids[]; };
layout(binding = B_SLOTS) writeonly buffer S { uint slots[]; };
layout(binding = B_ARGS) writeonly buffer A { uint args[]; };
layout(push_constant) uniform P { uint first; uint rows; uint k; uint experts; uint cap; uint calls; } p;
void main() {
  GRID_STRIDE_LOOP(e, p.experts) {
    uint count = 0;
    for (uint t = 0; t < p.rows; ++t)
      for (uint s = 0; s < p.k; ++s)
        if (ids[(p.first + t) * p.k + s] == int(e)) {
          slots[t * p.experts + e] = count;
          ++count;
        }
    for (uint c = 0; c < p.calls; ++c) {
      const uint gy = grids[c * 3 + 1];
      const bool run = count > 0;
      args[(e * p.calls + c) * 3 + 0] = run ? grids[c * 3 + 0] : 0u;
      args[(e * p.calls + c) * 3 + 1] = run ? (count * gy + p.cap - 1) / p.cap : 0u;
      args[(e * p.calls + c) * 3 + 2] = run ? grids[c * 3 + 2] : 0u;
    }
  }
}
