#version 450
// y[t][j] += Σ_{e in [first, first + count)} dense[t][e] * x_e[t][j], in expert order: the experts' outputs
// added to the MoE sum with their routing weights.  Expert e's rows start (e - first) * x_stride elements into
// x.  An expert the router did not choose for token t (weight 0) is skipped, not multiplied: its rows may hold
// anything (an expert no token chose is not run at all in decode).
#include "common.glsl"
#include "contract.glsl"
#include "spec/moe_accumulate.h"
layout(binding = B_DENSE) readonly buffer D { float dense[]; };
layout(binding = B_X) readonly buffer X { float x[]; };
layout(binding = B_Y) buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; uint cols; uint experts; uint first; uint count; uint x_stride; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.n) {
    const uint t = i / p.cols;
    float acc = y[i];
    for (uint c = 0; c < p.count; ++c) {
      const float w = dense[t * p.experts + p.first + c];
      if (w != 0.0) acc += w * x[c * p.x_stride + i];
    }
    y[i] = acc;
  }
}
