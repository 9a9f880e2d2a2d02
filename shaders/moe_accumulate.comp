#version 450
// y[t][j] += dense[t][e] * x[t][j]: expert e's output added to the MoE sum with its routing weight (0 where the
// router did not choose e for token t).
#include "common.glsl"
#include "contract.glsl"
#include "spec/moe_accumulate.h"
layout(binding = B_DENSE) readonly buffer D { float dense[]; };
layout(binding = B_X) readonly buffer X { float x[]; };
layout(binding = B_Y) buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; uint cols; uint experts; uint e; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.n) {
    const float w = dense[(i / p.cols) * p.experts + p.e];
    if (w != 0.0) y[i] += w * x[i];
  }
}
