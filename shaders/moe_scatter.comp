#version 450
// y[first + t][j] += Σ_e dense[first + t][e] * x[e][slots[t][e]][j] over the experts in index order, skipping
// the zero weights (the experts row t did not choose: their slots are stale): the gathered experts' outputs
// added back to their rows, in expert order (moe_combine's).
#include "common.glsl"
#include "contract.glsl"
#include "spec/moe_scatter.h"
layout(binding = B_DENSE) readonly buffer D { float dense[]; };
layout(binding = B_SLOTS) readonly buffer S { uint slots[]; };
layout(binding = B_X) readonly buffer X { float x[]; };
layout(binding = B_Y) buffer Y { float y[]; };
layout(push_constant) uniform P { uint first; uint rows; uint cols; uint experts; uint cap; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.rows * p.cols) {
    const uint t = i / p.cols, j = i % p.cols;
    const uint yi = (p.first + t) * p.cols + j;
    float acc = y[yi];
    for (uint e = 0; e < p.experts; ++e) {
      const float w = dense[(p.first + t) * p.experts + e];
      if (w != 0.0) acc += w * x[(e * p.cap + slots[t * p.experts + e]) * p.cols + j];
    }
    y[yi] = acc;
  }
}
