#version 450
// In place, per row: x[r, :] = softmax(x[r, :] * scale), max-subtracted.
//
// One workgroup per row (2D grid: row = y * num_x + x), three passes over the
// row: max, then the sum of e = exp(v - max) (e is stored back into x so exp
// runs once per element), then x *= 1/sum.  Reductions and loop shapes as in
// rmsnorm.comp (subgroup ops; a shared array only when the workgroup may hold
// several subgroups; 4 elements per loop trip for llvmpipe's loop limiter).
// Entries of -inf (masked) become 0; a row that is entirely -inf becomes all 0.
#include "common.glsl"
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "contract.glsl"
#include "spec/norm_softmax.h"
layout(binding = B_X) buffer X { float x[]; };
layout(push_constant) uniform P { uint rows; uint cols; float scale; } p;

shared float part_max[MAX_SUBGROUPS];
shared float part_sum[MAX_SUBGROUPS];

const float kLowest = -3.402823466e38;   // finite, so exp(-inf - kLowest) == 0, never NaN

// Also clears part_sum, which workgroup_sum fills after this function's barriers.
float workgroup_max(float v) {
  v = subgroupMax(v);
  if (MAX_SUBGROUPS > 1) {
    for (uint j = gl_LocalInvocationID.x; j < MAX_SUBGROUPS; j += gl_WorkGroupSize.x) {
      part_max[j] = kLowest;
      part_sum[j] = 0.0;
    }
    barrier();
    if (subgroupElect() && gl_SubgroupID < MAX_SUBGROUPS) part_max[gl_SubgroupID] = v;
    barrier();
    v = part_max[0];
    for (uint j = 1; j < MAX_SUBGROUPS; ++j) v = max(v, part_max[j]);
  }
  return v;
}

float workgroup_sum(float v) {
  v = subgroupAdd(v);
  if (MAX_SUBGROUPS > 1) {
    if (subgroupElect() && gl_SubgroupID < MAX_SUBGROUPS) part_sum[gl_SubgroupID] = v;
    barrier();
    v = 0.0;
    for (uint j = 0; j < MAX_SUBGROUPS; ++j) v += part_sum[j];
  }
  return v;
}

void main() {
  const uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (row >= p.rows) return;   // whole workgroup
  const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, n = p.cols, base = row * n;
  const float sc = p.scale;

  float m0 = kLowest, m1 = kLowest, m2 = kLowest, m3 = kLowest;
  uint i = lid;
  for (; i + 3u * wg < n; i += 4u * wg) {
    m0 = max(m0, x[base + i] * sc);
    m1 = max(m1, x[base + i + wg] * sc);
    m2 = max(m2, x[base + i + 2u * wg] * sc);
    m3 = max(m3, x[base + i + 3u * wg] * sc);
  }
  for (; i < n; i += wg) m0 = max(m0, x[base + i] * sc);
  const float m = workgroup_max(max(max(m0, m1), max(m2, m3)));

  float s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  i = lid;
  for (; i + 3u * wg < n; i += 4u * wg) {
    // Stored back for the last pass, which this same invocation runs over the same elements.
    const float a = exp(x[base + i] * sc - m), b = exp(x[base + i + wg] * sc - m);
    const float c = exp(x[base + i + 2u * wg] * sc - m), d = exp(x[base + i + 3u * wg] * sc - m);
    x[base + i] = a;
    x[base + i + wg] = b;
    x[base + i + 2u * wg] = c;
    x[base + i + 3u * wg] = d;
    s0 += a;
    s1 += b;
    s2 += c;
    s3 += d;
  }
  for (; i < n; i += wg) {
    const float a = exp(x[base + i] * sc - m);
    x[base + i] = a;
    s0 += a;
  }
  const float s = workgroup_sum((s0 + s1) + (s2 + s3));
  const float inv = s > 0.0 ? 1.0 / s : 0.0;

  i = lid;
  for (; i + 3u * wg < n; i += 4u * wg) {
    x[base + i] *= inv;
    x[base + i + wg] *= inv;
    x[base + i + 2u * wg] *= inv;
    x[base + i + 3u * wg] *= inv;
  }
  for (; i < n; i += wg) x[base + i] *= inv;
}
