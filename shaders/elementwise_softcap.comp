#version 450
// y[i] = cap·tanh(x[i]/cap): Gemma 2's final-logit soft-capping (in place when
// y == x: each invocation rewrites only what it read).
#include "common.glsl"
#include "contract.glsl"
#include "spec/elementwise_softcap.h"
#include "softcap.glsl"
layout(binding = B_X) readonly buffer X { float x[]; };
layout(binding = B_Y) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; float cap; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.n) { y[i] = softcap(x[i], p.cap); }
}
