// The KV cache's storage types (base/kv_type.hpp; KTYPE / VTYPE of the
// attention kernels): how a row of D values of one kv head is read and written.
//   KV_F32: D floats.  KV_F16: D halves, two per 32-bit word.
//   KV_Q8_0 / KV_Q4_0: blocks of 32 values, each with an f16 scale d: the
//     values' words first (q8_0: four int8 per word, value = q·d; q4_0: eight
//     4-bit q per word, value = (q − 8)·d), then the row's scales, two per word.
// Quantization follows ggml's rule for these block types (q8_0: d = max|x|/127,
// q = round(x/d); q4_0: d = m/−8 for the value m of largest magnitude,
// q = min(15, floor(x/d + 8.5))), so tests can apply it on the CPU.
//
// The including shader defines D and D4 (= D/4), declares `kcal` (the keys'
// calibration, attention_key_calib.glsl: its exact keys), and declares each cache
// binding twice: as vec4s and, at the same binding, as uints; then
// KV_LOADER(fn, vec4s, uints, TYPE) makes `vec4 fn(uint i)`, the i-th vec4 of
// the cache (i = row·D4 + c, as the float layout numbers it), and
// KV_WRITER(fn, vec4s, uints, TYPE) makes `void fn(uint row, const vec4 x[D4])`.
// TYPE is a specialization constant, so a pipeline keeps only its own branch.
// Loops over a row are [[unroll]]ed: the row arrays then stay registers (attention_decode_fused.glsl).

#include "attention_hadamard.glsl"
#include "attention_key_calib.glsl"

const uint KV_BLOCKS = D / 32u;
const uint KV_SCALE_WORDS = (KV_BLOCKS + 1u) / 2u;

// Words of a quantized row's values, and of the whole row.
uint kv_value_words(uint t) { return t == KV_Q8_0 ? D4 : D / 8u; }
uint kv_row_words(uint t) { return kv_value_words(t) + KV_SCALE_WORDS; }

float kv_scale(uint word, uint block) {
  const vec2 s = unpackHalf2x16(word);
  return (block & 1u) == 0u ? s.x : s.y;
}
vec4 kv_q8(uint w, float d) {
  return d * vec4(float(int(w << 24u) >> 24), float(int(w << 16u) >> 24), float(int(w << 8u) >> 24),
                  float(int(w) >> 24));
}
vec4 kv_q4(uint w, uint shift, float d) {
  const uvec4 n = (uvec4(w) >> (uvec4(0u, 4u, 8u, 12u) + shift)) & 15u;
  return d * (vec4(n) - 8.0);
}

// Block b of row x: its scale d and the multiplier id = 1/d (0 for an all-zero block).
void kv_block_scale(uint t, const vec4 x[D4], uint b, out float d, out float id) {
  if (t == KV_Q8_0) {
    vec4 m = vec4(0.0);
    [[unroll]] for (uint k = 0u; k < 8u; ++k) m = max(m, abs(x[b * 8u + k]));
    d = max(max(m.x, m.y), max(m.z, m.w)) / 127.0;
  } else {
    float amax = 0.0, mx = 0.0;
    [[unroll]] for (uint k = 0u; k < 8u; ++k)
      [[unroll]] for (uint j = 0u; j < 4u; ++j) {
        const float v = x[b * 8u + k][j];
        if (abs(v) > amax) {
          amax = abs(v);
          mx = v;
        }
      }
    d = mx / -8.0;
  }
  id = d != 0.0 ? 1.0 / d : 0.0;
}
uint kv_pack_q8(vec4 x, float id) {
  const vec4 v = x * id;
  const ivec4 q = clamp(ivec4(sign(v) * floor(abs(v) + 0.5)), -127, 127);
  return uint(q.x & 255) | (uint(q.y & 255) << 8u) | (uint(q.z & 255) << 16u) | (uint(q.w & 255) << 24u);
}
uint kv_pack_q4(vec4 x, float id) {
  const uvec4 n = min(uvec4(x * id + 8.5), uvec4(15u));
  return n.x | (n.y << 4u) | (n.z << 8u) | (n.w << 12u);
}

