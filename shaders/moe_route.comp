#version 450
// One invocation per token t: the k largest of logits[t][0..E) (the larger first; on equal logits the lower
// index first, torch.topk's order), their softmax probabilities over all E (renormalised over the k when
// p.norm_topk), as ids[t][k], weights[t][k] and dense[t][E] (the weight at each chosen expert, 0 elsewhere).
// The softmax is monotone, so choosing on logits picks what choosing on probabilities picks.
#include "common.glsl"
#include "contract.glsl"
#include "spec/moe_route.h"
layout(binding = B_LOGITS) readonly buffer L { float logits[]; };
layout(binding = B_IDS) buffer I { int ids[]; };
layout(binding = B_WEIGHTS) writeonly buffer W { float weights[]; };
layout(binding = B_DENSE) writeonly buffer D { float dense[]; };
layout(push_constant) uniform P { uint tokens; uint experts; uint k; uint norm_topk; } p;

bool taken(uint base, uint s, uint e) {
  for (uint j = 0; j < s; ++j)
    if (ids[base + j] == int(e)) return true;
  return false;
}

void main() {
  GRID_STRIDE_LOOP(t, p.tokens) {
    const uint row = t * p.experts, base = t * p.k;
    float mx = logits[row];
    for (uint e = 1; e < p.experts; ++e) mx = max(mx, logits[row + e]);
    float total = 0.0;
    for (uint e = 0; e < p.experts; ++e) {
      total += exp(logits[row + e] - mx);
      dense[row + e] = 0.0;
    }
    float chosen = 0.0;
    for (uint s = 0; s < p.k; ++s) {
      uint best = 0xffffffffu;
      for (uint e = 0; e < p.experts; ++e) {
        if (taken(base, s, e)) continue;
        if (best == 0xffffffffu || logits[row + e] > logits[row + best]) best = e;   // ascending: ties keep the lower
      }
      ids[base + s] = int(best);
      chosen += exp(logits[row + best] - mx);
    }
    const float denom = p.norm_topk != 0u ? chosen : total;
    for (uint s = 0; s < p.k; ++s) {
      const uint e = uint(ids[base + s]);
      const float w = exp(logits[row + e] - mx) / denom;
      weights[base + s] = w;
      dense[row + e] = w;
    }
  }
}
