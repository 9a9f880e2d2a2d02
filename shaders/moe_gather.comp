#version 450
// y[e][i][j] = x[first + rows_of[e][i]][j]: expert e's rows side by side for its matrix products.  Slots past
// e's count name no row (an index out of range) and are left as they are: their products are never read
// (moe_scatter reads only the slots of the rows that chose e).
#include "common.glsl"
#include "contract.glsl"
#include "spec/moe_gather.h"
layout(binding = B_ROWS) readonly buffer R { uint rows_of[]; };
layout(binding = B_X) readonly buffer X { float x[]; };
layout(binding = B_Y) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint first; uint rows; uint cols; uint experts; uint cap; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.experts * p.rows * p.cols) {
    const uint j = i % p.cols, slot = (i / p.cols) % p.rows, e = i / (p.cols * p.rows);
    const uint r = rows_of[e * p.cap + slot];
    if (r < p.rows) y[(e * p.cap + slot) * p.cols + j] = x[(p.first + r) * p.cols + j];
  }
}
