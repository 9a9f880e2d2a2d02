// The bindings of the attention kernels that read the cache (attention_prefill.h,
// attention_decode.h): all but 6, each kernel's own output (OUT / PART).
BINDING(0, STEP)     // StepParams
BINDING(1, Q)        // raw query rows
BINDING(2, KCACHE)   // K cache (texel variant: R32G32B32A32 texels)
BINDING(3, VCACHE)   // V cache (texel)
BINDING(4, TAB1)     // rope table 1 (texel)
BINDING(5, TAB2)     // rope table 2 (texel)
BINDING(7, KROT)     // pre-rotated keys, branch 1 (KROT; texel)
BINDING(8, SINK)     // per-head sink logits, f32 [n_heads] (SINK; decode: FUSED only), or the keys'
                     // calibration (KCAL, which sink logits exclude; attention_key_calib.glsl)