#define KV_LOADER(FN, VEC, W, TYPE)                                                            \
  vec4 FN(uint i) {                                                                            \
    if (TYPE == KV_F16) return vec4(unpackHalf2x16(W[2u * i]), unpackHalf2x16(W[2u * i + 1u])); \
    if (TYPE == KV_Q8_0 || TYPE == KV_Q4_0) {                                                  \
      const uint r = i / D4, c = i - r * D4;                                                   \
      const uint vw = kv_value_words(TYPE), rb = r * kv_row_words(TYPE);                      \
      const float d = kv_scale(W[rb + vw + (c >> 4u)], c >> 3u);                               \
      if (TYPE == KV_Q8_0) return kv_q8(W[rb + c], d);                                         \
      return kv_q4(W[rb + (c >> 1u)], (c & 1u) * 16u, d);                                      \
    }                                                                                          \
    return VEC[i];                                                                             \
  }

#define KV_WRITER(FN, VEC, W, TYPE)                                                            \
  void FN(uint r, const vec4 x[D4]) {                                                          \
    if (TYPE == KV_F32) {                                                                      \
      [[unroll]] for (uint c = 0u; c < D4; ++c) VEC[r * D4 + c] = x[c];                        \
    } else if (TYPE == KV_F16) {                                                               \
      [[unroll]] for (uint c = 0u; c < D4; ++c) {                                              \
        W[2u * (r * D4 + c)] = packHalf2x16(x[c].xy);                                          \
        W[2u * (r * D4 + c) + 1u] = packHalf2x16(x[c].zw);                                     \
      }                                                                                        \
    } else {                                                                                   \
      const uint vw = kv_value_words(TYPE), rb = r * kv_row_words(TYPE);                      \
      float d_even = 0.0;                                                                      \
      [[unroll]] for (uint b = 0u; b < KV_BLOCKS; ++b) {                                       \
        float d, id;                                                                           \
        kv_block_scale(TYPE, x, b, d, id);                                                     \
        if (TYPE == KV_Q8_0) {                                                                 \
          [[unroll]] for (uint k = 0u; k < 8u; ++k) W[rb + b * 8u + k] = kv_pack_q8(x[b * 8u + k], id); \
        } else {                                                                               \
          [[unroll]] for (uint k = 0u; k < 4u; ++k)                                            \
            W[rb + b * 4u + k] = kv_pack_q4(x[b * 8u + 2u * k], id) |                          \
                                 (kv_pack_q4(x[b * 8u + 2u * k + 1u], id) << 16u);             \
        }                                                                                      \
        if ((b & 1u) == 0u) d_even = d;                                                        \
        if ((b & 1u) == 1u || b + 1u == KV_BLOCKS)                                             \
          W[rb + vw + b / 2u] = packHalf2x16((b & 1u) == 1u ? vec2(d_even, d) : vec2(d, 0.0)); \
      }                                                                                        \
    }                                                                                          \
  }

// x as a row of type t reads back after it is written (x itself for f32): what
// the fused decode scores the new token's key and value with, so that its step
// sees the values every later step reads from the cache.
void kv_round(uint t, inout vec4 x[D4]) {
  if (t == KV_F32) return;
  if (t == KV_F16) {
    [[unroll]] for (uint c = 0u; c < D4; ++c) x[c] = vec4(unpackHalf2x16(packHalf2x16(x[c].xy)), unpackHalf2x16(packHalf2x16(x[c].zw)));
    return;
  }
  [[unroll]] for (uint b = 0u; b < KV_BLOCKS; ++b) {
    float d, id;
    kv_block_scale(t, x, b, d, id);
    const float dh = unpackHalf2x16(packHalf2x16(vec2(d, 0.0))).x;
    [[unroll]] for (uint k = 0u; k < 8u; ++k) {
      const uint c = b * 8u + k;
      if (t == KV_Q8_0) x[c] = kv_q8(kv_pack_q8(x[c], id), dh);
      else x[c] = kv_q4(kv_pack_q4(x[c], id), 0u, dh);
    }
  }
}

