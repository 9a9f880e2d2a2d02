#version 450
// out[i] = f32(in[i]) for bf16 bit patterns: exact (the bf16 bits are the high
// half of the f32 bits), NaN payloads and signed zeros included.
#include "common.glsl"
#include "contract.glsl"
#include "spec/elementwise.h"
layout(binding = 0) readonly buffer In { uint16_t a[]; };
layout(binding = 1) writeonly buffer Out { uint b[]; };
layout(push_constant) uniform P { uint n; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.n) { b[i] = uint(a[i]) << 16; }   // bit copy: no float op can quiet a NaN
}
