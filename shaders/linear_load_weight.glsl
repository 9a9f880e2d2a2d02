// The weight kinds of the linear kernels, one include: with W_QUANT (the
// quantized variants, shaders/meson.build) W is in GGML blocks or mxfp4, read
// and decoded by linear_q_common.glsl / quant_blocks.glsl; otherwise below.
#if defined(W_QUANT)
#include "linear_q_common.glsl"
#else
// Float weight loads for the linear kernels: binding 1 holds W as f32, f16 (IEEE
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

// W_DECL(S, BND) declares the weight binding BND and its loads load_w_S /
// load_w4_S; linear_matvec_fused.comp declares one per output (FUSED).
#if defined(W_TEX)
// Texel-buffer variants (W_TEX): binding 1 is a uniform texel buffer of 4
// weights per texel -- R32G32B32A32_SFLOAT (f32), R16G16B16A16_SFLOAT (f16,
// converted by the fetch) or R16G16B16A16_UINT (bf16 bits).  On llvmpipe a
// texelFetch is a vectorised gather while a per-lane SSBO load is a scalar
// loop, so this is ~3x faster there (see ops_linear.cpp).
#if defined(W_BF16)
#define W_DECL(S, BND) \
  layout(binding = BND) uniform usamplerBuffer wt_##S; \
  vec4 fetch_w_##S(uint t) { return uintBitsToFloat(texelFetch(wt_##S, int(t)) << 16); } \
  W_TEX_LOADS(S)
#else
#define W_DECL(S, BND) \
  layout(binding = BND) uniform samplerBuffer wt_##S; \
  vec4 fetch_w_##S(uint t) { return texelFetch(wt_##S, int(t)); } \
  W_TEX_LOADS(S)
#endif
#define W_TEX_LOADS(S) \
  float load_w_##S(uint e) { return fetch_w_##S(e >> 2)[e & 3u]; } \
  vec4 load_w4_##S(uint e) { \
    if (ALIGNED != 0) return fetch_w_##S(e >> 2); \
    return vec4(load_w_##S(e), load_w_##S(e + 1), load_w_##S(e + 2), load_w_##S(e + 3)); \
  }

#elif defined(W_F16) || defined(W_BF16)
#if defined(W_F16)
float decode_w(uint bits) { return unpackHalf2x16(bits).x; }
vec2 decode_w2(uint word) { return unpackHalf2x16(word); }
#else
// bf16 -> f32 is exact: the bf16 bits are the high half of the f32 bits.
float decode_w(uint bits) { return uintBitsToFloat(bits << 16); }
vec2 decode_w2(uint word) { return vec2(uintBitsToFloat(word << 16), uintBitsToFloat(word & 0xffff0000u)); }
#endif
// Two views of one binding: halves, and 4 halves per uvec2.
#define W_DECL(S, BND) \
  layout(binding = BND) readonly buffer W16_##S { uint16_t w16_##S[]; }; \
  layout(binding = BND) readonly buffer W2_##S { uvec2 w2_##S[]; }; \
  float load_w_##S(uint e) { return decode_w(uint(w16_##S[e])); } \
  vec4 load_w4_##S(uint e) { \
    if (ALIGNED != 0) { \
      const uvec2 v = w2_##S[e >> 2]; \
      return vec4(decode_w2(v.x), decode_w2(v.y)); \
    } \
    return vec4(load_w_##S(e), load_w_##S(e + 1), load_w_##S(e + 2), load_w_##S(e + 3)); \
  }

#else  // f32 weights: a float and a vec4 view of one binding
#define W_DECL(S, BND) \
  layout(binding = BND) readonly buffer W1_##S { float w1_##S[]; }; \
  layout(binding = BND) readonly buffer W4_##S { vec4 w4_##S[]; }; \
  float load_w_##S(uint e) { return w1_##S[e]; } \
  vec4 load_w4_##S(uint e) { \
    if (ALIGNED != 0) return w4_##S[e >> 2]; \
    return vec4(w1_##S[e], w1_##S[e + 1], w1_##S[e + 2], w1_##S[e + 3]); \
  }
#endif

W_DECL(0, B_W)
float load_w(uint e) { return load_w_0(e); }
vec4 load_w4(uint e) { return load_w4_0(e); }
#if defined(FUSED)
W_DECL(1, B_W1)
W_DECL(2, B_W2)
#endif
// W of output o (FUSED: 0..2): o is a constant at every call after inlining,
// so the choice folds away.
float load_wo(uint o, uint e) {
#if defined(FUSED)
  if (o == 1) return load_w_1(e);
  if (o == 2) return load_w_2(e);
#endif
  return load_w_0(e);
}
vec4 load_wo4(uint o, uint e) {
#if defined(FUSED)
  if (o == 1) return load_w4_1(e);
  if (o == 2) return load_w4_2(e);
#endif
  return load_w4_0(e);
}

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

// linear_matvec_io.glsl declares the fused kernel's Y and push constants; OWN_IO kernels (moe_matvec) their own.
#if !defined(FUSED) && !defined(OWN_IO)
// Y (f32) at binding 2.
layout(binding = B_Y) writeonly buffer Y1 { float y1[]; };

// Push constants shared by gemm and matvec (32 bytes).  Offsets are element
// offsets inside the bound ranges; Y element (m, n) is y1[y_off + m * ldy + n].
layout(push_constant) uniform LinearPush {
#include "spec/linear_push.h"
} p;
#endif
#endif  // W_QUANT
