#version 450
// y[t][j] += Σ_s weights[t][s] · x[t k + s][j] over the k experts row t chose, in expert index order (the
// order of moe_scatter, so decode and prefill sum alike): the chosen experts' outputs
// (moe_matvec's slots) added to the residual stream with their routing weights.
#include "common.glsl"
#include "contract.glsl"
#include "spec/moe_combine.h"
layout(binding = B_IDS) readonly buffer I { int ids[]; };
layout(binding = B_WEIGHTS) readonly buffer W { float weights[]; };
layout(binding = B_X) readonly buffer X { float x[]; };
layout(binding = B_Y) buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; uint cols; uint k; uint ids_off; uint w_off; uint ldx; uint x_off; uint y_off; } p;
void main() {
  GRID_STRIDE_LOOP(i, p.n) {
    const uint t = i / p.cols, j = i % p.cols, base = t * p.k;
    float acc = y[p.y_off + i];
    int last = -1;
    for (uint c = 0; c < p.k; ++c) {
      // The next expert of the row above `last` (its ids are distinct).
      uint s = p.k;
      for (uint q = 0; q < p.k; ++q) {
        const int e = ids[p.ids_off + base + q];
        if (e > last && (s == p.k || e < ids[p.ids_off + base + s])) s = q;
      }
      last = ids[p.ids_off + base + s];
      acc += weights[p.w_off + base + s] * x[p.x_off + (base + s) * p.ldx + j];
    }
    y[p.y_off + i] = acc;
  }
}
