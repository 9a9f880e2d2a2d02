#version 450
// y[i] = a[i] + b[i % b_period]
#include "common.glsl"
#include "contract.glsl"
#include "spec/elementwise.h"
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; uint b_period; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.n) { y[i] = a[i] + b[i % p.b_period]; }
}
