// How the attention kernels (prefill, decode, lanes decode) read the K / V
// caches and the cos/sin tables: KC(i), KR(i), VC(i) give the i-th vec4 of the
// cache, rotated-key cache and value cache as the f32 layout numbers them
// (i = row·D4 + c), whatever KTYPE / VTYPE store; TAB1(i) / TAB2(i) the tables'.
// The including shader includes the spec header first, then this file, then
// attention_common.glsl and attention_kv_codec.glsl, which makes the loaders
// (ATTN_KV_READ says it should).
//
// KV_TEX (the variant CPU devices run): llvmpipe gathers a texel fetch as one
// vector op but runs a lane-varying storage-buffer load lane by lane, with a
// bounds check each, and these are the loads inside the key loops.  The caches
// are unsigned-integer texel views whose texel the host picks by type
// (Attention::kv_texel_format): f32 rows as R32G32B32A32_UINT (one texel per
// vec4), f16 as R16G16B16A16_UINT (one texel per vec4, four halves), q8_0 /
// q4_0 as R32_UINT (the words attention_kv_codec.glsl unpacks).  One variant
// serves every type, mixed K / V types included.
#if defined(KV_TEX)
layout(binding = B_KCACHE) uniform usamplerBuffer kc_t;
layout(binding = B_KROT) uniform usamplerBuffer kr_t;
layout(binding = B_VCACHE) uniform usamplerBuffer vc_t;
layout(binding = B_TAB1) uniform samplerBuffer tab1_t;
layout(binding = B_TAB2) uniform samplerBuffer tab2_t;
#define TAB1(i) texelFetch(tab1_t, int(i))
#define TAB2(i) texelFetch(tab2_t, int(i))
#else
// Storage buffers: each cache binding also as uints, the words of f16 and
// quantized rows.
layout(binding = B_KCACHE) readonly buffer KC { vec4 kc[]; };
layout(binding = B_KCACHE) readonly buffer KCW { uint kcw[]; };
layout(binding = B_KROT) readonly buffer KRot { vec4 kr_buf[]; };
layout(binding = B_KROT) readonly buffer KRotW { uint krw[]; };
layout(binding = B_VCACHE) readonly buffer VC { vec4 vc[]; };
layout(binding = B_VCACHE) readonly buffer VCW { uint vcw[]; };
layout(binding = B_TAB1) readonly buffer T1 { vec4 tab1[]; };
layout(binding = B_TAB2) readonly buffer T2 { vec4 tab2[]; };
#endif
#define KR(i) load_kr(i)
#define KC(i) load_kc(i)
#define VC(i) load_vc(i)

#define ATTN_KV_READ
