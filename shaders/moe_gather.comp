#version 450
// For each row t of [first, first + rows) and each of its k experts e = ids[t][s]:
// y[e][slots[t - first][e]][j] = x[t][j], the row copied into e's block at its slot for e's matrix products.
// One invocation per (row, choice, column): the work is rows x k rows, not experts x rows.  Slots no row
// filled are left as they are (their products are never read).
#include "common.glsl"
#include "contract.glsl"
#include "spec/moe_gather.h"
layout(binding = B_IDS) readonly buffer I { int ids[]; };
layout(binding = B_SLOTS) readonly buffer S { uint slots[]; };
layout(binding = B_X) readonly buffer X { float x[]; };
layout(binding = B_Y) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint first; uint rows; uint k; uint cols; uint experts; uint cap; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.rows * p.k * p.cols) {
    const uint j = i % p.cols, s = (i / p.cols) % p.k, t = i / (p.cols * p.k);
    const uint e = uint(ids[(p.first + t) * p.k + s]);
    y[(e * p.cap + slots[t * p.experts + e]) * p.cols + j] = x[(p.first + t) * p.cols + j];
  }
}