// The loaders behind KC / KR / VC of attention_kv_read.glsl, and the row
// loaders load_kc_row / load_kr_row / load_vc_row (a whole row of D values at
// once: a quantized row's scale words are fetched once, not once per vec4).
//
// KV_ROW_LOADER(fn, elem, WORD, TYPE): row r through elem (the vec4 loader) for
// f32 / f16, and through WORD(j), the cache's j-th word, for the block types.
#define KV_ROW_LOADER(FN, ELEM, WORD, TYPE)                                                       \
  void FN(uint r, out vec4 x[D4]) {                                                              \
    if (TYPE == KV_Q8_0 || TYPE == KV_Q4_0) {                                                     \
      const uint rb = r * kv_row_words(TYPE), vw = kv_value_words(TYPE);                         \
      uint sw[KV_SCALE_WORDS + 1u];                                                              \
      [[unroll]] for (uint w = 0u; w < KV_SCALE_WORDS; ++w) sw[w] = WORD(rb + vw + w);         \
      if (TYPE == KV_Q8_0) {                                                                      \
        [[unroll]] for (uint c = 0u; c < D4; ++c) x[c] = kv_q8(WORD(rb + c), kv_scale(sw[c >> 4u], c >> 3u)); \
      } else {                                                                                    \
        [[unroll]] for (uint j = 0u; j < D4 / 2u; ++j) {                                       \
          const uint w = WORD(rb + j);                                                            \
          const float d = kv_scale(sw[j >> 3u], j >> 2u);                                         \
          x[2u * j] = kv_q4(w, 0u, d);                                                            \
          x[2u * j + 1u] = kv_q4(w, 16u, d);                                                      \
        }                                                                                         \
      }                                                                                           \
    } else {                                                                                      \
      [[unroll]] for (uint c = 0u; c < D4; ++c) x[c] = ELEM(r * D4 + c);                       \
    }                                                                                             \
  }
#if defined(ATTN_KV_READ) && defined(KV_TEX)
// The i-th vec4 of a cache of type TYPE read through the integer view T.
#define KV_TEX_LOADER(FN, T, TYPE)                                                          \
  vec4 FN(uint i) {                                                                         \
    if (TYPE == KV_F32) return uintBitsToFloat(texelFetch(T, int(i)));                      \
    if (TYPE == KV_F16) {                                                                   \
      const uvec4 h = texelFetch(T, int(i));                                                \
      return vec4(unpackHalf2x16(h.x | (h.y << 16u)), unpackHalf2x16(h.z | (h.w << 16u))); \
    }                                                                                       \
    const uint r = i / D4, c = i - r * D4;                                                  \
    const uint rb = r * kv_row_words(TYPE);                                                 \
    const float d = kv_scale(texelFetch(T, int(rb + kv_value_words(TYPE) + (c >> 4u))).x,  \
                             c >> 3u);                                                      \
    if (TYPE == KV_Q8_0) return kv_q8(texelFetch(T, int(rb + c)).x, d);                    \
    return kv_q4(texelFetch(T, int(rb + (c >> 1u))).x, (c & 1u) * 16u, d);                 \
  }
KV_TEX_LOADER(load_kc, kc_t, KTYPE)
KV_TEX_LOADER(load_kr, kr_t, KTYPE)
KV_TEX_LOADER(load_vc, vc_t, VTYPE)
#define KC_WORD(j) texelFetch(kc_t, int(j)).x
#define KR_WORD(j) texelFetch(kr_t, int(j)).x
#define VC_WORD(j) texelFetch(vc_t, int(j)).x
#elif defined(ATTN_KV_READ)
KV_LOADER(load_kc, kc, kcw, KTYPE)
KV_LOADER(load_kr, kr_buf, krw, KTYPE)
KV_LOADER(load_vc, vc, vcw, VTYPE)
#define KC_WORD(j) kcw[j]
#define KR_WORD(j) krw[j]
#define VC_WORD(j) vcw[j]
#endif
#if defined(ATTN_KV_READ)
KV_ROW_LOADER(load_kc_row, load_kc, KC_WORD, KTYPE)
// Row r of the key cache, holding position m of kv head g: from kcal where that key is kept exact
// (attention_key_calib.glsl).  Callers reach it only for a tile that may hold one (a uniform branch).
void load_kc_row_exact(uint g, int m, uint r, out vec4 x[D4]) {
  if (uint(m) < kcal_exact_keys()) {
    const uint at = kcal_exact_at(g, uint(m));
    [[unroll]] for (uint c = 0u; c < D4; ++c) x[c] = kcal[at + c];
  } else {
    load_kc_row(r, x);
  }
}
KV_ROW_LOADER(load_kr_row, load_kr, KR_WORD, KTYPE)
KV_ROW_LOADER(load_vc_row, load_vc, VC_WORD, VTYPE)
#endif
