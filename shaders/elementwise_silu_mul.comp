#version 450
// y[i] = silu(g[i]) * u[i] = g / (1 + exp(-g)) * u
#include "common.glsl"
#include "contract.glsl"
#include "spec/elementwise.h"
layout(binding = 0) readonly buffer G { float g[]; };
layout(binding = 1) readonly buffer U { float u[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.n) {
    const float a = g[i];
    y[i] = a / (1.0 + exp(-a)) * u[i];   // g -> -inf: a / inf = -0, no NaN
  }
}
