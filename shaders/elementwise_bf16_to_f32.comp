#version 450
// out[i] = f32(in[i]) for bf16 bit patterns: exact (the bf16 bits are the high
// half of the f32 bits), NaN payloads and signed zeros included.
#include "common.glsl"
#include "contract.glsl"
#include "spec/elementwise_bf16_to_f32.h"
layout(binding = B_IN) readonly buffer In { uint16_t a[]; };
layout(binding = B_OUT) writeonly buffer Out { uint b[]; };
layout(push_constant) uniform P { uint n; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.n) { b[i] = uint(a[i]) << 16; }   // bit copy: no float op can quiet a NaN
}
