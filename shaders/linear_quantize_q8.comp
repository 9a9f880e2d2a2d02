#version 450
// Activation rows -> Q8 blocks for the integer-dot linear kernel (linear_q8.comp):
// per 32 values, d = max|x| / 127 and q = roundf(x / d) (round half away from
// zero, as llama.cpp's quantize_row_q8_*), stored as 32 int8 plus vec2(d, Σq).
// Σq is exact in f32 (|Σq| <= 4064) and serves the weight formats with an
// offset term (q4_1's m, the K-quants' mins).  One invocation per block.
#include "contract.glsl"
#include "spec/linear_quantize_q8.h"

layout(binding = B_X) readonly buffer X1 { float x1[]; };
layout(binding = B_XQUANT) writeonly buffer XQ { uvec4 xq[]; };
layout(binding = B_XMETA) writeonly buffer XM { vec2 xm[]; };
layout(push_constant) uniform P {
#include "spec/linear_quantize_q8_push.h"
} p;

// roundf: the nearest integer, halves away from zero (v - trunc(v) is exact).
float round_away(float v) {
  const float t = trunc(v);
  return abs(v - t) >= 0.5 ? t + sign(v) : t;
}

void main() {
  const uint blocks = p.K / 32;
  const uint c = gl_GlobalInvocationID.x, m = gl_WorkGroupID.y;
  if (c >= blocks || m >= p.M) return;
  const uint e = p.x_off + m * p.K + 32 * c;
  float v[32];
  float amax = 0.0;
  for (uint i = 0; i < 32; ++i) {
    v[i] = x1[e + i];
    amax = max(amax, abs(v[i]));
  }
  const float d = amax / 127.0;
  const float id = d != 0.0 ? 1.0 / d : 0.0;
  uint words[8];
  int sum = 0;
  for (uint w = 0; w < 8; ++w) {
    uint word = 0u;
    for (uint b = 0; b < 4; ++b) {
      const int q = int(round_away(v[4 * w + b] * id));
      sum += q;
      word |= (uint(q) & 255u) << (8u * b);
    }
    words[w] = word;
  }
  const uint blk = m * blocks + c;
  xq[p.q_off + 2 * blk] = uvec4(words[0], words[1], words[2], words[3]);
  xq[p.q_off + 2 * blk + 1] = uvec4(words[4], words[5], words[6], words[7]);
  xm[p.m_off + blk] = vec2(d, float(sum));
}
