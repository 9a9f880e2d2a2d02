#version 450
// y[r, :] = x[r, :] * inversesqrt(mean(x[r, :]²) + eps) * w[:]   (y may alias x)
// ADD_TO_Y (spec constant 2): y[r, :] += the same (Gemma's post-norm and its residual add; y != x).
//
// One workgroup per row; rows are laid over a 2D grid (row = y * num_x + x)
// so any row count fits maxComputeWorkGroupCount.  Each invocation sums its
// strided elements (4 per loop trip), subgroupAdd combines a subgroup, and only
// when the workgroup may hold several subgroups are the per-subgroup sums
// combined through a small shared array.
//
// MAX_SUBGROUPS (spec constant 1) is the host's bound ceil(workgroup / min
// subgroup size).  When it is 1 (llvmpipe: workgroup = subgroup) the shared
// path and its barriers are removed at specialization time.  gl_NumSubgroups
// is not used: llvmpipe (Mesa 22.3) reports floor(workgroup / subgroup) when
// the workgroup is not a multiple of the subgroup; unused slots hold 0 instead.
//
// Loops are written for llvmpipe's loop limiter: an invocation's loop trips
// inside one outermost loop are capped at 65535 (excess trips are silently
// dropped), so there is no loop around the passes, each pass does 4 elements
// per trip, and the host widens the workgroup for rows too long for that.
#include "common.glsl"
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "contract.glsl"
#include "spec/norm_rms.h"
layout(binding = B_X) readonly buffer X { float x[]; };
layout(binding = B_W) readonly buffer W { float w[]; };
layout(binding = B_Y) buffer Y { float y[]; };
layout(push_constant) uniform P { uint rows; uint cols; float eps; } p;

shared float partial[MAX_SUBGROUPS];

float workgroup_sum(float v) {
  v = subgroupAdd(v);
  if (MAX_SUBGROUPS > 1) {
    const uint lid = gl_LocalInvocationID.x;
    for (uint j = lid; j < MAX_SUBGROUPS; j += gl_WorkGroupSize.x) partial[j] = 0.0;
    barrier();
    if (subgroupElect() && gl_SubgroupID < MAX_SUBGROUPS) partial[gl_SubgroupID] = v;
    barrier();
    v = 0.0;
    for (uint j = 0; j < MAX_SUBGROUPS; ++j) v += partial[j];   // same order everywhere: same result
  }
  return v;
}

void main() {
  const uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (row >= p.rows) return;   // whole workgroup: no barrier is skipped by part of it
  const uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x, n = p.cols, base = row * n;
  float s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  uint i = lid;
  for (; i + 3u * wg < n; i += 4u * wg) {
    const float a = x[base + i], b = x[base + i + wg], c = x[base + i + 2u * wg], d = x[base + i + 3u * wg];
    s0 += a * a;
    s1 += b * b;
    s2 += c * c;
    s3 += d * d;
  }
  for (; i < n; i += wg) {
    const float a = x[base + i];
    s0 += a * a;
  }
  const float s = workgroup_sum((s0 + s1) + (s2 + s3));
  const float r = inversesqrt(s / float(n) + p.eps);
  // Each invocation rewrites only the elements it read, so y == x is safe.  The sum y + (x·r·w) is the
  // same float operation the separate add kernel does after a plain norm: the same bits.
  i = lid;
  for (; i + 3u * wg < n; i += 4u * wg) {
    const float a = x[base + i], b = x[base + i + wg], c = x[base + i + 2u * wg], d = x[base + i + 3u * wg];
    // precise: y += v must round v first, as norm_rms then elementwise_add does; a GPU compiler
    // would otherwise fuse it into one fma (seen on NVIDIA) and the two paths would differ.
    precise float ya = a * r * w[i], yb = b * r * w[i + wg], yc = c * r * w[i + 2u * wg], yd = d * r * w[i + 3u * wg];
    if (ADD_TO_Y != 0) {
      y[base + i] += ya;
      y[base + i + wg] += yb;
      y[base + i + 2u * wg] += yc;
      y[base + i + 3u * wg] += yd;
    } else {
      y[base + i] = ya;
      y[base + i + wg] = yb;
      y[base + i + 2u * wg] = yc;
      y[base + i + 3u * wg] = yd;
    }
  }
  for (; i < n; i += wg) {
    precise float v = x[base + i] * r * w[i];
    if (ADD_TO_Y != 0) y[base + i] += v;
    else y[base + i] = v;
  }
}
