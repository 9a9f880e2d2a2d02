#version 450
// One invocation per expert e: args[e][c] = grids[c] (the group counts its C kernels were recorded with) when
// some token's routing weight for e is non-zero, else 0 groups, so an expert no token chose costs nothing.
#include "common.glsl"
#include "contract.glsl"
#include "spec/moe_dispatch.h"
layout(binding = B_DENSE) readonly buffer D { float dense[]; };
layout(binding = B_GRIDS) readonly buffer G { uint grids[]; };
layout(binding = B_ARGS) writeonly buffer A { uint args[]; };
layout(push_constant) uniform P { uint tokens; uint experts; uint calls; } p;
void main() {
  GRID_STRIDE_LOOP(e, p.experts) {
    bool chosen = false;
    for (uint t = 0; t < p.tokens; ++t) chosen = chosen || dense[t * p.experts + e] != 0.0;
    for (uint i = 0; i < p.calls * 3; ++i) args[e * p.calls * 3 + i] = chosen ? grids[i] : 0u;
  }
}
