#version 450
// y[i] = silu(g[i]) * u[i] = g / (1 + exp(-g)) * u
#include "common.glsl"
#include "contract.glsl"
#include "spec/elementwise_silu_mul.h"
layout(binding = B_G) readonly buffer G { float g[]; };
layout(binding = B_U) readonly buffer U { float u[]; };
layout(binding = B_Y) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.n) {
    const float a = g[i];
    y[i] = a / (1.0 + exp(-a)) * u[i];   // g -> -inf: a / inf = -0, no NaN
  }
}
