#version 450
// y[i] = a[i] + b[i % b_period]
#include "common.glsl"
#include "contract.glsl"
#include "spec/elementwise_add.h"
layout(binding = B_A) readonly buffer A { float a[]; };
layout(binding = B_B) readonly buffer B { float b[]; };
layout(binding = B_Y) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; uint b_period; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.n) { y[i] = a[i] + b[i % p.b_period]; }
}
