// Weight loads for the linear kernels: binding 1 holds W as f32, f16 (IEEE
// half bits) or bf16 (bits) and every load returns f32.  16-bit weights are
// read through uint16_t (GL_EXT_shader_16bit_storage: storageBuffer16BitAccess,
// no shaderInt16/shaderFloat16 needed) and, on the aligned path, as packed
// 32-bit words: 4 halves per uvec2 load.
//
// load_w(e)         one element at element index e
// load_w4(e)        elements e..e+3; ALIGNED != 0 promises e % 4 == 0
//
// Needs `ALIGNED` (a specialization constant) declared before inclusion.
// With W_TEX, binding 1 is a texel buffer instead (below).
#extension GL_EXT_shader_16bit_storage : require

#if defined(W_TEX)
// Texel-buffer variants (W_TEX): binding 1 is a uniform texel buffer of 4
// weights per texel -- R32G32B32A32_SFLOAT (f32), R16G16B16A16_SFLOAT (f16,
// converted by the fetch) or R16G16B16A16_UINT (bf16 bits).  On llvmpipe a
// texelFetch is a vectorised gather while a per-lane SSBO load is a scalar
// loop, so this is ~3x faster there (see ops_linear.cpp).
#if defined(W_BF16)
layout(binding = B_W) uniform usamplerBuffer wt;
vec4 fetch_w(uint t) { return uintBitsToFloat(texelFetch(wt, int(t)) << 16); }
#else
layout(binding = B_W) uniform samplerBuffer wt;
vec4 fetch_w(uint t) { return texelFetch(wt, int(t)); }
#endif
float load_w(uint e) { return fetch_w(e >> 2)[e & 3u]; }
vec4 load_w4(uint e) {
  if (ALIGNED != 0) return fetch_w(e >> 2);
  return vec4(load_w(e), load_w(e + 1), load_w(e + 2), load_w(e + 3));
}

#elif defined(W_F16) || defined(W_BF16)
layout(binding = B_W) readonly buffer W16 { uint16_t w16[]; };
layout(binding = B_W) readonly buffer W2 { uvec2 w2[]; };   // same binding, 4 halves per element

#if defined(W_F16)
float decode_w(uint bits) { return unpackHalf2x16(bits).x; }
vec2 decode_w2(uint word) { return unpackHalf2x16(word); }
#else
// bf16 -> f32 is exact: the bf16 bits are the high half of the f32 bits.
float decode_w(uint bits) { return uintBitsToFloat(bits << 16); }
vec2 decode_w2(uint word) { return vec2(uintBitsToFloat(word << 16), uintBitsToFloat(word & 0xffff0000u)); }
#endif

float load_w(uint e) { return decode_w(uint(w16[e])); }
vec4 load_w4(uint e) {
  if (ALIGNED != 0) {
    const uvec2 v = w2[e >> 2];
    return vec4(decode_w2(v.x), decode_w2(v.y));
  }
  return vec4(load_w(e), load_w(e + 1), load_w(e + 2), load_w(e + 3));
}

#else  // f32 weights
layout(binding = B_W) readonly buffer W1 { float w1[]; };
layout(binding = B_W) readonly buffer W4 { vec4 w4[]; };   // same binding, vec4 view
float load_w(uint e) { return w1[e]; }
vec4 load_w4(uint e) {
  if (ALIGNED != 0) return w4[e >> 2];
  return vec4(w1[e], w1[e + 1], w1[e + 2], w1[e + 3]);
}
#endif

// f32 activations X at binding 0, with the same two views; with X_TEX a
// uniform texel buffer of 4 floats per texel (CPU devices, aligned shapes
// only: the host picks it only when ALIGNED holds).
#if defined(X_TEX)
layout(binding = B_X) uniform samplerBuffer xt;
float load_x(uint e) { return texelFetch(xt, int(e >> 2))[e & 3u]; }
vec4 load_x4(uint e) {
  if (ALIGNED != 0) return texelFetch(xt, int(e >> 2));
  return vec4(load_x(e), load_x(e + 1), load_x(e + 2), load_x(e + 3));
}
#else
layout(binding = B_X) readonly buffer X1 { float x1[]; };
layout(binding = B_X) readonly buffer X4 { vec4 x4[]; };
float load_x(uint e) { return x1[e]; }
vec4 load_x4(uint e) {
  if (ALIGNED != 0) return x4[e >> 2];
  return vec4(x1[e], x1[e + 1], x1[e + 2], x1[e + 3]);
}
#endif

// Y (f32) at binding 2.
layout(binding = B_Y) writeonly buffer Y1 { float y1[]; };

// Push constants shared by gemm and matvec (32 bytes).  Offsets are element
// offsets inside the bound ranges; Y element (m, n) is y1[y_off + m * ldy + n].
layout(push_constant) uniform LinearPush {
#include "spec/linear_push.h"
} p;
