#version 450
// y[i] = gelu_tanh(g[i]) * u[i], gelu_tanh(a) = 0.5 a (1 + tanh(z)), z = sqrt(2/pi) (a + 0.044715 a^3).
// Written as a / (1 + exp(-2z)) (the same function: 0.5 (1 + tanh z) = 1 / (1 + exp(-2z))): no tanh of a
// large argument, and a -> -inf gives a / inf = -0, no NaN.
#include "common.glsl"
#include "contract.glsl"
#include "spec/elementwise_gelu_tanh_mul.h"
layout(binding = B_G) readonly buffer G { float g[]; };
layout(binding = B_U) readonly buffer U { float u[]; };
layout(binding = B_Y) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.n) {
    const float a = g[i];
    const float z2 = 1.5957691216057308 * (a + 0.044715 * a * a * a);   // 2 sqrt(2/pi) (a + 0.044715 a^3)
    y[i] = a / (1.0 + exp(-z2)) * u[i];
  }
}
