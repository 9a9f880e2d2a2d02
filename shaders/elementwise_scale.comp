#version 450
// y[i] = x[i] * s (in place when y == x: each invocation rewrites only what it read).
#include "common.glsl"
#include "contract.glsl"
#include "spec/elementwise.h"
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; float s; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.n) { y[i] = x[i] * p.s; }
}
