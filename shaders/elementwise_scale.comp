#version 450
// y[i] = x[i] * s (in place when y == x: each invocation rewrites only what it read).
#include "common.glsl"
#include "contract.glsl"
#include "spec/elementwise_scale.h"
layout(binding = B_X) readonly buffer X { float x[]; };
layout(binding = B_Y) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; float s; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.n) { y[i] = x[i] * p.s; }
}
